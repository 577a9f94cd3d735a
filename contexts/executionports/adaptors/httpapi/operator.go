package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The operator's reads (docs/operations.md#operator-reads): every
// environment with its stream and Runtime, a stream's commands with their
// results, and its binding history, for operator:<name> keys and the
// configured service keys. Member data is shown as sizes and digests only
// (siteprotocol.OperatorView). An operator key changes nothing: the
// append, rebind and plan routes admit service keys only (serviceAdmit).

// readerAdmit is the admission of the operator's reads: any operator
// principal or one of the configured service principals.
func (h *Handlers) readerAdmit() map[string]any {
	m := httpserver.AdmitMetadata(func(p auth.Principal, _ func(string) string) error {
		if p.Kind == auth.KindOperator || p.Kind == auth.KindService && slices.Contains(h.Services, p.ID) {
			return nil
		}
		return httpserver.NewProblem(http.StatusForbidden, siteprotocol.ProblemForbidden,
			fmt.Sprintf("%s may not use the operator's reads; they need an operator:<name> key or one of the service keys %s", p, strings.Join(prefixed(h.Services), ", ")))
	})
	maps.Copy(m, h.environmentLabel())
	return httpserver.WithPrincipals(m, append([]string{auth.KindOperator + ":*"}, prefixed(h.Services)...)...)
}

// RuntimeStopBody is the stop report on record for a stream.
type RuntimeStopBody struct {
	Reason         string `json:"reason" doc:"The stop reason (docs/site-runtime.md#stop-conditions)."`
	Sequence       int64  `json:"sequence" doc:"The sequence the worker stopped at: its pending command's, else the last it acknowledged."`
	RuntimeVersion string `json:"runtime_version" doc:"The stopped Runtime's version."`
	InstallationID string `json:"installation_id" doc:"The installation that reported it."`
	Message        string `json:"message" doc:"The stop's cause as the Runtime logged it."`
	StoppedAt      string `json:"stopped_at" doc:"When the server received the report (RFC 3339, UTC)."`
}

// EnvironmentBody is one environment as an operator reads it.
type EnvironmentBody struct {
	Environment          string           `json:"environment"`
	Site                 string           `json:"site"`
	Backend              string           `json:"backend" doc:"kubernetes or slurm."`
	HeadSequence         int64            `json:"head_sequence" doc:"The stream's last assigned sequence (0: no command yet)."`
	AcknowledgedSequence int64            `json:"acknowledged_sequence" doc:"The last sequence the Runtime acknowledged."`
	Lag                  int64            `json:"lag" doc:"Commands appended and not yet acknowledged: head_sequence - acknowledged_sequence."`
	InstallationID       string           `json:"installation_id,omitempty" doc:"The bound Runtime installation; absent while unbound."`
	BoundAt              string           `json:"bound_at,omitempty" doc:"When it was bound (RFC 3339, UTC)."`
	RuntimeVersion       *string          `json:"runtime_version,omitempty" doc:"The version of the Runtime's last recorded binding pull ('' when it sent none); absent before any."`
	LastPullAt           string           `json:"last_pull_at,omitempty" doc:"The time of the Runtime's last recorded binding pull (RFC 3339, UTC), recorded at least every minute while it pulls; absent before any."`
	Stop                 *RuntimeStopBody `json:"stop,omitempty" doc:"The stop the Runtime reported; absent while none is on record (a binding pull clears it)."`
}

type environmentsOutput struct {
	Body struct {
		Environments []EnvironmentBody `json:"environments" nullable:"false" doc:"Every configured environment, in ID order."`
	}
}

func (h *Handlers) listEnvironmentsOperation() huma.Operation {
	return operation(huma.Operation{
		OperationID: "list-environments", Method: http.MethodGet, Path: "/execution/v1/environments",
		Summary:     "List the environments with their streams and Runtimes",
		Description: "Every configured environment: its Site and backend, its stream's head and acknowledged sequences and lag, the bound installation, the Runtime's version and the time of its last recorded pull, and the stop its Runtime reported, if one is on record (docs/operations.md#operator-reads).",
	}, h.readerAdmit(), nil)
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func environmentBody(v application.EnvironmentView) EnvironmentBody {
	b := EnvironmentBody{
		Environment: v.Environment.ID, Site: v.Environment.Site, Backend: string(v.Environment.Backend),
		HeadSequence: v.State.HeadSequence, AcknowledgedSequence: v.State.AcknowledgedSequence, Lag: v.Lag(),
		InstallationID: v.State.InstallationID, BoundAt: rfc3339(v.State.BoundAt),
	}
	if v.HasVersion {
		version := v.Version.Version
		b.RuntimeVersion, b.LastPullAt = &version, rfc3339(v.Version.PulledAt)
	}
	if v.Stopped {
		b.Stop = &RuntimeStopBody{
			Reason: string(v.Stop.Reason), Sequence: v.Stop.Sequence, RuntimeVersion: v.Stop.Version,
			InstallationID: v.Stop.InstallationID, Message: v.Stop.Message, StoppedAt: rfc3339(v.Stop.StoppedAt),
		}
	}
	return b
}

// listEnvironments answers every configured environment's view.
func (h *Handlers) listEnvironments(ctx context.Context, _ *struct{}) (*environmentsOutput, error) {
	views, err := h.Streams.EnvironmentViews(ctx)
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	out := &environmentsOutput{}
	out.Body.Environments = make([]EnvironmentBody, 0, len(views))
	for _, v := range views {
		out.Body.Environments = append(out.Body.Environments, environmentBody(v))
	}
	return out, nil
}

type commandsInput struct {
	EnvironmentPath
	After     int64  `query:"after" minimum:"0" doc:"List the commands after this sequence, oldest first (0: from the first). Absent: the newest, and older pages with before."`
	Before    int64  `query:"before" minimum:"0" doc:"List the commands before this sequence (the older page: the answer's older). Not with after."`
	Limit     int    `query:"limit" minimum:"1" maximum:"200" default:"50" doc:"At most this many commands."`
	Operation string `query:"operation" maxLength:"64" doc:"Only commands of this operation, e.g. start."`
	Outcome   string `query:"outcome" enum:"succeeded,failed,refused,pending" doc:"Only commands whose recorded result has this outcome; pending: not acknowledged yet. A read whose result content expired has no outcome left to match."`
	Attempt   string `query:"attempt" maxLength:"64" doc:"Only commands of this Attempt (attempt_id)."`
	Member    string `query:"member" maxLength:"64" doc:"Only commands of this member (member_id, the Party)."`
	afterSet  bool
}

// Resolve notes whether the query named after (0 included), which lists
// forward; without it the listing reads back from the newest.
func (in *commandsInput) Resolve(ctx huma.Context) []error {
	in.afterSet = ctx.Query("after") != ""
	return nil
}

// CommandSummaryBody is one command as an operator reads it.
type CommandSummaryBody struct {
	Sequence        int64           `json:"sequence"`
	ID              string          `json:"id"`
	Operation       string          `json:"operation"`
	Family          string          `json:"family,omitempty"`
	RunID           string          `json:"run_id,omitempty"`
	AttemptID       string          `json:"attempt_id,omitempty"`
	MemberID        string          `json:"member_id,omitempty"`
	ProjectID       string          `json:"project_id,omitempty"`
	Digest          string          `json:"digest"`
	AppendedAt      string          `json:"appended_at"`
	Command         json.RawMessage `json:"command" doc:"The command as stored, a member's private values (env values, proxied bodies and header values) replaced by {private, size_bytes, sha256}."`
	Outcome         string          `json:"outcome,omitempty" doc:"The result's outcome; absent until acknowledged and once a read's content expired."`
	Reason          string          `json:"reason,omitempty"`
	Message         string          `json:"message,omitempty"`
	Result          json.RawMessage `json:"result,omitempty" doc:"The recorded result, its private values (read contents, proxied bodies and header values) replaced by {private, size_bytes, sha256}."`
	ResultDigest    string          `json:"result_digest,omitempty" doc:"The recorded result's digest; absent until acknowledged."`
	AcknowledgedAt  string          `json:"acknowledged_at,omitempty"`
	ResultExpiredAt string          `json:"result_expired_at,omitempty" doc:"When a read's result content was dropped (its digest stays)."`
}

type commandsOutput struct {
	Body struct {
		Environment string               `json:"environment"`
		Commands    []CommandSummaryBody `json:"commands" nullable:"false" doc:"The matching commands in ascending sequence."`
		Older       int64                `json:"older,omitempty" doc:"Pass as before for the older page; absent when this page reached the stream's first command."`
		Newer       int64                `json:"newer" doc:"Pass as after for the newer page (the stream may grow)."`
	}
}

func (h *Handlers) listCommandsOperation() huma.Operation {
	return h.streamOperation(huma.Operation{
		OperationID: "list-commands", Method: http.MethodGet, Path: "/execution/v1/streams/{environment}/commands",
		Summary:     "List a stream's commands and results",
		Description: "A page of the stream's commands with their results, newest by default, paginated both ways (after, before), filtered by operation, outcome, Attempt and member. A member's data is never shown: private-read contents, proxied bodies and header values and env values appear as their size and SHA-256 (docs/operations.md#operator-reads). One listing reads at most 5000 commands to fill a filtered page; the cursors go on from where it stopped.",
	}, h.readerAdmit(), map[int][]string{
		404: {siteprotocol.ProblemUnknownEnvironment}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
}

// listCommands answers an operator's page of a stream's commands.
func (h *Handlers) listCommands(ctx context.Context, in *commandsInput) (*commandsOutput, error) {
	page, err := h.Streams.Commands(ctx, in.Environment, application.CommandsQuery{
		Forward: in.afterSet, After: in.After, Before: in.Before, Limit: in.Limit,
		Operation: in.Operation, Outcome: in.Outcome, Attempt: in.Attempt, Member: in.Member,
	})
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	out := &commandsOutput{}
	out.Body.Environment, out.Body.Older, out.Body.Newer = in.Environment, page.Older, page.Newer
	out.Body.Commands = make([]CommandSummaryBody, 0, len(page.Commands))
	for _, c := range page.Commands {
		out.Body.Commands = append(out.Body.Commands, CommandSummaryBody{
			Sequence: c.Row.Sequence, ID: c.Row.ID, Operation: c.Row.Operation, Family: c.Family, RunID: c.RunID, AttemptID: c.AttemptID,
			MemberID: c.MemberID, ProjectID: c.ProjectID, Digest: c.Row.Digest, AppendedAt: rfc3339(c.Row.AppendedAt), Command: c.Command,
			Outcome: c.Outcome, Reason: c.Reason, Message: c.Message, Result: c.Result, ResultDigest: c.Row.ResultDigest,
			AcknowledgedAt: rfc3339(c.Row.AcknowledgedAt), ResultExpiredAt: rfc3339(c.Row.ResultExpiredAt),
		})
	}
	return out, nil
}

type bindingHistoryOutput struct {
	Body struct {
		Environment string        `json:"environment"`
		Bindings    []BindingBody `json:"bindings" nullable:"false" doc:"Every binding of the stream to a Runtime installation, oldest first."`
	}
}

func (h *Handlers) bindingHistoryOperation() huma.Operation {
	return h.streamOperation(huma.Operation{
		OperationID: "get-binding-history", Method: http.MethodGet, Path: "/execution/v1/streams/{environment}/binding-history",
		Summary:     "Read a stream's binding history",
		Description: "Every binding of the stream to a Runtime installation, oldest first: the first pull's (bound) and each operator's rebind or unbind, with who, when and why (docs/site-protocol.md#installation-fencing).",
	}, h.readerAdmit(), map[int][]string{
		404: {siteprotocol.ProblemUnknownEnvironment}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
}

// bindingHistory answers the stream's binding history.
func (h *Handlers) bindingHistory(ctx context.Context, in *EnvironmentPath) (*bindingHistoryOutput, error) {
	bs, err := h.Streams.Bindings(ctx, in.Environment)
	if err != nil {
		return nil, h.problem(ctx, err, "")
	}
	out := &bindingHistoryOutput{}
	out.Body.Environment = in.Environment
	out.Body.Bindings = make([]BindingBody, 0, len(bs))
	for _, b := range bs {
		out.Body.Bindings = append(out.Body.Bindings, bindingBody(b))
	}
	return out, nil
}

func bindingBody(b application.Binding) BindingBody {
	return BindingBody{
		Action: b.Action, InstallationID: b.InstallationID, PreviousInstallationID: b.PreviousInstallationID,
		Principal: b.Principal, Reason: b.Reason, RecordedAt: b.RecordedAt.UTC().Format(time.RFC3339Nano),
	}
}
