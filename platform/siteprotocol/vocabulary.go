// Package siteprotocol holds the Site protocol's shared wire types, its
// closed vocabularies (operations, families, outcomes, states, reasons), the
// canonical encoding (RFC 8785 JCS) and SHA-256 digests of commands and
// results, and their validation. Both sides use it: the execution role
// (server) and the Site Runtime (client); neither imports the other's
// adaptors. Normative source: docs/site-protocol.md.
package siteprotocol

import "github.com/pharos-metallo/metallo/platform/ijson"

// Operation is a command's operation (docs/site-protocol.md#operations).
type Operation string

// Operations the protocol defines.
const (
	OpBindMember   Operation = "bind-member"
	OpRetireMember Operation = "retire-member"
	OpPrepare      Operation = "prepare"
	OpStart        Operation = "start"
	OpObserve      Operation = "observe"
	OpCancel       Operation = "cancel"
	OpCleanup      Operation = "cleanup"
	OpReadLogs     Operation = "read-logs"
	OpReadFile     Operation = "read-file"
	OpProxy        Operation = "proxy"
)

// Operations lists every defined operation.
func Operations() []Operation {
	return []Operation{OpBindMember, OpRetireMember, OpPrepare, OpStart, OpObserve, OpCancel, OpCleanup, OpReadLogs, OpReadFile, OpProxy}
}

// Known reports whether op is a defined operation. A Runtime answers any
// other operation refused / unsupported-operation.
func (op Operation) Known() bool {
	for _, o := range Operations() {
		if o == op {
			return true
		}
	}
	return false
}

// ReadOperations lists the private reads (docs/site-protocol.md#private-reads):
// read-logs, read-file and proxy. Their results carry a member's data, so
// the execution role keeps a read result's content only for its retention
// after acknowledgement, then only its digest
// (docs/site-protocol.md#read-results-expire).
func ReadOperations() []Operation { return []Operation{OpReadLogs, OpReadFile, OpProxy} }

// IsRead reports whether op is one of ReadOperations.
func (op Operation) IsRead() bool {
	switch op {
	case OpReadLogs, OpReadFile, OpProxy:
		return true
	}
	return false
}

// NeedsFamily reports whether commands of op must name a family (the
// workload operations); member binding operations carry none.
func (op Operation) NeedsFamily() bool {
	switch op {
	case OpBindMember, OpRetireMember:
		return false
	}
	return op.Known()
}

// Family is the kind of native workload a command concerns.
type Family string

// Families.
const (
	FamilyBatch       Family = "batch"
	FamilyApplication Family = "application"
	FamilyInference   Family = "inference"
)

// Valid reports whether f is a defined family.
func (f Family) Valid() bool {
	return f == FamilyBatch || f == FamilyApplication || f == FamilyInference
}

// Outcome says whether the operation did its work.
type Outcome string

// Outcomes (docs/site-protocol.md#the-result).
const (
	// OutcomeSucceeded: the operation did its work.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the operation could not do its work.
	OutcomeFailed Outcome = "failed"
	// OutcomeRefused: the operation was not allowed or not understood.
	OutcomeRefused Outcome = "refused"
)

// Valid reports whether o is a defined outcome.
func (o Outcome) Valid() bool {
	return o == OutcomeSucceeded || o == OutcomeFailed || o == OutcomeRefused
}

// State is the native state an operation observed (detail.state).
type State string

// States.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateHealthy   State = "healthy"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateMissing   State = "missing"
)

// States lists every defined state.
func States() []State {
	return []State{StateQueued, StateRunning, StateHealthy, StateSucceeded, StateFailed, StateMissing}
}

// Valid reports whether s is a defined state.
func (s State) Valid() bool {
	switch s {
	case StateQueued, StateRunning, StateHealthy, StateSucceeded, StateFailed, StateMissing:
		return true
	}
	return false
}

// Reason is a result's machine reason, from the closed, kebab-case
// vocabulary below (docs/site-protocol.md#result-reasons).
type Reason string

// Result reasons.
const (
	// Succeeded outcomes.
	ReasonApplied  Reason = "applied"  // bind-member / retire-member recorded
	ReasonPrepared Reason = "prepared" // prepare completed (workspace ready)
	ReasonCreated  Reason = "created"  // start created (or adopted) the workload
	ReasonObserved Reason = "observed" // observe read the native state
	ReasonDeleted  Reason = "deleted"  // cancel / cleanup removed (or found gone) our objects
	ReasonRead     Reason = "read"     // read-logs / read-file answered
	ReasonProxied  Reason = "proxied"  // proxy answered

	// Refused outcomes.
	ReasonUnsupportedOperation  Reason = "unsupported-operation"
	ReasonInvalidPayload        Reason = "invalid-payload"
	ReasonPayloadTooLarge       Reason = "payload-too-large"
	ReasonBindingMissing        Reason = "binding-missing"
	ReasonBindingRetired        Reason = "binding-retired"
	ReasonBindingConflict       Reason = "binding-conflict"
	ReasonPermissionDenied      Reason = "permission-denied"
	ReasonPermissionUnavailable Reason = "permission-unavailable"
	ReasonNativeRequestDenied   Reason = "native-request-denied"
	ReasonProjectMismatch       Reason = "project-mismatch"
	ReasonNotPrepared           Reason = "not-prepared"
	ReasonNotStarted            Reason = "not-started"      // observe/cancel of an Attempt whose workload was never created
	ReasonAttemptConflict       Reason = "attempt-conflict" // the Attempt's object was already created by another command
	ReasonPathRejected          Reason = "path-rejected"
	// ReasonNativeIdentityMismatch: a private read found the Attempt's
	// native identity broken — the object under the recorded name has
	// another UID, a link of the controller chain from the Pod read does
	// not lead to the recorded object by UID, or an object of the chain
	// lacks the Attempt's identity labels; nothing was read
	// (docs/site-runtime.md#private-reads).
	ReasonNativeIdentityMismatch Reason = "native-identity-mismatch"
	// ReasonCredentialUnavailable: no usable repository credential — the
	// grant provider gave no answer within its bound, or the repository host
	// refused the credential it issued (docs/site-protocol.md#repository-checkout-reasons).
	ReasonCredentialUnavailable Reason = "credential-unavailable"
	// ReasonPodSecurityViolation: a create of a saved specification whose
	// Pods lack a field of Pod Security "restricted" (a specification
	// saved before the Runtime rendered them) in a namespace that enforces
	// restricted; nothing was created (docs/site-runtime.md#pod-security).
	ReasonPodSecurityViolation Reason = "pod-security-violation"

	// Failed outcomes.
	ReasonNativeMissing   Reason = "native-missing"
	ReasonDeletionPending Reason = "deletion-pending"
	ReasonNativeError     Reason = "native-error"
	// ReasonEndpointUnavailable: a proxy found no ready endpoint of the
	// Attempt's service (no ready Pod, or the API server could not reach
	// one); nothing was sent to it (docs/site-protocol.md#private-reads).
	ReasonEndpointUnavailable Reason = "endpoint-unavailable"
	// ReasonDeadlineExceeded: the command reached its bound at the Site
	// before the native system answered — a proxy whose service sent no
	// answer's headers, a read-logs whose log did not come, a read-file
	// whose workspace reader did not end, a checkout whose workspace helper
	// did not end — and the Runtime moved on to the next command
	// (docs/site-runtime.md#command-bounds).
	ReasonDeadlineExceeded Reason = "deadline-exceeded"

	// Failed outcomes of a repository checkout: the repository or its
	// content made the workspace impossible
	// (docs/site-protocol.md#repository-checkout-reasons).
	ReasonRepositoryUnavailable Reason = "repository-unavailable" // the host did not accept connections within the deadline, or has no such repository
	ReasonCommitMissing         Reason = "commit-missing"         // the repository has no such commit
	ReasonSizeExceeded          Reason = "size-exceeded"          // the checkout (LFS objects included) passed the size limit
	ReasonSymlinkEscape         Reason = "symlink-escape"         // a symlink resolves outside the checkout or into .git
	ReasonLFSMissing            Reason = "lfs-missing"            // an LFS object could not be fetched or verified; a pointer file would remain
	// ReasonRevocationUnconfirmed: the checkout's credential was not
	// confirmed revoked by the grant provider within its bound, so the
	// workspace never counts as ready (docs/site-protocol.md#repository-checkout-reasons).
	ReasonRevocationUnconfirmed Reason = "revocation-unconfirmed"
)

// Reasons lists the whole result vocabulary.
func Reasons() []Reason {
	return []Reason{
		ReasonApplied, ReasonPrepared, ReasonCreated, ReasonObserved, ReasonDeleted, ReasonRead, ReasonProxied,
		ReasonUnsupportedOperation, ReasonInvalidPayload, ReasonPayloadTooLarge, ReasonBindingMissing,
		ReasonBindingRetired, ReasonBindingConflict, ReasonPermissionDenied, ReasonPermissionUnavailable,
		ReasonNativeRequestDenied, ReasonProjectMismatch, ReasonNotPrepared, ReasonNotStarted, ReasonAttemptConflict, ReasonPathRejected,
		ReasonNativeIdentityMismatch,
		ReasonNativeMissing, ReasonDeletionPending, ReasonNativeError, ReasonEndpointUnavailable, ReasonDeadlineExceeded,
		ReasonCredentialUnavailable, ReasonPodSecurityViolation,
		ReasonRepositoryUnavailable, ReasonCommitMissing, ReasonSizeExceeded, ReasonSymlinkEscape, ReasonLFSMissing,
		ReasonRevocationUnconfirmed,
	}
}

// Outcome returns the one outcome a result with reason r carries, and
// false for a reason outside the vocabulary. ValidateResult refuses a
// result whose outcome is not its reason's.
func (r Reason) Outcome() (Outcome, bool) {
	switch r {
	case ReasonApplied, ReasonPrepared, ReasonCreated, ReasonObserved, ReasonDeleted, ReasonRead, ReasonProxied:
		return OutcomeSucceeded, true
	case ReasonUnsupportedOperation, ReasonInvalidPayload, ReasonPayloadTooLarge, ReasonBindingMissing,
		ReasonBindingRetired, ReasonBindingConflict, ReasonPermissionDenied, ReasonPermissionUnavailable,
		ReasonNativeRequestDenied, ReasonProjectMismatch, ReasonNotPrepared, ReasonNotStarted, ReasonAttemptConflict,
		ReasonPathRejected, ReasonCredentialUnavailable, ReasonNativeIdentityMismatch, ReasonPodSecurityViolation:
		return OutcomeRefused, true
	case ReasonNativeMissing, ReasonDeletionPending, ReasonNativeError, ReasonEndpointUnavailable, ReasonDeadlineExceeded,
		ReasonRepositoryUnavailable, ReasonCommitMissing, ReasonSizeExceeded, ReasonSymlinkEscape, ReasonLFSMissing,
		ReasonRevocationUnconfirmed:
		return OutcomeFailed, true
	}
	return "", false
}

// Known reports whether r is in the vocabulary.
func (r Reason) Known() bool {
	for _, x := range Reasons() {
		if x == r {
			return true
		}
	}
	return false
}

// Problem reasons: the "reason" member of the server's RFC 9457 answers on
// Site and Execution routes. The Runtime decides by these alone.
const (
	ProblemOutOfOrder           = "out-of-order"
	ProblemIdentityMismatch     = "identity-mismatch"
	ProblemResultConflict       = "result-conflict"
	ProblemInstallationMismatch = "installation-mismatch"
	ProblemConflictingRetry     = "conflicting-retry"
	ProblemUnknownEnvironment   = "unknown-environment"
	ProblemUnknownCommand       = "unknown-command"
	ProblemInvalidCommand       = "invalid-command"
	ProblemInvalidResult        = "invalid-result"
	ProblemInstallationRequired = "installation-required"
	ProblemForbidden            = "forbidden"
	ProblemUnauthenticated      = "unauthenticated"
)

// InstallationHeader carries the Runtime installation ID on every Site
// route (docs/site-protocol.md#installation-fencing).
const InstallationHeader = "Metallo-Installation"

// Size bounds.
const (
	// MaxCommandBytes bounds a command's encoded size; a larger command is
	// refused / payload-too-large.
	MaxCommandBytes = 1 << 20
	// MaxDepth bounds how deep objects and arrays nest in a command, a
	// result or any other body of the protocol (the envelope is level 1,
	// a payload level 2); deeper is refused as malformed, so a command
	// the server accepted can always be served and decoded. It is the one
	// bound of every body of the central roles (ijson.MaxDepth).
	MaxDepth = ijson.MaxDepth
	// MaxReadBytes bounds tail_bytes, max_bytes and proxied bodies.
	MaxReadBytes = 1 << 20
	// MaxFilePathBytes bounds a read-file path (Linux's PATH_MAX) and
	// MaxFileNameBytes each of its names (NAME_MAX), in bytes
	// (docs/site-protocol.md#private-reads).
	MaxFilePathBytes = 4096
	MaxFileNameBytes = 255
	// MaxProxyHeaders bounds the header values of a proxied request and
	// of a proxied answer; MaxProxyHeaderBytes their names' and values'
	// bytes in all.
	MaxProxyHeaders     = 64
	MaxProxyHeaderBytes = 16 << 10
	// MaxResultBytes bounds a result's encoded size, which the execution
	// role accepts: a read's detail carries at most MaxReadBytes of
	// content, base64 (docs/site-protocol.md#private-reads), well within it.
	MaxResultBytes = 4 << 20
	// MaxPullLimit bounds a pull's limit.
	MaxPullLimit = 100
	// MaxPullBytes bounds the encoded commands of one pull answer: the
	// server stops adding commands before their total would exceed it, but
	// always answers at least the next command (itself at most
	// MaxCommandBytes). A client may therefore read a pull answer of up to
	// MaxPullAnswerBytes; anything longer breaks the protocol.
	MaxPullBytes = 8 << 20
	// MaxPullAnswerBytes is the most a pull answer can take on the wire:
	// MaxPullBytes, plus one command that alone passes the budget, plus
	// the envelope.
	MaxPullAnswerBytes = MaxPullBytes + MaxCommandBytes + 64<<10
	// MaxPullWaitSeconds bounds a pull's long-poll wait.
	MaxPullWaitSeconds = 30
)
