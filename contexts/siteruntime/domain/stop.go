package domain

import (
	"fmt"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// StopReason says why the ordered worker stopped. The worker stops on any
// unexplained journal, protocol or native state and never guesses
// (docs/site-runtime.md#stop-conditions). It is the label value of the
// metric metallo_runtime_stopped{reason} and the reason of the stop report
// (docs/site-protocol.md#the-stop-report): the protocol's closed
// vocabulary, siteprotocol.StopReason.
type StopReason = siteprotocol.StopReason

// Stop reasons (siteprotocol's, named here where the worker decides them).
const (
	StopServerAhead            = siteprotocol.StopServerAhead
	StopServerBehind           = siteprotocol.StopServerBehind
	StopCommandMismatch        = siteprotocol.StopCommandMismatch
	StopResultConflict         = siteprotocol.StopResultConflict
	StopOutOfOrder             = siteprotocol.StopOutOfOrder
	StopJournalIntegrity       = siteprotocol.StopJournalIntegrity
	StopBindingMismatch        = siteprotocol.StopBindingMismatch
	StopInstallationMismatch   = siteprotocol.StopInstallationMismatch
	StopUnexplainedNativeState = siteprotocol.StopUnexplainedNativeState
	StopInvalidCommand         = siteprotocol.StopInvalidCommand
	StopProtocolViolation      = siteprotocol.StopProtocolViolation
	StopBackendMismatch        = siteprotocol.StopBackendMismatch
)

// StopReasons lists every stop reason (to pre-declare metric series).
func StopReasons() []StopReason { return siteprotocol.StopReasons() }

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
