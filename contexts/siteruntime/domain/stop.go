package domain

import "fmt"

// StopReason says why the ordered worker stopped. The worker stops on any
// unexplained journal, protocol or native state and never guesses
// (docs/site-runtime.md#stop-conditions). It is the label value of the
// metric metallo_runtime_stopped{reason}.
type StopReason string

// Stop reasons.
const (
	// StopServerAhead: the server's acknowledged sequence is beyond the
	// local checkpoint plus the pending command.
	StopServerAhead StopReason = "server-ahead"
	// StopServerBehind: the server's acknowledged sequence is below the
	// local checkpoint (the server lost acknowledgements the Runtime holds).
	StopServerBehind StopReason = "server-behind"
	// StopCommandMismatch: the server's command at the pending sequence
	// differs from the saved one, or the server answers identity-mismatch.
	StopCommandMismatch StopReason = "command-mismatch"
	// StopResultConflict: the server rejects the saved exact result as a
	// conflict with the one it recorded.
	StopResultConflict StopReason = "result-conflict"
	// StopOutOfOrder: the server answers out-of-order for the sequence the
	// journal says is next.
	StopOutOfOrder StopReason = "out-of-order"
	// StopJournalIntegrity: a journal integrity check failed while running.
	StopJournalIntegrity StopReason = "journal-integrity"
	// StopBindingMismatch: the journal's (environment, authority) binding
	// differs from configuration or from the server's stream.
	StopBindingMismatch StopReason = "binding-mismatch"
	// StopInstallationMismatch: the server has bound the stream to another
	// Runtime installation.
	StopInstallationMismatch StopReason = "installation-mismatch"
	// StopUnexplainedNativeState: recovery of an uncertain effect found a
	// native object it cannot explain.
	StopUnexplainedNativeState StopReason = "unexplained-native-state"
	// StopInvalidCommand: a pulled command fails its digest or envelope, or
	// the stream skips a sequence.
	StopInvalidCommand StopReason = "invalid-command"
	// StopProtocolViolation: the server answered outside the protocol (an
	// unknown problem reason, a malformed body, an inexact acknowledgement).
	StopProtocolViolation StopReason = "protocol-violation"
)

// StopReasons lists every stop reason (to pre-declare metric series).
func StopReasons() []StopReason {
	return []StopReason{
		StopServerAhead, StopServerBehind, StopCommandMismatch, StopResultConflict, StopOutOfOrder,
		StopJournalIntegrity, StopBindingMismatch, StopInstallationMismatch, StopUnexplainedNativeState,
		StopInvalidCommand, StopProtocolViolation,
	}
}

// StopError is the error with which the worker stops.
type StopError struct {
	Reason StopReason
	Err    error
}

// Error describes the stop.
func (e *StopError) Error() string {
	return fmt.Sprintf("runtime worker stopped (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the cause.
func (e *StopError) Unwrap() error { return e.Err }

// Stop returns a *StopError for reason, with a formatted cause.
func Stop(reason StopReason, format string, args ...any) *StopError {
	return &StopError{Reason: reason, Err: fmt.Errorf(format, args...)}
}
