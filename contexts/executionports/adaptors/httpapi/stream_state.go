package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type stateOutput struct {
	Body siteprotocol.StreamState
}

func (h *Handlers) getStreamStateOperation() huma.Operation {
	return huma.Operation{
		OperationID: "get-stream-state",
		Method:      http.MethodGet,
		Path:        "/site/v1/streams/{environment}",
		Summary:     "Read a stream's state",
		Description: "The environment, its Site and authority, the acknowledged and head sequences and the bound installation. `metallo runtime check` reads it; it never binds the stream.",
		Tags:        []string{Tag},
		Security:    httpserver.Bearer(),
		Metadata: withReasons(h.siteAdmit(), map[int][]string{
			400: {siteprotocol.ProblemInstallationRequired}, 404: {siteprotocol.ProblemUnknownEnvironment},
			409: {siteprotocol.ProblemInstallationMismatch}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
		}),
		Parameters:  installationParameters(),
		Middlewares: huma.Middlewares{h.knownEnvironment},
		Errors:      []int{400, 401, 403, 404, 409, 422, 503},
	}
}

// getStreamState answers the stream's state for the installation of the
// request (fenced, never binding).
func (h *Handlers) getStreamState(ctx context.Context, in *SiteRequest) (*stateOutput, error) {
	if err := requireInstallation(in); err != nil {
		return nil, err
	}
	env, st, err := h.Streams.State(ctx, in.Environment, in.Installation)
	if err != nil {
		return nil, h.problem(err, "")
	}
	return &stateOutput{Body: stateBody(env, st)}, nil
}

func stateBody(env domain.Environment, st domain.StreamState) siteprotocol.StreamState {
	return siteprotocol.StreamState{
		Environment: env.ID, Site: env.Site, Authority: env.Authority,
		AcknowledgedSequence: st.AcknowledgedSequence, HeadSequence: st.HeadSequence, InstallationID: st.InstallationID,
	}
}
