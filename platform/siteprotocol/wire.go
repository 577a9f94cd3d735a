package siteprotocol

import "encoding/json"

// AccountRef is the native account binding a command acts through.
type AccountRef struct {
	BindingID  string `json:"binding_id" doc:"The member binding (a lower-case UUID), as bind-member delivered it."`
	Generation int64  `json:"generation" doc:"The binding's generation (at least 1)."`
}

// Command is a command as appended and pulled. Optional fields are absent
// from the JSON, never null. The digest covers the JCS form of every field
// except sequence and digest (CommandDigest).
type Command struct {
	// Sequence is assigned by the server (absent when appending).
	Sequence int64 `json:"sequence,omitempty"`
	// ID is the command identity, a UUID chosen by Execution.
	ID        string    `json:"id" doc:"The command identity, a lower-case UUID chosen by Execution; appending it again with the same content is an idempotent retry."`
	Operation Operation `json:"operation"`
	// IssuedAt is RFC 3339 in UTC with "Z".
	IssuedAt   string          `json:"issued_at" doc:"When Execution issued it: RFC 3339 in UTC with Z, e.g. 2026-08-20T10:31:00Z."`
	RunID      string          `json:"run_id,omitempty" doc:"The Run (a lower-case UUID); required by every known operation but bind-member and retire-member."`
	AttemptID  string          `json:"attempt_id,omitempty" doc:"The Attempt (a lower-case UUID); native objects are named after it. Required like run_id."`
	MemberID   string          `json:"member_id,omitempty" doc:"The member's Party (a lower-case UUID); required by every known operation."`
	ProjectID  string          `json:"project_id,omitempty" doc:"The canonical Project (a lower-case UUID); required by every known operation."`
	AccountRef *AccountRef     `json:"account_ref,omitempty" doc:"The member binding the command acts through; required by prepare, start, read-logs, read-file and proxy."`
	Family     Family          `json:"family,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	// Digest is lower-case hex SHA-256 (set by the server when appending).
	Digest string `json:"digest,omitempty"`
}

// NativeRef names a native object a result touched, whatever the
// environment's backend: Kind is the backend's native kind, Namespace an
// opaque scope and UID an opaque identity the backend assigned, which
// the Runtime compares byte for byte and never parses — a Kubernetes
// namespace and metadata.uid, a Slurm account and job ID
// (docs/site-protocol.md#native-references-by-backend).
type NativeRef struct {
	Kind      string `json:"kind" doc:"The native kind at the environment's backend: a Kubernetes kind (Job, Deployment, Service, InferenceService, PersistentVolumeClaim, Pod, Secret) at a kubernetes environment, SlurmJob at a slurm one."`
	Namespace string `json:"namespace,omitempty" doc:"The object's scope, opaque to clients: the Kubernetes namespace, or the Slurm account its job is charged to."`
	Name      string `json:"name" doc:"The object's deterministic name (attempt-<attempt>…)."`
	UID       string `json:"uid,omitempty" doc:"The object's identity, opaque to clients and compared byte for byte: the Kubernetes metadata.uid, or the Slurm job ID in decimal."`
}

// Result is the Runtime's answer to one command. Digest covers the JCS form
// of every other field (ResultDigest). The Runtime saves the exact bytes it
// sends and resends them unchanged on replay.
type Result struct {
	CommandID     string          `json:"command_id" doc:"The answered command's id."`
	CommandDigest string          `json:"command_digest" doc:"The answered command's digest, as pulled."`
	Sequence      int64           `json:"sequence" doc:"The answered command's sequence; equals the path's."`
	Outcome       Outcome         `json:"outcome"`
	Reason        Reason          `json:"reason"`
	Message       string          `json:"message" doc:"A human-readable sentence; never decided on."`
	Detail        json.RawMessage `json:"detail,omitempty"`
	NativeRefs    []NativeRef     `json:"native_refs,omitempty" doc:"The native objects the operation created or touched."`
	Digest        string          `json:"digest,omitempty"`
}

// Acknowledgement is the server's answer to a recorded result.
type Acknowledgement struct {
	AcknowledgedSequence int64  `json:"acknowledged_sequence"`
	ResultDigest         string `json:"result_digest"`
}

// StreamState describes a stream (GET /site/v1/streams/{environment}).
type StreamState struct {
	Environment string `json:"environment"`
	Site        string `json:"site,omitempty"`
	Authority   string `json:"authority"`
	// Backend is the environment's backend (environments.yaml). A Runtime
	// configured for another stops (StopBackendMismatch) before it
	// executes anything; a server that predates the member sends none,
	// which a Runtime reads as kubernetes.
	Backend              Backend `json:"backend,omitempty" enum:"kubernetes,slurm" doc:"The environment's backend: kubernetes or slurm. A Runtime configured for another stops (backend-mismatch) before it executes anything."`
	AcknowledgedSequence int64   `json:"acknowledged_sequence"`
	HeadSequence         int64   `json:"head_sequence"`
	// InstallationID is the bound Runtime installation; absent while unbound.
	InstallationID string `json:"installation_id,omitempty"`
}

// Pull is the answer to GET …/commands: commands after the asked sequence,
// oldest first, each exactly as the server stores it (its JCS form with
// sequence and digest).
type Pull struct {
	Commands []json.RawMessage `json:"commands"`
	// HeadSequence is the stream's last assigned sequence at read time.
	HeadSequence int64 `json:"head_sequence"`
	// AcknowledgedSequence is the stream's acknowledged sequence at read time.
	AcknowledgedSequence int64 `json:"acknowledged_sequence"`
}

// AppendReceipt is Execution's answer to an append.
type AppendReceipt struct {
	ID       string `json:"id"`
	Sequence int64  `json:"sequence"`
	Digest   string `json:"digest"`
	// Created is false when the append was an idempotent retry.
	Created bool `json:"created"`
}

// CommandRecord is Execution's read of one command: the command as stored
// and, once acknowledged, its result's digest and exact bytes — except a
// read's result (Operation.IsRead) whose content has expired: then
// ResultExpiredAt says when and Result is absent, while ResultDigest stays
// (docs/site-protocol.md#read-results-expire).
type CommandRecord struct {
	Command json.RawMessage `json:"command"`
	// Result is the recorded result's exact bytes, absent until acknowledged
	// and once expired.
	Result json.RawMessage `json:"result,omitempty"`
	// ResultDigest is the recorded result's digest (lower-case hex SHA-256,
	// the result's own digest member), absent until acknowledged; it stays
	// after the content expired.
	ResultDigest string `json:"result_digest,omitempty"`
	// AcknowledgedAt is when the server recorded the result (RFC 3339, UTC).
	AcknowledgedAt string `json:"acknowledged_at,omitempty"`
	// ResultExpiredAt is when the server dropped the result's content (RFC
	// 3339, UTC), absent while it is held.
	ResultExpiredAt string `json:"result_expired_at,omitempty"`
}

// Rebind is the body of POST /execution/v1/streams/{environment}/rebind:
// exactly one of InstallationID (bind the stream to that installation) or
// Unbind true (unbind it, so the next installation that pulls binds it).
// Unbinding is explicit so that a tool that leaves the ID out, or sends
// null or "", cannot open a takeover window: the server answers 422
// validation-failed to both, either and an empty ID.
type Rebind struct {
	// InstallationID is the installation to bind (1–128 letters, digits,
	// '.', '_' or '-'); absent when Unbind is true.
	InstallationID string `json:"installation_id,omitempty"`
	// Unbind unbinds the stream explicitly; absent (or false) when binding.
	Unbind bool `json:"unbind,omitempty"`
	// Reason is the operator's note, recorded with who and when.
	Reason string `json:"reason"`
}
