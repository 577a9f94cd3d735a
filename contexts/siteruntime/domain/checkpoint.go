package domain

import (
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Binding is what a journal set is bound to: the stream's environment, the
// authority (the Site API URL the Runtime trusts) and the installation that
// initialised it. It is written once by `runtime install` and checked on
// every start (docs/site-runtime.md#integrity-checks).
type Binding struct {
	Environment    string
	Authority      string
	InstallationID string
}

// Pending is the command the Runtime has accepted but not yet seen
// acknowledged: its exact pulled bytes, the decoded command, and — once
// executed — the exact result bytes that were (or will be) sent.
type Pending struct {
	// Sequence is the command's stream sequence.
	Sequence int64
	// Raw is the command exactly as pulled.
	Raw []byte
	// Command is Raw decoded and digest-verified.
	Command siteprotocol.Command
	// Result is the exact result bytes saved before sending; nil until the
	// command has been executed (or recovered).
	Result []byte
	// ResultDigest is the protocol digest of Result; empty with Result.
	ResultDigest string
	// StartedAt is when the Runtime first took the command on (commit
	// #1), saved with it so that its bounded waits count from it after a
	// restart too (docs/site-runtime.md#command-bounds); zero for a command
	// a Runtime saved before it kept the time.
	StartedAt time.Time
}

// HasResult reports whether the exact result is saved.
func (p *Pending) HasResult() bool { return p != nil && p.Result != nil }

// Checkpoint is the delivery state restored from the journal at start: the
// binding, the last sequence whose exact result the server acknowledged,
// and the pending command if any.
type Checkpoint struct {
	Binding Binding
	// Acknowledged is the local checkpoint: every command up to it has an
	// exactly acknowledged result.
	Acknowledged int64
	// Pending is nil when no command is in flight.
	Pending *Pending
}

// Next returns the sequence the Runtime expects next from the stream: the
// pending command's, or checkpoint+1.
func (c Checkpoint) Next() int64 {
	if c.Pending != nil {
		return c.Pending.Sequence
	}
	return c.Acknowledged + 1
}

// Limit returns the highest sequence the server may have acknowledged
// without contradicting the journal: the checkpoint, plus the pending
// command (the server may have recorded its result before the
// acknowledgement was lost) (docs/site-runtime.md#stop-conditions).
func (c Checkpoint) Limit() int64 {
	if c.Pending != nil {
		return c.Pending.Sequence
	}
	return c.Acknowledged
}

// Acknowledgement identifies an exact acknowledgement: the server recorded
// the result with ResultDigest for Sequence.
type Acknowledgement struct {
	Sequence     int64
	ResultDigest string
}

// Exact reports whether the server's acknowledgement matches the sequence
// and result digest that were sent (the Runtime clears its pending state
// only when both match: docs/site-protocol.md#acknowledgement-and-exact-replay).
func (a Acknowledgement) Exact(sent Acknowledgement) bool {
	return a.Sequence == sent.Sequence && a.ResultDigest == sent.ResultDigest
}
