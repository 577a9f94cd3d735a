package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

type commandInput struct {
	EnvironmentPath
	ID string `path:"id" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"The command ID (a lower-case UUID, as appended)."`
}

// CommandRecordBody is Execution's read of one command (the shape of
// siteprotocol.CommandRecord; docs/site-protocol.md#read-results-expire).
type CommandRecordBody struct {
	Command         StoredCommand  `json:"command" doc:"The command as the Runtime pulls it."`
	Result          RecordedResult `json:"result,omitempty" doc:"The recorded result's exact bytes; absent until acknowledged, and absent once a read's result content expired (result_expired_at)."`
	ResultDigest    string         `json:"result_digest,omitempty" doc:"The recorded result's digest (lower-case hex SHA-256); absent until acknowledged, kept after the content expired."`
	AcknowledgedAt  string         `json:"acknowledged_at,omitempty" doc:"When the result was recorded (RFC 3339, UTC)."`
	ResultExpiredAt string         `json:"result_expired_at,omitempty" doc:"When the result's content was dropped (RFC 3339, UTC): a read's result (read-logs, read-file, proxy) is kept for the execution role's --read-result-retention after acknowledgement, then only its digest. Absent while the content is held."`
}

type commandOutput struct {
	Body CommandRecordBody
}

func (h *Handlers) getCommandOperation() huma.Operation {
	return h.serviceOperation(huma.Operation{
		OperationID: "get-command", Method: http.MethodGet, Path: "/execution/v1/streams/{environment}/commands/{id}",
		Summary:     "Read a command and its result",
		Description: "The command as stored (with its sequence and digest) and, once acknowledged, its result's digest and exact bytes; a read's result content (read-logs, read-file, proxy) is dropped after the execution role's --read-result-retention, and result_expired_at then says when (docs/site-protocol.md#read-results-expire).",
	}, map[int][]string{
		404: {siteprotocol.ProblemUnknownEnvironment, siteprotocol.ProblemUnknownCommand}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
}

// getCommand answers a command as stored and, once acknowledged, its
// result's digest and exact bytes, or when the content expired.
func (h *Handlers) getCommand(ctx context.Context, in *commandInput) (*commandOutput, error) {
	rec, err := h.Streams.Command(ctx, in.Environment, in.ID)
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	cmd, err := siteprotocol.EncodeStored(rec.Command.Canonical, rec.Command.Sequence, rec.Command.Digest)
	if err != nil {
		return nil, h.problem(ctx, fmt.Errorf("serve stored command %s: %w", in.ID, err), "")
	}
	body := CommandRecordBody{Command: cmd, Result: rec.Result}
	if rec.ResultDigest != "" {
		body.ResultDigest = rec.ResultDigest
		body.AcknowledgedAt = rec.AcknowledgedAt.UTC().Format(time.RFC3339Nano)
	}
	if !rec.ResultExpiredAt.IsZero() {
		body.ResultExpiredAt = rec.ResultExpiredAt.UTC().Format(time.RFC3339Nano)
	}
	return &commandOutput{Body: body}, nil
}
