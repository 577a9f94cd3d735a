// Package domain holds the rules of the execution_ports context: the
// ordering, idempotency, acknowledgement and fencing rules of a Site
// protocol command stream (docs/site-protocol.md) and the capacity-planning
// arithmetic (docs/execution-ports.md#planning-arithmetic). It imports only the standard library
// and platform/siteprotocol.
package domain

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Errors of the stream rules. Every error the stream rules and the stores
// return wraps exactly one of these; the HTTP adaptor maps each to its
// problem reason (siteprotocol.Problem…).
var (
	// ErrUnknownEnvironment: no environment with that ID is configured.
	ErrUnknownEnvironment = errors.New("unknown environment")
	// ErrUnknownCommand: no command with that ID (or sequence) in the stream.
	ErrUnknownCommand = errors.New("unknown command")
	// ErrConflictingRetry: a command ID already appended with other content
	// (or to another stream).
	ErrConflictingRetry = errors.New("conflicting retry")
	// ErrOutOfOrder: a result for a sequence other than acknowledged + 1
	// that is not an already acknowledged one.
	ErrOutOfOrder = errors.New("out of order")
	// ErrIdentityMismatch: a result whose command ID, command digest or
	// sequence does not match the stored command it answers.
	ErrIdentityMismatch = errors.New("identity mismatch")
	// ErrResultConflict: a result for an acknowledged sequence that differs
	// (by digest) from the recorded one.
	ErrResultConflict = errors.New("result conflict")
	// ErrInstallationMismatch: the stream is bound to another Runtime
	// installation.
	ErrInstallationMismatch = errors.New("installation mismatch")
)

// Environment is a Site's execution environment, the owner of one command
// stream (docs/site-protocol.md#streams-commands-and-results): its ID (e.g.
// "alpha-k8s"), the Site it belongs to (e.g. "alpha"), the authority, the
// URL the Runtime is told to trust, and its backend (kubernetes or slurm;
// docs/architecture.md#configuration-files), which sets the bind-member
// rules of its stream (docs/site-protocol.md#member-identity-by-backend).
type Environment struct {
	ID        string
	Site      string
	Authority string
	Backend   siteprotocol.Backend
}

// ProtocolBackend returns the environment's backend, kubernetes when it is
// not set.
func (e Environment) ProtocolBackend() siteprotocol.Backend {
	if e.Backend == "" {
		return siteprotocol.BackendKubernetes
	}
	return e.Backend
}

var installationRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidInstallationID reports whether id can name a Runtime installation:
// 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit
// (a UUID is the usual value).
func ValidInstallationID(id string) bool { return installationRe.MatchString(id) }

// StreamState is a stream's position: the last assigned sequence, the last
// acknowledged sequence (0 for none) and the bound installation ("" while
// unbound).
type StreamState struct {
	Environment          string
	HeadSequence         int64
	AcknowledgedSequence int64
	InstallationID       string
	BoundAt              time.Time
}

// CheckInstallation applies the fencing rule
// (docs/site-protocol.md#installation-fencing): a stream bound to an installation serves only
// that installation. bound is the stream's installation ("" when unbound);
// presented is the Metallo-Installation header. It returns an error
// wrapping ErrInstallationMismatch for any other installation.
func CheckInstallation(bound, presented string) error {
	if bound != "" && bound != presented {
		return fmt.Errorf("%w: the stream is bound to installation %s, not %s; an operator must rebind it", ErrInstallationMismatch, bound, presented)
	}
	return nil
}

// CheckAcknowledger applies the fencing rule to a result
// (docs/site-protocol.md#installation-fencing: the first
// installation that pulls a stream binds it): only the installation the
// stream is bound to may acknowledge. A result for an unbound stream (never
// pulled, or unbound by an operator) binds nothing and is refused with an
// error wrapping ErrInstallationMismatch, as is a result from any other
// installation. bound is the stream's installation ("" when unbound);
// presented is the Metallo-Installation header.
func CheckAcknowledger(bound, presented string) error {
	if bound == "" {
		return fmt.Errorf("%w: the stream is not bound to any installation; only a pull binds it, so pull the stream before sending a result", ErrInstallationMismatch)
	}
	return CheckInstallation(bound, presented)
}

// ExistingCommand is what a store holds for a command ID when it is
// appended again.
type ExistingCommand struct {
	Environment string
	Sequence    int64
	Digest      string
}

// DecideRetry applies append idempotency
// (docs/site-protocol.md#append-idempotency):
// a command ID that already exists in the same stream with the same digest
// is the same command and keeps its sequence; any other content, or the
// same ID in another stream (IDs are unique across all streams), is an
// error wrapping ErrConflictingRetry.
func DecideRetry(existing ExistingCommand, environment, digest string) (int64, error) {
	if existing.Environment != environment {
		return 0, fmt.Errorf("%w: command ID already appended to another stream", ErrConflictingRetry)
	}
	if existing.Digest != digest {
		return 0, fmt.Errorf("%w: command ID already appended as sequence %d with digest %s; this content digests to %s",
			ErrConflictingRetry, existing.Sequence, existing.Digest, digest)
	}
	return existing.Sequence, nil
}

// StoredCommand is what the acknowledgement rule needs of the command at a
// sequence: its identity and, once acknowledged, the recorded result digest.
type StoredCommand struct {
	ID     string
	Digest string
	// ResultDigest is the recorded result's digest; "" until acknowledged.
	ResultDigest string
}

// ReceivedResult is the identity of a result as the Runtime sent it.
type ReceivedResult struct {
	CommandID     string
	CommandDigest string
	Sequence      int64
	Digest        string
}

// AckAction is what a store does with a result that the rules accept.
type AckAction int

// Acknowledgement actions.
const (
	// AckRecord: record the result and advance the acknowledged sequence.
	AckRecord AckAction = iota + 1
	// AckReplay: the exact recorded result was sent again; change nothing
	// and answer the same acknowledgement.
	AckReplay
)

// DecideAcknowledgement applies the acknowledgement rules
// (docs/site-protocol.md#acknowledgement-and-exact-replay) to a result for sequence, given the stream's
// acknowledged sequence and the stored command at sequence (nil when the
// stream has no such command):
//   - a result whose own sequence differs from sequence (the path's) is
//     ErrIdentityMismatch, before anything else is compared;
//   - sequence ≤ acknowledged: AckReplay when the digest equals the recorded
//     one, else ErrResultConflict (nothing changes);
//   - sequence = acknowledged + 1: ErrUnknownCommand when no such command,
//     ErrIdentityMismatch unless command ID, command digest and sequence
//     match the stored command, else AckRecord;
//   - otherwise ErrOutOfOrder.
func DecideAcknowledgement(acknowledged, sequence int64, stored *StoredCommand, r ReceivedResult) (AckAction, error) {
	switch {
	case sequence < 1:
		return 0, fmt.Errorf("%w: sequence must be positive", ErrOutOfOrder)
	case r.Sequence != sequence:
		return 0, fmt.Errorf("%w: the result names sequence %d but is sent for command %d", ErrIdentityMismatch, r.Sequence, sequence)
	case sequence <= acknowledged:
		if stored == nil || stored.ResultDigest == "" {
			return 0, fmt.Errorf("%w: sequence %d is acknowledged but holds no result", ErrResultConflict, sequence)
		}
		if stored.ResultDigest != r.Digest {
			return 0, fmt.Errorf("%w: sequence %d is acknowledged with result %s; this result digests to %s",
				ErrResultConflict, sequence, stored.ResultDigest, r.Digest)
		}
		return AckReplay, nil
	case sequence > acknowledged+1:
		return 0, fmt.Errorf("%w: the next sequence to acknowledge is %d, not %d", ErrOutOfOrder, acknowledged+1, sequence)
	}
	if stored == nil {
		return 0, fmt.Errorf("%w: the stream has no command %d", ErrUnknownCommand, sequence)
	}
	if r.Sequence != sequence || r.CommandID != stored.ID || r.CommandDigest != stored.Digest {
		return 0, fmt.Errorf("%w: command %d is %s with digest %s; the result names %s with digest %s at sequence %d",
			ErrIdentityMismatch, sequence, stored.ID, stored.Digest, r.CommandID, r.CommandDigest, r.Sequence)
	}
	return AckRecord, nil
}
