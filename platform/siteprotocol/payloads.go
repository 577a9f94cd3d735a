package siteprotocol

// Payloads and result details of each operation
// (docs/site-protocol.md#operations). Demand and quantities use
// canonical units: cpu in millicores, memory and storage in bytes,
// gpu.<vendor> in devices.

// BindMemberPayload applies a member binding in the Runtime's journal.
type BindMemberPayload struct {
	PartyID   string `json:"party_id"`
	Namespace string `json:"namespace"`
	// Account is the native account, always "member-<party_id>".
	Account    string `json:"account"`
	BindingID  string `json:"binding_id"`
	Revision   int64  `json:"revision"`
	Generation int64  `json:"generation"`
	// AccountUID is the Kubernetes UID of the service account Account the
	// binding names, as the Site reported it (at most MaxAccountUIDBytes); optional, so bindings written before
	// delivery sent it stay valid (such a binding is checked by name only).
	// The Runtime compares it with the live account before every create as
	// the member (docs/site-protocol.md#operations).
	AccountUID string `json:"account_uid,omitempty" maxLength:"256" doc:"The Kubernetes UID of the member-<party_id> service account, as the Site's agent reported it; optional. The Runtime compares it with the live account's UID before every create as the member: another UID is refused binding-conflict."`
}

// RetireMemberPayload retires a member binding generation.
type RetireMemberPayload struct {
	BindingID  string `json:"binding_id"`
	Generation int64  `json:"generation"`
}

// BindingDetail answers bind-member and retire-member.
type BindingDetail struct {
	AppliedRevision int64 `json:"applied_revision"`
}

// Repository is an exact Git commit to check out into the workspace.
type Repository struct {
	URL    string `json:"url"`
	Commit string `json:"commit"`
	LFS    bool   `json:"lfs,omitempty"`
}

// Readiness is a service's HTTP readiness probe.
type Readiness struct {
	Path                string `json:"path"`
	InitialDelaySeconds int32  `json:"initial_delay_seconds,omitempty"`
	PeriodSeconds       int32  `json:"period_seconds,omitempty"`
}

// ModelSpec is an inference service's model: the KServe model format and
// the saved model arguments (the runtime's own prefix is not included).
type ModelSpec struct {
	Format  string   `json:"format"`
	Runtime string   `json:"runtime,omitempty"`
	Args    []string `json:"args"`
}

// ServiceKind is the kind of a long-running service.
type ServiceKind string

// Service kinds.
const (
	ServiceApplication ServiceKind = "application"
	ServiceInference   ServiceKind = "inference"
)

// PreparePayload prepares an Attempt's private workspace and, for services,
// saves the rendered specification.
type PreparePayload struct {
	// Repository is the checkout; absent prepares an empty workspace.
	Repository         *Repository `json:"repository,omitempty"`
	WorkspaceSizeBytes int64       `json:"workspace_size_bytes"`
	ServiceKind        ServiceKind `json:"service_kind,omitempty"`
	// Image is the application image (application services only).
	Image string `json:"image,omitempty"`
	// Model is the inference model (inference services only).
	Model     *ModelSpec       `json:"model,omitempty"`
	Port      int32            `json:"port,omitempty"`
	Readiness *Readiness       `json:"readiness,omitempty"`
	Demand    map[string]int64 `json:"demand,omitempty"`
}

// WorkspaceRef names the Attempt's workspace claim.
type WorkspaceRef struct {
	ClaimName string `json:"claim_name"`
	UID       string `json:"uid"`
}

// PrepareDetail answers prepare.
type PrepareDetail struct {
	Workspace  WorkspaceRef `json:"workspace"`
	SpecDigest string       `json:"spec_digest"`
}

// StartPayload starts a batch Attempt (services start what prepare saved
// and carry an empty payload).
type StartPayload struct {
	Demand           map[string]int64  `json:"demand,omitempty"`
	TimeLimitSeconds int64             `json:"time_limit_seconds,omitempty"`
	Argv             []string          `json:"argv,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
}

// StateDetail answers start.
type StateDetail struct {
	State State `json:"state"`
}

// ObserveDetail answers observe: the native state, the reason from the
// native condition (e.g. the Job's "DeadlineExceeded"), the timestamps
// the native object reports (RFC 3339, UTC) and, for a finished batch
// Attempt, its container's exit code
// (docs/site-protocol.md#observe-detail-exit_code). ExitCode is absent while nothing has terminated and when
// the container's termination is not known (its Pod is gone); 0 is a
// reported success.
type ObserveDetail struct {
	State      State  `json:"state" doc:"queued, running, healthy, succeeded, failed or missing."`
	Reason     string `json:"reason,omitempty" doc:"The native condition's reason, e.g. the Job's BackoffLimitExceeded or its Pod's DeadlineExceeded."`
	Message    string `json:"message,omitempty" doc:"The native condition's message."`
	StartedAt  string `json:"started_at,omitempty" doc:"When the native object reports it started (RFC 3339, UTC)."`
	FinishedAt string `json:"finished_at,omitempty" doc:"When the native object reports it finished (RFC 3339, UTC)."`
	ExitCode   *int32 `json:"exit_code,omitempty" doc:"The exit code of a finished batch Attempt's container, from its termination (0 on success; 128+n when killed by signal n, e.g. 137 for SIGKILL); absent while nothing terminated or when the termination is not known."`
}

// CancelDetail answers cancel: objects with the Attempt's names but another
// UID are listed, never touched.
type CancelDetail struct {
	State          State       `json:"state"`
	ForeignObjects []NativeRef `json:"foreign_objects,omitempty"`
}

// CleanupDetail answers cleanup with the references removed.
type CleanupDetail struct {
	Removed        []NativeRef `json:"removed"`
	ForeignObjects []NativeRef `json:"foreign_objects,omitempty"`
}

// ReadLogsPayload reads a container's log tail.
type ReadLogsPayload struct {
	Container string `json:"container,omitempty"`
	TailBytes int64  `json:"tail_bytes"`
}

// ReadLogsDetail answers read-logs.
type ReadLogsDetail struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
}

// ReadFilePayload reads a workspace file.
type ReadFilePayload struct {
	Path     string `json:"path"`
	MaxBytes int64  `json:"max_bytes"`
}

// ReadFileDetail answers read-file.
type ReadFileDetail struct {
	ContentBase64 string `json:"content_base64"`
	Truncated     bool   `json:"truncated"`
}

// ProxyPayload proxies one HTTP request to a service endpoint.
type ProxyPayload struct {
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Headers    map[string]string `json:"headers,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
}

// ProxyDetail answers proxy.
type ProxyDetail struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
}

// EmptyPayload is the payload of observe, cancel and cleanup.
type EmptyPayload struct{}
