package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type stopInput struct {
	SiteRequest
	Body siteprotocol.StopReport
}

type stopOutput struct {
	Body RuntimeStopBody
}

func (h *Handlers) reportStopOperation() huma.Operation {
	op := huma.Operation{
		OperationID: "report-stop", Method: http.MethodPost, Path: "/site/v1/streams/{environment}/stop",
		Summary:      "Report the Runtime's stop",
		Description:  "A Runtime whose worker stopped reports why (a stop reason of docs/site-runtime.md#stop-conditions), the sequence it stopped at and its version, best effort, before it exits or idles (docs/site-protocol.md#the-stop-report). It replaces any stop on record for the stream; the next pull that binds the stream (the Runtime working again) clears it. Fenced like a result: an installation other than the bound one is 409 installation-mismatch and nothing is recorded. A reason outside the vocabulary, a bad version or a message over 1000 bytes is 422 validation-failed. The body must be declared JSON, arrive whole and be one I-JSON text (400 invalid-request otherwise).",
		MaxBodyBytes: MaxRequestBytes + 1, // jsonBody enforces MaxRequestBytes itself
		Middlewares:  huma.Middlewares{jsonBody(MaxRequestBytes, "reason", "sequence", "runtime_version", "message"), bodyShape([]string{"reason", "sequence", "runtime_version", "message"})},
	}
	return h.siteOperation(op, map[int][]string{
		400: {siteprotocol.ProblemInstallationRequired, httpserver.DefaultReason(http.StatusBadRequest)}, 404: {siteprotocol.ProblemUnknownEnvironment},
		408: {httpserver.ReasonRequestTimeout}, 409: {siteprotocol.ProblemInstallationMismatch}, 413: {httpserver.DefaultReason(http.StatusRequestEntityTooLarge)},
		415: {httpserver.DefaultReason(http.StatusUnsupportedMediaType)}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
}

// reportStop records the stop a Runtime reports and answers it as recorded.
func (h *Handlers) reportStop(ctx context.Context, in *stopInput) (*stopOutput, error) {
	if err := requireInstallation(&in.SiteRequest); err != nil {
		return nil, err
	}
	stop, err := h.Streams.ReportStop(ctx, in.Environment, in.Installation, in.Body)
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	return &stopOutput{Body: RuntimeStopBody{
		Reason: string(stop.Reason), Sequence: stop.Sequence, RuntimeVersion: stop.Version,
		InstallationID: stop.InstallationID, Message: stop.Message, StoppedAt: rfc3339(stop.StoppedAt),
	}}, nil
}
