package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type rebindInput struct {
	EnvironmentPath
	Body struct {
		InstallationID string `json:"installation_id,omitempty" maxLength:"128" doc:"The installation to bind (1-128 letters, digits, '.', '_' or '-'). Give exactly one of installation_id and unbind: true."`
		Unbind         bool   `json:"unbind,omitempty" doc:"true unbinds the stream, so the next installation that pulls binds it. Give exactly one of installation_id and unbind: true (both, neither or an empty installation_id is 422 validation-failed)."`
		Reason         string `json:"reason" minLength:"1" maxLength:"1000" doc:"Why the stream is rebound; recorded with who and when."`
	}
}

// BindingBody is a recorded binding of a stream.
type BindingBody struct {
	Action                 string `json:"action" enum:"bound,rebound,unbound" doc:"bound: the first pull of an unbound stream; rebound: an operator bound it to installation_id; unbound: an operator unbound it (unbind: true)."`
	InstallationID         string `json:"installation_id,omitempty"`
	PreviousInstallationID string `json:"previous_installation_id,omitempty"`
	Principal              string `json:"principal" doc:"Who bound the stream."`
	Reason                 string `json:"reason"`
	RecordedAt             string `json:"recorded_at" doc:"When (RFC 3339, UTC)."`
}

type rebindOutput struct {
	Body struct {
		Stream  siteprotocol.StreamState `json:"stream"`
		Binding BindingBody              `json:"binding"`
	}
}

func (h *Handlers) rebindStreamOperation() huma.Operation {
	return h.serviceOperation(huma.Operation{
		OperationID: "rebind-stream", Method: http.MethodPost, Path: "/execution/v1/streams/{environment}/rebind",
		Summary:      "Rebind a stream to a Runtime installation",
		Description:  "An operator's explicit rebind: binds the stream to installation_id, or unbinds it with unbind: true (exactly one of the two; both, neither or an empty installation_id is 422 validation-failed), recorded with the calling principal, the time and the reason. The previously bound installation is refused from then on. The body must be declared JSON (application/json or a +json type, in any case, UTF-8; 415 otherwise), arrive whole (a body shorter than its Content-Length is 400 invalid-request) and be one I-JSON text: bytes that are not (not JSON, invalid UTF-8, a member twice, data after the value, nested deeper than 32 levels) are 400 invalid-request; a null or a NUL, a value of the wrong type and a number that does not fit its field are 422 validation-failed naming the member.",
		MaxBodyBytes: MaxRequestBytes + 1, // jsonBody enforces MaxRequestBytes itself
		Middlewares:  huma.Middlewares{jsonBody(MaxRequestBytes), bodyShape([]string{"installation_id", "unbind", "reason"})},
	}, map[int][]string{
		400: {httpserver.DefaultReason(http.StatusBadRequest)}, 404: {siteprotocol.ProblemUnknownEnvironment}, 408: {httpserver.ReasonRequestTimeout}, 413: {httpserver.DefaultReason(http.StatusRequestEntityTooLarge)}, 415: {httpserver.DefaultReason(http.StatusUnsupportedMediaType)}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
}

// rebindStream binds the stream to an installation, or unbinds it, on an
// operator's request, recorded with the calling principal.
func (h *Handlers) rebindStream(ctx context.Context, in *rebindInput) (*rebindOutput, error) {
	b, st, err := h.Streams.Rebind(ctx, in.Environment, in.Body.InstallationID, in.Body.Unbind, principalOf(ctx), in.Body.Reason)
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	env, _ := h.Streams.Environment(in.Environment)
	out := &rebindOutput{}
	out.Body.Stream = stateBody(env, st)
	out.Body.Binding = bindingBody(b)
	return out, nil
}
