// Package httpapi serves the execution_ports routes on the process's Huma
// API (tag execution_ports): the Site protocol routes a Runtime calls
// (/site/v1/…, principal environment:<id> of the path's environment, header
// Metallo-Installation on every request) and Execution's routes
// (/execution/v1/…, a service principal from the configured set). Route
// table: docs/site-protocol.md#routes; planning:
// docs/execution-ports.md#capacity-planning. Every
// 4xx is RFC 9457 problem details with the protocol's kebab-case reason.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/ijson"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Tag is the OpenAPI tag of every operation here (the context's name).
const Tag = "execution_ports"

// DefaultService is the service principal ID that may call Execution's
// routes unless configured otherwise: keys.yaml's "service:execution".
const DefaultService = "execution"

// RetryAfterSeconds is the Retry-After of a 503 unavailable answer.
const RetryAfterSeconds = "5"

// MaxResultBytes bounds a result body: a read-file or proxy detail carries
// up to 1 MiB base64-encoded plus the envelope.
const MaxResultBytes = 4 << 20

// MaxRequestBytes bounds the other JSON request bodies (rebind, plans).
const MaxRequestBytes = 1 << 20

// Handlers holds what the routes call. Registering with a zero Handlers
// documents the routes without serving them (metallo openapi).
type Handlers struct {
	Streams *application.Streams
	Planner *application.Planner
	// Deliverer answers the binding deliveries read (deliveries.go).
	Deliverer *application.Deliverer
	// Services are the service principal IDs allowed on /execution/v1
	// routes (default DefaultService).
	Services []string
	Log      *zap.Logger
}

// Register adds the execution_ports operations to api.
func Register(api huma.API, h *Handlers) {
	if h.Log == nil {
		h.Log = zap.NewNop()
	}
	if len(h.Services) == 0 {
		h.Services = []string{DefaultService}
	}
	registerSite(api, h)
	registerExecution(api, h)
	registerDeliveries(api, h)
	documentDetails(api)
}

// documentDetails adds each operation's result detail object to the
// document's schemas and says on the Result's detail which operation
// answers with which (docs/site-protocol.md#operations): the server records
// a detail as the Runtime sent it.
func documentDetails(api huma.API) {
	reg := api.OpenAPI().Components.Schemas
	for _, t := range []reflect.Type{
		reflect.TypeFor[siteprotocol.BindingDetail](), reflect.TypeFor[siteprotocol.PrepareDetail](),
		reflect.TypeFor[siteprotocol.StateDetail](), reflect.TypeFor[siteprotocol.ObserveDetail](),
		reflect.TypeFor[siteprotocol.CancelDetail](), reflect.TypeFor[siteprotocol.CleanupDetail](),
		reflect.TypeFor[siteprotocol.ReadLogsDetail](), reflect.TypeFor[siteprotocol.ReadFileDetail](),
		reflect.TypeFor[siteprotocol.ProxyDetail](),
	} {
		reg.Schema(t, true, t.Name())
	}
	if result := reg.Map()["Result"]; result != nil {
		if d := result.Properties["detail"]; d != nil {
			d.Description = "The operation's detail object: BindingDetail (bind-member, retire-member), PrepareDetail (prepare), " +
				"StateDetail (start), ObserveDetail (observe; exit_code for a finished batch Attempt), CancelDetail (cancel), " +
				"CleanupDetail (cleanup), ReadLogsDetail (read-logs), ReadFileDetail (read-file), ProxyDetail (proxy)."
		}
	}
}

// StoredCommand is a command exactly as the server serves it (the JCS form
// of its stored object with sequence and digest); its schema is the
// Command schema.
type StoredCommand []byte

// MarshalJSON returns the stored bytes unchanged.
func (c StoredCommand) MarshalJSON() ([]byte, error) { return c, nil }

// Schema documents a stored command as a siteprotocol.Command.
func (StoredCommand) Schema(r huma.Registry) *huma.Schema {
	return r.Schema(reflect.TypeFor[siteprotocol.Command](), true, "Command")
}

// RecordedResult is a result exactly as the Runtime sent it; its schema is
// the Result schema.
type RecordedResult []byte

// MarshalJSON returns the recorded bytes unchanged.
func (r RecordedResult) MarshalJSON() ([]byte, error) { return r, nil }

// Schema documents a recorded result as a siteprotocol.Result.
func (RecordedResult) Schema(r huma.Registry) *huma.Schema {
	return r.Schema(reflect.TypeFor[siteprotocol.Result](), true, "Result")
}

// EnvironmentPath is the environment path parameter of Execution's stream
// routes (exported: Huma reads parameters only of exported embedded
// structs).
type EnvironmentPath struct {
	Environment string `path:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Execution environment ID, e.g. alpha-k8s (1-128 letters, digits, '.', '_' or '-')."`
}

// SiteRequest holds what every Site route's input carries: the environment
// and the installation header (exported: Huma reads parameters only of
// exported embedded structs).
type SiteRequest struct {
	Environment  string `path:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Execution environment ID, e.g. alpha-k8s (1-128 letters, digits, '.', '_' or '-')."`
	Installation string `header:"Metallo-Installation" doc:"The Runtime installation ID (required on every Site route). The first installation that pulls an unbound stream binds it; any other is refused with 409 installation-mismatch until an operator rebinds the stream."`
}

func stateBody(env domain.Environment, st domain.StreamState) siteprotocol.StreamState {
	return siteprotocol.StreamState{
		Environment: env.ID, Site: env.Site, Authority: env.Authority,
		AcknowledgedSequence: st.AcknowledgedSequence, HeadSequence: st.HeadSequence, InstallationID: st.InstallationID,
	}
}

type stateOutput struct {
	Body siteprotocol.StreamState
}

type pullInput struct {
	SiteRequest
	After int64 `query:"after" minimum:"0" default:"0" doc:"Return commands with a sequence greater than this."`
	Limit int   `query:"limit" minimum:"1" maximum:"100" default:"100" doc:"At most this many commands."`
	Wait  int   `query:"wait" minimum:"0" maximum:"30" default:"0" doc:"Seconds to wait for a command when none is ready (long poll)."`
	Bind  bool  `query:"bind" default:"true" doc:"Bind an unbound stream to this installation (a Runtime's pull). false is a read-only pull (metallo runtime check): an unbound stream stays unbound; a stream bound to another installation is still 409 installation-mismatch."`
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

type resultInput struct {
	SiteRequest
	Sequence int64  `path:"sequence" minimum:"1" doc:"The sequence of the command the result answers."`
	RawBody  []byte `contentType:"application/json"`
}

type ackOutput struct {
	Body siteprotocol.Acknowledgement
}

func registerSite(api huma.API, h *Handlers) {
	huma.Register(api, huma.Operation{
		OperationID: "get-stream-state",
		Method:      http.MethodGet,
		Path:        "/site/v1/streams/{environment}",
		Summary:     "Read a stream's state",
		Description: "The environment, its Site and authority, the acknowledged and head sequences and the bound installation. `metallo runtime check` reads it; it never binds the stream.",
		Tags:        []string{Tag},
		Security:    httpserver.Bearer(),
		Metadata:    h.siteAdmit(),
		Middlewares: huma.Middlewares{h.knownEnvironment},
		Errors:      []int{400, 401, 403, 404, 409, 422, 503},
	}, func(ctx context.Context, in *SiteRequest) (*stateOutput, error) {
		if err := h.siteAccess(ctx, in); err != nil {
			return nil, err
		}
		env, st, err := h.Streams.State(ctx, in.Environment, in.Installation)
		if err != nil {
			return nil, h.problem(err, "")
		}
		return &stateOutput{Body: stateBody(env, st)}, nil
	})
	requireHeaderInDocs(api, "/site/v1/streams/{environment}", http.MethodGet)

	huma.Register(api, huma.Operation{
		OperationID: "pull-commands",
		Method:      http.MethodGet,
		Path:        "/site/v1/streams/{environment}/commands",
		Summary:     "Pull commands",
		Description: "Commands with sequence > after, oldest first, at most limit, whose encoded sizes add up to at most 8 MiB (MaxPullBytes) — except that the next command is always answered, so a large command never stalls the stream; waits up to wait seconds when none is ready. The first installation that pulls an unbound stream binds it (bind=true, the default). bind=false is a read-only pull (`metallo runtime check`): it never binds an unbound stream, and a stream bound to another installation is still 409 installation-mismatch.",
		Tags:        []string{Tag},
		Security:    httpserver.Bearer(),
		Metadata:    h.siteAdmit(),
		Middlewares: huma.Middlewares{h.knownEnvironment},
		Errors:      []int{400, 401, 403, 404, 409, 422, 503},
	}, func(ctx context.Context, in *pullInput) (*pullOutput, error) {
		if err := h.siteAccess(ctx, &in.SiteRequest); err != nil {
			return nil, err
		}
		page, err := h.Streams.Pull(ctx, application.PullQuery{
			Environment: in.Environment, Installation: in.Installation, Principal: principalOf(ctx),
			After: in.After, Limit: in.Limit, Wait: time.Duration(in.Wait) * time.Second, Bind: in.Bind,
		})
		if err != nil {
			return nil, h.problem(err, "")
		}
		body := PullBody{Commands: make([]StoredCommand, 0, len(page.Commands)), HeadSequence: page.State.HeadSequence, AcknowledgedSequence: page.State.AcknowledgedSequence}
		for _, c := range page.Commands {
			body.Commands = append(body.Commands, c)
		}
		return &pullOutput{Body: body}, nil
	})
	requireHeaderInDocs(api, "/site/v1/streams/{environment}/commands", http.MethodGet)

	huma.Register(api, huma.Operation{
		OperationID:      "record-result",
		Method:           http.MethodPut,
		Path:             "/site/v1/streams/{environment}/commands/{sequence}/result",
		Summary:          "Record a command's result",
		Description:      "Only the installation the stream is bound to may send results: a stream is bound by a pull, never by a result, so a result on an unbound stream (never pulled, or unbound by an operator) or from another installation is 409 installation-mismatch and records nothing. A result whose body sequence differs from the path's is 409 identity-mismatch. The sequence must be acknowledged + 1 and the result must name the stored command's id and digest (else 409 out-of-order / identity-mismatch). The body is at most 4194304 bytes (413). A result for an acknowledged sequence is accepted only if byte-identical (same digest): 200 with the same acknowledgement; otherwise 409 result-conflict and nothing changes. The result's exact bytes are stored.",
		Tags:             []string{Tag},
		Security:         httpserver.Bearer(),
		MaxBodyBytes:     MaxResultBytes + 1, // jsonBody enforces MaxResultBytes itself
		SkipValidateBody: true,
		Metadata:         h.siteAdmit(),
		Middlewares:      huma.Middlewares{h.knownEnvironment, jsonBody(false, MaxResultBytes)},
		Errors:           []int{400, 401, 403, 404, 409, 413, 415, 422, 503},
	}, func(ctx context.Context, in *resultInput) (*ackOutput, error) {
		if err := h.siteAccess(ctx, &in.SiteRequest); err != nil {
			return nil, err
		}
		ack, err := h.Streams.Acknowledge(ctx, in.Environment, in.Installation, in.Sequence, in.RawBody)
		if err != nil {
			return nil, h.problem(err, siteprotocol.ProblemInvalidResult)
		}
		return &ackOutput{Body: siteprotocol.Acknowledgement{AcknowledgedSequence: ack.Sequence, ResultDigest: ack.ResultDigest}}, nil
	})
	path := "/site/v1/streams/{environment}/commands/{sequence}/result"
	requireHeaderInDocs(api, path, http.MethodPut)
	documentBody(api, path, http.MethodPut, reflect.TypeFor[siteprotocol.Result](), "Result", "A result exactly as the Runtime saved it (JCS with its digest).")
	documentResultVocabulary(api)
}

// documentResultVocabulary closes the Result schema's outcome and reason
// over the protocol's vocabulary (platform/siteprotocol) and lists each
// reason with the one outcome it carries (docs/site-protocol.md#repository-checkout-reasons).
func documentResultVocabulary(api huma.API) {
	s := api.OpenAPI().Components.Schemas.Map()["Result"]
	if s == nil || s.Properties["reason"] == nil || s.Properties["outcome"] == nil {
		return
	}
	outcomes := []siteprotocol.Outcome{siteprotocol.OutcomeSucceeded, siteprotocol.OutcomeFailed, siteprotocol.OutcomeRefused}
	s.Properties["outcome"].Enum = nil
	for _, o := range outcomes {
		s.Properties["outcome"].Enum = append(s.Properties["outcome"].Enum, string(o))
	}
	s.Properties["outcome"].Description = "succeeded: the operation did its work; failed: it could not; refused: it was not allowed or not understood. It must be the reason's outcome."
	byOutcome := map[siteprotocol.Outcome][]string{}
	s.Properties["reason"].Enum = nil
	for _, r := range siteprotocol.Reasons() {
		s.Properties["reason"].Enum = append(s.Properties["reason"].Enum, string(r))
		o, _ := r.Outcome()
		byOutcome[o] = append(byOutcome[o], string(r))
	}
	var desc strings.Builder
	desc.WriteString("The closed reason vocabulary; each reason carries exactly one outcome (a result with another outcome is 422 invalid-result).")
	for _, o := range outcomes {
		fmt.Fprintf(&desc, " %s: %s.", o, strings.Join(byOutcome[o], ", "))
	}
	s.Properties["reason"].Description = desc.String()
}

type appendInput struct {
	EnvironmentPath
	RawBody []byte `contentType:"application/json"`
}

type appendOutput struct {
	Status int
	Body   siteprotocol.AppendReceipt
}

type commandInput struct {
	EnvironmentPath
	ID string `path:"id" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"The command ID (a lower-case UUID, as appended)."`
}

// CommandRecordBody is Execution's read of one command (the shape of
// siteprotocol.CommandRecord).
type CommandRecordBody struct {
	Command        StoredCommand  `json:"command" doc:"The command as the Runtime pulls it."`
	Result         RecordedResult `json:"result,omitempty" doc:"The recorded result's exact bytes; absent until acknowledged."`
	AcknowledgedAt string         `json:"acknowledged_at,omitempty" doc:"When the result was recorded (RFC 3339, UTC)."`
}

type commandOutput struct {
	Body CommandRecordBody
}

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

func registerExecution(api huma.API, h *Handlers) {
	const appendPath = "/execution/v1/streams/{environment}/commands"
	huma.Register(api, huma.Operation{
		OperationID:      "append-command",
		Method:           http.MethodPost,
		Path:             appendPath,
		Summary:          "Append a command",
		Description:      "Appends a command (no sequence; digest optional and checked) and answers its sequence: 201 when created; 200 with the original sequence and created false when the same id was appended with the same content (compared by the digest of its JCS form); 409 conflicting-retry for the same id with other content. The server stores the received object's canonical form. The body is at most 1048576 bytes (413).",
		Tags:             []string{Tag},
		Security:         httpserver.Bearer(),
		DefaultStatus:    http.StatusCreated,
		MaxBodyBytes:     siteprotocol.MaxCommandBytes + 1, // jsonBody enforces MaxCommandBytes itself
		SkipValidateBody: true,
		Metadata:         h.serviceAdmit(),
		Middlewares:      huma.Middlewares{h.knownEnvironment, jsonBody(false, siteprotocol.MaxCommandBytes)},
		Errors:           []int{400, 401, 403, 404, 409, 413, 415, 422, 503},
	}, func(ctx context.Context, in *appendInput) (*appendOutput, error) {
		if err := h.serviceAccess(ctx); err != nil {
			return nil, err
		}
		a, err := h.Streams.Append(ctx, in.Environment, in.RawBody)
		if err != nil {
			return nil, h.problem(err, siteprotocol.ProblemInvalidCommand)
		}
		out := &appendOutput{Status: http.StatusCreated, Body: siteprotocol.AppendReceipt{ID: a.ID, Sequence: a.Sequence, Digest: a.Digest, Created: a.Created}}
		if !a.Created {
			out.Status = http.StatusOK
		}
		return out, nil
	})
	documentBody(api, appendPath, http.MethodPost, reflect.TypeFor[siteprotocol.Command](), "Command", "The command to append, without sequence.")
	if op := api.OpenAPI().Paths[appendPath].Post; op != nil {
		created := op.Responses["201"]
		op.Responses["200"] = &huma.Response{Description: "An idempotent retry: the command was already appended with this content; its original sequence, created false.", Content: created.Content}
	}

	huma.Register(api, huma.Operation{
		OperationID: "get-command",
		Method:      http.MethodGet,
		Path:        "/execution/v1/streams/{environment}/commands/{id}",
		Summary:     "Read a command and its result",
		Description: "The command as stored (with its sequence and digest) and, once acknowledged, its exact result.",
		Tags:        []string{Tag},
		Security:    httpserver.Bearer(),
		Metadata:    h.serviceAdmit(),
		Middlewares: huma.Middlewares{h.knownEnvironment},
		Errors:      []int{401, 403, 404, 422, 503},
	}, func(ctx context.Context, in *commandInput) (*commandOutput, error) {
		if err := h.serviceAccess(ctx); err != nil {
			return nil, err
		}
		rec, err := h.Streams.Command(ctx, in.Environment, in.ID)
		if err != nil {
			return nil, h.problem(err, "")
		}
		cmd, err := siteprotocol.EncodeStored(rec.Command.Canonical, rec.Command.Sequence, rec.Command.Digest)
		if err != nil {
			return nil, h.problem(fmt.Errorf("serve stored command %s: %w", in.ID, err), "")
		}
		body := CommandRecordBody{Command: cmd}
		if rec.Result != nil {
			body.Result = rec.Result
			body.AcknowledgedAt = rec.AcknowledgedAt.UTC().Format(time.RFC3339Nano)
		}
		return &commandOutput{Body: body}, nil
	})

	huma.Register(api, huma.Operation{
		OperationID:  "rebind-stream",
		Method:       http.MethodPost,
		Path:         "/execution/v1/streams/{environment}/rebind",
		Summary:      "Rebind a stream to a Runtime installation",
		Description:  "An operator's explicit rebind: binds the stream to installation_id, or unbinds it with unbind: true (exactly one of the two; both, neither or an empty installation_id is 422 validation-failed), recorded with the calling principal, the time and the reason. The previously bound installation is refused from then on. The body must be application/json (415) and one I-JSON text: bytes that are not (not JSON, invalid UTF-8, a member twice, data after the value) are 400 invalid-request; a null or a NUL, a value of the wrong type and a number that does not fit its field are 422 validation-failed naming the member.",
		Tags:         []string{Tag},
		Security:     httpserver.Bearer(),
		Metadata:     h.serviceAdmit(),
		MaxBodyBytes: MaxRequestBytes + 1, // jsonBody enforces MaxRequestBytes itself
		Middlewares:  huma.Middlewares{h.knownEnvironment, jsonBody(true, MaxRequestBytes), bodyShape([]string{"installation_id", "unbind", "reason"})},
		Errors:       []int{400, 401, 403, 404, 415, 422, 503},
	}, func(ctx context.Context, in *rebindInput) (*rebindOutput, error) {
		if err := h.serviceAccess(ctx); err != nil {
			return nil, err
		}
		b, st, err := h.Streams.Rebind(ctx, in.Environment, in.Body.InstallationID, in.Body.Unbind, principalOf(ctx), in.Body.Reason)
		if err != nil {
			return nil, h.problem(err, "")
		}
		env, _ := h.Streams.Environment(in.Environment)
		out := &rebindOutput{}
		out.Body.Stream = stateBody(env, st)
		out.Body.Binding = BindingBody{
			Action: b.Action, InstallationID: b.InstallationID, PreviousInstallationID: b.PreviousInstallationID,
			Principal: b.Principal, Reason: b.Reason, RecordedAt: b.RecordedAt.UTC().Format(time.RFC3339Nano),
		}
		return out, nil
	})

	registerPlans(api, h)
}

// requireHeaderInDocs marks the Metallo-Installation header required in the
// OpenAPI document; the handler enforces it itself so a missing header is
// answered 400 installation-required.
func requireHeaderInDocs(api huma.API, path, method string) {
	op := operation(api, path, method)
	if op == nil {
		return
	}
	for _, p := range op.Parameters {
		if p.In == "header" && p.Name == siteprotocol.InstallationHeader {
			p.Required = true
		}
	}
}

// documentBody documents a raw JSON request body with the schema of t (the
// handler parses and validates it with platform/siteprotocol).
func documentBody(api huma.API, path, method string, t reflect.Type, hint, description string) {
	op := operation(api, path, method)
	if op == nil || op.RequestBody == nil {
		return
	}
	op.RequestBody.Description = description
	op.RequestBody.Content = map[string]*huma.MediaType{
		"application/json": {Schema: api.OpenAPI().Components.Schemas.Schema(t, true, hint)},
	}
}

func operation(api huma.API, path, method string) *huma.Operation {
	item := api.OpenAPI().Paths[path]
	if item == nil {
		return nil
	}
	switch method {
	case http.MethodGet:
		return item.Get
	case http.MethodPut:
		return item.Put
	case http.MethodPost:
		return item.Post
	}
	return nil
}

func principalOf(ctx context.Context) string {
	p, _ := auth.FromContext(ctx)
	return p.String()
}

// siteAccess allows only the principal environment:<path environment> and
// requires a well-formed installation header.
func (h *Handlers) siteAccess(ctx context.Context, in *SiteRequest) error {
	p, ok := auth.FromContext(ctx)
	if !ok || !p.Is(auth.KindEnvironment, in.Environment) {
		return httpserver.NewProblem(http.StatusForbidden, siteprotocol.ProblemForbidden,
			fmt.Sprintf("%s may not use the stream of environment %s", p, in.Environment))
	}
	if in.Installation == "" || !domain.ValidInstallationID(in.Installation) {
		return httpserver.NewProblem(http.StatusBadRequest, siteprotocol.ProblemInstallationRequired,
			"header "+siteprotocol.InstallationHeader+" must carry the Runtime's installation ID (1-128 letters, digits, '.', '_' or '-')",
			&huma.ErrorDetail{Location: "header." + siteprotocol.InstallationHeader, Message: "required installation ID", Value: in.Installation})
	}
	return nil
}

// serviceAccess allows only the configured service principals.
func (h *Handlers) serviceAccess(ctx context.Context) error {
	p, ok := auth.FromContext(ctx)
	if !ok || p.Kind != auth.KindService || !slices.Contains(h.Services, p.ID) {
		return httpserver.NewProblem(http.StatusForbidden, siteprotocol.ProblemForbidden,
			fmt.Sprintf("%s may not use Execution's routes; they need one of the service keys %s", p, strings.Join(prefixed(h.Services), ", ")))
	}
	return nil
}

func prefixed(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, auth.KindService+":"+id)
	}
	return out
}

// problem maps a service error to problem details. invalidReason is the
// reason for a malformed or invalid body (invalid-command / invalid-result).
// Anything unexpected is logged once here and answered 500.
func (h *Handlers) problem(err error, invalidReason string) error {
	type mapping struct {
		target error
		status int
		reason string
	}
	for _, m := range []mapping{
		{domain.ErrUnknownEnvironment, http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment},
		{domain.ErrUnknownCommand, http.StatusNotFound, siteprotocol.ProblemUnknownCommand},
		{domain.ErrConflictingRetry, http.StatusConflict, siteprotocol.ProblemConflictingRetry},
		{domain.ErrOutOfOrder, http.StatusConflict, siteprotocol.ProblemOutOfOrder},
		{domain.ErrIdentityMismatch, http.StatusConflict, siteprotocol.ProblemIdentityMismatch},
		{domain.ErrResultConflict, http.StatusConflict, siteprotocol.ProblemResultConflict},
		{domain.ErrInstallationMismatch, http.StatusConflict, siteprotocol.ProblemInstallationMismatch},
		{siteprotocol.ErrTooLarge, http.StatusRequestEntityTooLarge, httpserver.DefaultReason(http.StatusRequestEntityTooLarge)},
		{siteprotocol.ErrMalformed, http.StatusBadRequest, invalidReason},
		{siteprotocol.ErrDigestMismatch, http.StatusUnprocessableEntity, invalidReason},
		{siteprotocol.ErrInvalid, http.StatusUnprocessableEntity, invalidReason},
		{application.ErrInvalidRequest, http.StatusUnprocessableEntity, httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	} {
		if errors.Is(err, m.target) {
			if m.target == siteprotocol.ErrMalformed {
				m.status = malformedStatus(err)
			}
			return httpserver.NewProblem(m.status, m.reason, err.Error(), fieldErrors(err)...)
		}
	}
	if errors.Is(err, application.ErrUnavailable) {
		// The detail never carries the driver's text (it can name the
		// database's host, user or file); the log does.
		h.Log.Warn("execution_ports store unavailable", zap.Error(err))
		return huma.ErrorWithHeaders(
			httpserver.NewProblem(http.StatusServiceUnavailable, httpserver.DefaultReason(http.StatusServiceUnavailable), "the stream store cannot be reached now; retry later"),
			http.Header{"Retry-After": {RetryAfterSeconds}})
	}
	if errors.Is(err, context.Canceled) {
		return httpserver.NewProblem(http.StatusServiceUnavailable, httpserver.DefaultReason(http.StatusServiceUnavailable), "the request was cancelled")
	}
	h.Log.Error("execution_ports request failed", zap.Error(err))
	return httpserver.NewProblem(http.StatusInternalServerError, httpserver.DefaultReason(http.StatusInternalServerError), "internal error; see the server log")
}

// fieldErrors locates a codec error: each field of a
// *siteprotocol.ValidationError, the member of a *siteprotocol.DecodeError,
// or where an *ijson.Error breaks a strictness rule ("body" for the whole
// text). Values are never echoed.
func fieldErrors(err error) []*huma.ErrorDetail {
	var ve *siteprotocol.ValidationError
	var de *siteprotocol.DecodeError
	var je *ijson.Error
	switch {
	case errors.As(err, &de):
		loc := "body"
		if de.Field != "" {
			loc += "." + de.Field
		}
		return []*huma.ErrorDetail{{Location: loc, Message: de.Message}}
	case errors.As(err, &je):
		return []*huma.ErrorDetail{{Location: je.Path.Location("body"), Message: je.Description()}}
	case !errors.As(err, &ve):
		return nil
	}
	out := make([]*huma.ErrorDetail, 0, len(ve.Fields))
	for _, f := range ve.Fields {
		out = append(out, &huma.ErrorDetail{Location: "body." + f.Field, Message: f.Message})
	}
	return out
}
