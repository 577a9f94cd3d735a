package siteprotocol

// Payloads and result details of each operation
// (docs/site-protocol.md#operations). Demand and quantities use
// canonical units: cpu in millicores, memory and storage in bytes,
// gpu.<vendor> in devices.

// BindMemberPayload applies a member binding in the Runtime's journal. Its
// namespace, account and account_uid follow the environment's backend
// (docs/site-protocol.md#member-identity-by-backend; validateBindMember).
type BindMemberPayload struct {
	PartyID   string `json:"party_id" doc:"The member's Party (a lower-case UUID); equals the command's member_id."`
	Namespace string `json:"namespace" doc:"The allocation's native scope: at a kubernetes environment its namespace (a DNS-1123 label, e.g. project-0a1b2c3d); at a slurm environment the Slurm account (association) its jobs are charged to (lower-case letters, digits, _, - and ., at most 64, e.g. proj-a)."`
	// Account is the native account: member-<party_id> at a Kubernetes
	// environment, the Party's site username at a Slurm one.
	Account    string `json:"account" doc:"The member's native account: at a kubernetes environment exactly member-<party_id> (its service account); at a slurm environment the Party's site username, a lower-case POSIX user name ([a-z_][a-z0-9_-]{0,31}, e.g. jdoe)."`
	BindingID  string `json:"binding_id" doc:"The member binding (a lower-case UUID, as resource_provisioning names it); commands acting as the member carry it in account_ref."`
	Revision   int64  `json:"revision" doc:"The binding's revision at its owner (at least 1); a newer one replaces an older in the journal."`
	Generation int64  `json:"generation" doc:"The binding's generation (at least 1): commands name it in account_ref.generation."`
	// AccountUID is the Site's UID of Account as the Site reported it (at
	// most MaxAccountUIDBytes): at a Kubernetes environment the
	// ServiceAccount's UID, optional, so bindings written before delivery
	// sent it stay valid (such a binding is checked by name only); at a
	// Slurm environment the decimal Unix uid, required. The Runtime
	// compares it with the live account before every create as the member
	// (docs/site-protocol.md#operations).
	AccountUID string `json:"account_uid,omitempty" maxLength:"256" doc:"The Site's UID of the account, as the Site's agent reported it. At a kubernetes environment the UID of the member-<party_id> service account, optional; at a slurm environment the account's Unix uid in decimal (1 to 4294967294), required. The Runtime compares it with the live account's UID before every create as the member: another UID is refused binding-conflict."`
}

// RetireMemberPayload retires a member binding generation.
type RetireMemberPayload struct {
	BindingID  string `json:"binding_id" doc:"The member binding to retire (a lower-case UUID)."`
	Generation int64  `json:"generation" doc:"The generation retired (at least 1)."`
}

// BindingDetail answers bind-member and retire-member.
type BindingDetail struct {
	AppliedRevision int64 `json:"applied_revision" doc:"The binding revision now in the Runtime's journal."`
}

// Repository is an exact Git commit to check out into the workspace.
type Repository struct {
	URL    string `json:"url" doc:"The repository's http(s) URL, e.g. https://git.example.org/lab/model.git."`
	Commit string `json:"commit" doc:"The exact commit: a full lower-case SHA-1 (40 hex) or SHA-256 (64 hex) hash, never a branch."`
	LFS    bool   `json:"lfs,omitempty" doc:"Fetch the commit's Git LFS objects too (a pointer file left behind fails lfs-missing)."`
}

// Readiness is a service's HTTP readiness probe.
type Readiness struct {
	Path                string `json:"path" doc:"The HTTP path probed for readiness: absolute (starting with /), without space, tab, CR, LF or NUL, e.g. /v2/health/ready."`
	InitialDelaySeconds int32  `json:"initial_delay_seconds,omitempty" minimum:"0" doc:"Seconds before the first probe (at least 0)."`
	PeriodSeconds       int32  `json:"period_seconds,omitempty" minimum:"0" doc:"Seconds between probes (at least 0; 0 or absent: Kubernetes' default)."`
}

// ModelSpec is an inference service's model: the KServe model format and
// the saved model arguments (the runtime's own prefix is not included).
type ModelSpec struct {
	Format  string   `json:"format" doc:"The KServe model format, e.g. huggingface."`
	Runtime string   `json:"runtime,omitempty" doc:"The KServe serving runtime, e.g. kserve-huggingfaceserver; absent: the one serving the format."`
	Args    []string `json:"args" doc:"The saved model arguments (at least one), after the runtime's own --model_name prefix, e.g. --model_id=…"`
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
	Repository         *Repository `json:"repository,omitempty" doc:"The checkout into the workspace; absent prepares an empty workspace."`
	WorkspaceSizeBytes int64       `json:"workspace_size_bytes" doc:"The workspace claim's size in bytes (at least 1), e.g. 1073741824 for 1 GiB."`
	ServiceKind        ServiceKind `json:"service_kind,omitempty" enum:"application,inference" doc:"A service's kind, equal to the family; absent for batch."`
	// Image is the application image (application services only).
	Image string `json:"image,omitempty" pattern:"^[^@\\s]+@sha256:[0-9a-f]{64}$" doc:"An application service's image, pinned by digest: <registry>/<repository>[:<tag>]@sha256:<64 lower-case hex>, the registry explicit (a host name with an optional port), e.g. registry.example.org/lab/app@sha256:… (parsed as an OCI image reference; the pattern is its outline)."`
	// Model is the inference model (inference services only).
	Model     *ModelSpec       `json:"model,omitempty" doc:"An inference service's model."`
	Port      int32            `json:"port,omitempty" minimum:"1" maximum:"65535" doc:"The service's TCP port (1-65535)."`
	Readiness *Readiness       `json:"readiness,omitempty" doc:"The service's HTTP readiness probe."`
	Demand    map[string]int64 `json:"demand,omitempty" doc:"A service's demand in canonical units: cpu in millicores and memory in bytes (both required, positive), gpu.<vendor> in devices."`
}

// WorkspaceRef names the Attempt's workspace claim.
type WorkspaceRef struct {
	ClaimName string `json:"claim_name" doc:"The workspace's PersistentVolumeClaim name."`
	UID       string `json:"uid" doc:"The claim's Kubernetes UID."`
}

// PrepareDetail answers prepare.
type PrepareDetail struct {
	Workspace  WorkspaceRef `json:"workspace"`
	SpecDigest string       `json:"spec_digest" doc:"Lower-case hex SHA-256 of the saved rendered specification (a service's; batch: of the workspace)."`
}

// StartPayload starts a batch Attempt (services start what prepare saved
// and carry an empty payload).
type StartPayload struct {
	Demand           map[string]int64  `json:"demand,omitempty" doc:"A batch Attempt's demand in canonical units: cpu in millicores and memory in bytes (both required, positive), gpu.<vendor> in devices."`
	TimeLimitSeconds int64             `json:"time_limit_seconds,omitempty" doc:"The Attempt's time limit in seconds (at least 1): the Job's activeDeadlineSeconds."`
	Argv             []string          `json:"argv,omitempty" doc:"The program and its arguments (at least the program)."`
	Env              map[string]string `json:"env,omitempty" doc:"Environment variables (names non-empty, without = or NUL)."`
}

// StateDetail answers start.
type StateDetail struct {
	State State `json:"state"`
}

// ObserveDetail answers observe: the native state, the reason from the
// native condition (e.g. the Job's "DeadlineExceeded"), the timestamps
// the native object reports (RFC 3339, UTC) and, for a finished batch
// Attempt or a failed inference service, its container's exit code
// (docs/site-protocol.md#observe-detail-exit_code). ExitCode is absent while nothing has terminated and when
// the container's termination is not known (its Pod is gone); 0 is a
// reported success.
type ObserveDetail struct {
	State      State  `json:"state" doc:"queued, running, healthy, succeeded, failed or missing."`
	Reason     string `json:"reason,omitempty" doc:"The native condition's reason, e.g. the Job's BackoffLimitExceeded or its Pod's DeadlineExceeded."`
	Message    string `json:"message,omitempty" doc:"The native condition's message."`
	StartedAt  string `json:"started_at,omitempty" doc:"When the native object reports it started (RFC 3339, UTC)."`
	FinishedAt string `json:"finished_at,omitempty" doc:"When the native object reports it finished (RFC 3339, UTC)."`
	ExitCode   *int32 `json:"exit_code,omitempty" doc:"The exit code of a finished batch Attempt's container, from its termination (0 on success; 128+n when killed by signal n, e.g. 137 for SIGKILL), or of a failed inference service's model server (KServe's lastFailureInfo.exitCode); absent while nothing terminated or when the termination is not known."`
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
	Container string `json:"container,omitempty" doc:"The container (a DNS-1123 label); absent: the workload's main container."`
	TailBytes int64  `json:"tail_bytes" doc:"The most bytes of the log's end to answer (1-1048576)."`
}

// ReadLogsDetail answers read-logs: the log's last bytes exactly as the
// container wrote them (any bytes: invalid UTF-8, escape sequences,
// binary), standard base64, so the encoded result stays within the
// result limit whatever they are (docs/site-protocol.md#private-reads).
type ReadLogsDetail struct {
	Container     string `json:"container" doc:"The container whose log was read (the workload's main container when the payload named none)."`
	ContentBase64 string `json:"content_base64" doc:"The log's last tail_bytes bytes (all of it when shorter), exactly, standard base64."`
	Truncated     bool   `json:"truncated" doc:"true when the log is longer than tail_bytes (its earlier bytes are not in content_base64)."`
}

// ReadFilePayload reads a workspace file.
type ReadFilePayload struct {
	Path     string `json:"path" doc:"A clean relative path inside the workspace (no .., not absolute), printable UTF-8, at most 4096 bytes with names of at most 255 bytes."`
	MaxBytes int64  `json:"max_bytes" doc:"The most bytes to answer (1-1048576)."`
}

// ReadFileDetail answers read-file.
type ReadFileDetail struct {
	ContentBase64 string `json:"content_base64" doc:"The file's first max_bytes bytes, standard base64."`
	Truncated     bool   `json:"truncated" doc:"true when the file is longer than max_bytes."`
}

// ProxyPayload proxies one HTTP request to a service endpoint
// (docs/site-protocol.md#private-reads). Headers keep every value of a
// name, in order; hop-by-hop, cookie and authorization headers are
// dropped by the Runtime.
type ProxyPayload struct {
	Method     string              `json:"method" enum:"GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS" doc:"The HTTP method."`
	Path       string              `json:"path" doc:"The absolute request path at the service, optionally with a query, without .. (nor its percent-encoded form or a backslash), e.g. /v2/models/m/infer."`
	Headers    map[string][]string `json:"headers,omitempty" doc:"Request headers: each name (an HTTP token) with its values in order (no CR, LF or NUL); at most 64 values and 16384 bytes of names and values in all."`
	BodyBase64 string              `json:"body_base64,omitempty" doc:"The request body, standard base64 (at most 1048576 bytes decoded)."`
}

// ProxyDetail answers proxy: the service's own answer, its status
// whatever it is (an upstream error is the service's answer, not the
// Runtime's failure), its headers filtered and bounded, its body up to
// MaxReadBytes.
type ProxyDetail struct {
	Status           int                 `json:"status" doc:"The service's HTTP status."`
	Headers          map[string][]string `json:"headers,omitempty" doc:"The service's response headers (canonical names, every value in order), without hop-by-hop, cookie and authorization headers; at most 64 values and 16384 bytes."`
	HeadersTruncated bool                `json:"headers_truncated,omitempty" doc:"true when headers beyond the bound were left out."`
	BodyBase64       string              `json:"body_base64,omitempty" doc:"The response body's first 1048576 bytes, standard base64."`
	Truncated        bool                `json:"truncated" doc:"true when the response body was longer than 1048576 bytes."`
}

// EmptyPayload is the payload of observe, cancel and cleanup.
type EmptyPayload struct{}
