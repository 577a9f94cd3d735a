package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type resultInput struct {
	SiteRequest
	Sequence int64  `path:"sequence" minimum:"1" doc:"The sequence of the command the result answers."`
	RawBody  []byte `contentType:"application/json"`
}

type ackOutput struct {
	Body siteprotocol.Acknowledgement
}

func (h *Handlers) recordResultOperation(reg huma.Registry) huma.Operation {
	op := h.siteOperation(huma.Operation{
		OperationID: "record-result", Method: http.MethodPut, Path: "/site/v1/streams/{environment}/commands/{sequence}/result",
		Summary:          "Record a command's result",
		Description:      "Only the installation the stream is bound to may send results: a stream is bound by a pull, never by a result, so a result on an unbound stream (never pulled, or unbound by an operator) or from another installation is 409 installation-mismatch and records nothing. A result whose body sequence differs from the path's is 409 identity-mismatch. The sequence must be acknowledged + 1 and the result must name the stored command's id and digest (else 409 out-of-order / identity-mismatch). The body is at most 4194304 bytes (413). A result for an acknowledged sequence is accepted only if byte-identical (same digest): 200 with the same acknowledgement; otherwise 409 result-conflict and nothing changes. The result's exact bytes are stored.",
		MaxBodyBytes:     MaxResultBytes + 1, // jsonBody enforces MaxResultBytes itself
		SkipValidateBody: true,
		Middlewares:      huma.Middlewares{rawJSONBody(MaxResultBytes, siteprotocol.ProblemInvalidResult, "one result object")},
	}, map[int][]string{
		400: {siteprotocol.ProblemInstallationRequired, siteprotocol.ProblemInvalidResult, httpserver.DefaultReason(http.StatusBadRequest)},
		404: {siteprotocol.ProblemUnknownEnvironment, siteprotocol.ProblemUnknownCommand},
		409: {siteprotocol.ProblemInstallationMismatch, siteprotocol.ProblemOutOfOrder, siteprotocol.ProblemIdentityMismatch, siteprotocol.ProblemResultConflict},
		408: {httpserver.ReasonRequestTimeout}, 413: {httpserver.DefaultReason(http.StatusRequestEntityTooLarge)}, 415: {httpserver.DefaultReason(http.StatusUnsupportedMediaType)}, 422: {siteprotocol.ProblemInvalidResult, httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
	op.Metadata = withRawBody(op.Metadata, resultSchema(reg), "A result exactly as the Runtime saved it (JCS with its digest).")
	return op
}

// recordResult records the exact bytes of a Runtime's result and answers
// the acknowledgement (the same one for a byte-identical replay).
func (h *Handlers) recordResult(ctx context.Context, in *resultInput) (*ackOutput, error) {
	if err := requireInstallation(&in.SiteRequest); err != nil {
		return nil, err
	}
	ack, err := h.Streams.RecordResult(ctx, in.Environment, in.Installation, in.Sequence, in.RawBody)
	if err != nil {
		return nil, h.problem(ctx, err, siteprotocol.ProblemInvalidResult)
	}
	return &ackOutput{Body: siteprotocol.Acknowledgement{AcknowledgedSequence: ack.Sequence, ResultDigest: ack.ResultDigest}}, nil
}
