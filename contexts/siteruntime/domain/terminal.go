package domain

import "time"

// TerminalState is the terminal state a native object the Runtime created
// reported while it existed, recorded in jobs.sqlite (table
// terminal_states) by the Runtime's watch the moment it appeared
// (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone). It is a
// fact of the object, never a decision: recording it advances no Run.
// observe reports it once the object is gone. The first state recorded for
// an object (AttemptID, Kind, Name, UID) is kept.
type TerminalState struct {
	// AttemptID, Kind, Namespace, Name and UID identify the object.
	AttemptID string
	Kind      string
	Namespace string
	Name      string
	UID       string
	// State is "succeeded" or "failed"; Reason and Message the native
	// condition's (as observe reports them).
	State   string
	Reason  string
	Message string
	// StartedAt and FinishedAt are the object's times (RFC 3339, UTC), as
	// observe reports them; empty when the object reported none.
	StartedAt  string
	FinishedAt string
	// ExitCode is the container's exit code when its termination was
	// known; nil otherwise.
	ExitCode *int32
	// ObservedAt is when the Runtime saw the state (UTC, second
	// precision).
	ObservedAt time.Time
}
