package httpapi

import (
	"context"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type appendInput struct {
	EnvironmentPath
	RawBody []byte `contentType:"application/json"`
}

type appendOutput struct {
	Status int
	Body   siteprotocol.AppendReceipt
}

func (h *Handlers) appendCommandOperation(reg huma.Registry) huma.Operation {
	receipt := reg.Schema(reflect.TypeFor[siteprotocol.AppendReceipt](), true, "AppendReceipt")
	op := h.serviceOperation(huma.Operation{
		OperationID: "append-command", Method: http.MethodPost, Path: "/execution/v1/streams/{environment}/commands",
		Summary:          "Append a command",
		Description:      "Appends a command (no sequence; digest optional and checked) and answers its sequence: 201 when created; 200 with the original sequence and created false when the same id was appended with the same content (compared by the digest of its JCS form); 409 conflicting-retry for the same id with other content. The server stores the received object's canonical form. The body is at most 1048576 bytes (413).",
		DefaultStatus:    http.StatusCreated,
		MaxBodyBytes:     siteprotocol.MaxCommandBytes + 1, // jsonBody enforces MaxCommandBytes itself
		SkipValidateBody: true,
		Responses: map[string]*huma.Response{
			"200": {
				Description: "An idempotent retry: the command was already appended with this content; its original sequence, created false.",
				Content:     map[string]*huma.MediaType{"application/json": {Schema: receipt}},
			},
		},
		Middlewares: huma.Middlewares{rawJSONBody(siteprotocol.MaxCommandBytes, siteprotocol.ProblemInvalidCommand, "one command object")},
	}, map[int][]string{
		400: {siteprotocol.ProblemInvalidCommand, httpserver.DefaultReason(http.StatusBadRequest)}, 404: {siteprotocol.ProblemUnknownEnvironment},
		409: {siteprotocol.ProblemConflictingRetry}, 408: {httpserver.ReasonRequestTimeout}, 413: {httpserver.DefaultReason(http.StatusRequestEntityTooLarge)}, 415: {httpserver.DefaultReason(http.StatusUnsupportedMediaType)},
		422: {siteprotocol.ProblemInvalidCommand, httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
	op.Metadata = withRawBody(op.Metadata, commandSchema(reg), "The command to append, without sequence.")
	return op
}

// appendCommand appends a command to the environment's stream: 201 when
// created, 200 for an idempotent retry with the same content.
func (h *Handlers) appendCommand(ctx context.Context, in *appendInput) (*appendOutput, error) {
	a, err := h.Streams.Append(ctx, in.Environment, in.RawBody)
	if err != nil {
		return nil, h.problem(ctx, err, siteprotocol.ProblemInvalidCommand)
	}
	out := &appendOutput{Status: http.StatusCreated, Body: siteprotocol.AppendReceipt{ID: a.ID, Sequence: a.Sequence, Digest: a.Digest, Created: a.Created}}
	if !a.Created {
		out.Status = http.StatusOK
	}
	return out, nil
}
