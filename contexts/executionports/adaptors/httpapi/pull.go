package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

type pullInput struct {
	SiteRequest
	After int64 `query:"after" minimum:"0" default:"0" doc:"Return commands with a sequence greater than this."`
	Limit int   `query:"limit" minimum:"1" maximum:"100" default:"100" doc:"At most this many commands."`
	Wait  int   `query:"wait" minimum:"0" maximum:"30" default:"0" doc:"Seconds to wait for a command when none is ready (long poll)."`
	Bind  bool  `query:"bind" default:"true" doc:"Bind an unbound stream to this installation (a Runtime's pull). false is a read-only pull (metallo runtime check): an unbound stream stays unbound; a stream bound to another installation is still 409 installation-mismatch."`
	// RuntimeVersion is siteprotocol.RuntimeVersionHeader; its rule is
	// siteprotocol.ValidRuntimeVersion's, checked by Huma from the tags.
	RuntimeVersion string `header:"Metallo-Runtime-Version" maxLength:"128" pattern:"^[!-~]+$" example:"v1.4.0" doc:"The Runtime's build version, as metallo version prints it (optional): 1-128 visible ASCII characters ('!' to '~'), else 422 validation-failed and nothing changes. A pull that binds (bind=true) and that the installation fence admits records it, with the installation and the pull's time, as the environment's last Runtime version; a read-only pull records nothing. A pull without it is served the same and records an empty version."`
}

// PullBody is the answer to a pull (the shape of siteprotocol.Pull).
type PullBody struct {
	Commands             []StoredCommand `json:"commands" doc:"Commands after the asked sequence, oldest first, exactly as stored (verify each digest)."`
	HeadSequence         int64           `json:"head_sequence" doc:"The stream's last assigned sequence."`
	AcknowledgedSequence int64           `json:"acknowledged_sequence" doc:"The last sequence whose result is recorded."`
}

type pullOutput struct {
	Body PullBody
}

func (h *Handlers) pullCommandsOperation() huma.Operation {
	return h.siteOperation(huma.Operation{
		OperationID: "pull-commands", Method: http.MethodGet, Path: "/site/v1/streams/{environment}/commands",
		Summary:     "Pull commands",
		Description: "Commands with sequence > after, oldest first, at most limit, whose encoded sizes add up to at most 8 MiB (MaxPullBytes) — except that the next command is always answered, so a large command never stalls the stream; waits up to wait seconds when none is ready. The first installation that pulls an unbound stream binds it (bind=true, the default). bind=false is a read-only pull (`metallo runtime check`): it never binds an unbound stream, and a stream bound to another installation is still 409 installation-mismatch.",
	}, siteReadReasons())
}

// pullCommands answers the commands after in.After, binding an unbound
// stream to the installation unless in.Bind is false.
func (h *Handlers) pullCommands(ctx context.Context, in *pullInput) (*pullOutput, error) {
	if err := requireInstallation(&in.SiteRequest); err != nil {
		return nil, err
	}
	page, err := h.Streams.Pull(ctx, application.PullQuery{
		Environment: in.Environment, Installation: in.Installation, Principal: principalOf(ctx),
		After: in.After, Limit: in.Limit, Wait: time.Duration(in.Wait) * time.Second, Bind: in.Bind, RuntimeVersion: in.RuntimeVersion,
	})
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	body := PullBody{Commands: make([]StoredCommand, 0, len(page.Commands)), HeadSequence: page.State.HeadSequence, AcknowledgedSequence: page.State.AcknowledgedSequence}
	for _, c := range page.Commands {
		body.Commands = append(body.Commands, c)
	}
	return &pullOutput{Body: body}, nil
}
