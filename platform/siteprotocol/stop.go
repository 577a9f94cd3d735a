package siteprotocol

import (
	"strings"
	"unicode/utf8"
)

// StopReason says why a Runtime's ordered worker stopped: the closed
// vocabulary of the stop report (docs/site-protocol.md#the-stop-report) and
// of the Runtime's metric metallo_runtime_stopped{reason}
// (docs/site-runtime.md#stop-conditions).
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
	// StopJournalIntegrity: a journal integrity check failed.
	StopJournalIntegrity StopReason = "journal-integrity"
	// StopBindingMismatch: the journal's (environment, authority) binding
	// differs from configuration or from the server's stream.
	StopBindingMismatch StopReason = "binding-mismatch"
	// StopInstallationMismatch: the server has bound the stream to another
	// Runtime installation.
	StopInstallationMismatch StopReason = "installation-mismatch"
	// StopBackendMismatch: the server's stream belongs to an environment of
	// another backend than the Runtime's --backend; the Runtime stops
	// before it executes anything (docs/site-runtime.md#stop-conditions).
	StopBackendMismatch StopReason = "backend-mismatch"
	// StopUnexplainedNativeState: recovery of an uncertain effect found a
	// native object it cannot explain (a foreign object under the
	// Attempt's name, for one).
	StopUnexplainedNativeState StopReason = "unexplained-native-state"
	// StopInvalidCommand: a pulled command fails its digest or envelope, or
	// the stream skips a sequence.
	StopInvalidCommand StopReason = "invalid-command"
	// StopProtocolViolation: the server answered outside the protocol (an
	// unknown problem reason, a malformed body, an inexact acknowledgement).
	StopProtocolViolation StopReason = "protocol-violation"
)

// StopReasons lists every stop reason.
func StopReasons() []StopReason {
	return []StopReason{
		StopServerAhead, StopServerBehind, StopCommandMismatch, StopResultConflict, StopOutOfOrder,
		StopJournalIntegrity, StopBindingMismatch, StopInstallationMismatch, StopUnexplainedNativeState,
		StopInvalidCommand, StopProtocolViolation, StopBackendMismatch,
	}
}

// Known reports whether r is one of StopReasons.
func (r StopReason) Known() bool {
	for _, x := range StopReasons() {
		if x == r {
			return true
		}
	}
	return false
}

// MaxStopMessageBytes bounds a stop report's message.
const MaxStopMessageBytes = 1000

// StopReport is the body of POST /site/v1/streams/{environment}/stop: a
// Runtime whose worker stopped tells the execution role why, where and
// which build, best effort, before it exits or idles; the next pull that
// binds the stream (the Runtime working again) clears it
// (docs/site-protocol.md#the-stop-report).
type StopReport struct {
	// Reason is one of StopReasons.
	// The enum tag lists StopReasons (a test holds them equal).
	Reason StopReason `json:"reason" enum:"server-ahead,server-behind,command-mismatch,result-conflict,out-of-order,journal-integrity,binding-mismatch,installation-mismatch,unexplained-native-state,invalid-command,protocol-violation,backend-mismatch" doc:"Why the worker stopped: one of the stop reasons of docs/site-runtime.md#stop-conditions."`
	// Sequence is the command the worker stopped at: its pending command's
	// sequence, else its checkpoint's acknowledged sequence (0 before
	// any).
	Sequence int64 `json:"sequence" minimum:"0" doc:"The sequence the worker stopped at: its pending command's, else the last it acknowledged (0 before any)."`
	// RuntimeVersion is the Runtime's build version, as
	// RuntimeVersionValue makes it.
	RuntimeVersion string `json:"runtime_version" minLength:"1" maxLength:"128" pattern:"^[!-~]+$" doc:"The Runtime's version, as in Metallo-Runtime-Version."`
	// Message is the stop's cause, at most MaxStopMessageBytes of UTF-8
	// (StopMessage cuts it).
	Message string `json:"message" maxLength:"1000" doc:"The stop's cause as the Runtime logged it, at most 1000 bytes of UTF-8."`
}

// StopMessage returns cause as a stop report's message: at most
// MaxStopMessageBytes of valid UTF-8, cut at a character boundary.
func StopMessage(cause string) string {
	s := strings.ToValidUTF8(cause, "\uFFFD")
	if len(s) <= MaxStopMessageBytes {
		return s
	}
	s = s[:MaxStopMessageBytes]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
