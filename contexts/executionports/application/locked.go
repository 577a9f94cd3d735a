package application

import (
	"context"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// LockedStream is one stream inside a store transaction that holds the
// stream's row lock (PostgreSQL SELECT … FOR UPDATE; SQLite BEGIN
// IMMEDIATE). Stores implement it per engine; ApplyResult, BindLocked and
// RebindLocked are the one implementation of the flows both engines run.
type LockedStream interface {
	// State returns the stream's state.
	State(ctx context.Context) (domain.StreamState, error)
	// SetInstallation binds the stream to installation ("" unbinds) as of
	// at and records b in its binding history.
	SetInstallation(ctx context.Context, installation string, at time.Time, b Binding) error
	// CommandAt returns the command at sequence, nil when there is none.
	CommandAt(ctx context.Context, sequence int64) (*domain.StoredCommand, error)
	// Record stores r's exact bytes as the result of sequence and advances
	// the acknowledged sequence to it.
	Record(ctx context.Context, sequence int64, r ReceivedResult, at time.Time) error
	// RecordStop stores stop as the stream's stop report, replacing any
	// earlier one (docs/execution-ports.md#runtime-stops).
	RecordStop(ctx context.Context, stop RuntimeStop) error
}

// BindingReasonFirstUse is the recorded reason of a binding made by the
// first installation that uses an unbound stream.
const BindingReasonFirstUse = "first use by an unbound stream's Runtime"

// BindLocked binds an unbound stream to installation (recorded with
// principal) and returns the state after; a stream bound to another
// installation is domain.ErrInstallationMismatch.
func BindLocked(ctx context.Context, tx LockedStream, installation, principal string, at time.Time) (domain.StreamState, error) {
	st, err := tx.State(ctx)
	if err != nil {
		return domain.StreamState{}, err
	}
	if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
		return domain.StreamState{}, err
	}
	if st.InstallationID == "" {
		b := Binding{Environment: st.Environment, Action: BindingBound, InstallationID: installation, Principal: principal, Reason: BindingReasonFirstUse, RecordedAt: at}
		if err := tx.SetInstallation(ctx, installation, at, b); err != nil {
			return domain.StreamState{}, err
		}
		st.InstallationID, st.BoundAt = installation, at
	}
	return st, nil
}

// RebindLocked binds the stream to installation ("" unbinds) on an
// operator's request and records who, when, why and the previous
// installation: action BindingRebound, or BindingUnbound for an unbind.
func RebindLocked(ctx context.Context, tx LockedStream, installation, principal, reason string, at time.Time) (Binding, error) {
	st, err := tx.State(ctx)
	if err != nil {
		return Binding{}, err
	}
	action := BindingRebound
	if installation == "" {
		action = BindingUnbound
	}
	b := Binding{
		Environment: st.Environment, Action: action, InstallationID: installation, PreviousInstallationID: st.InstallationID,
		Principal: principal, Reason: reason, RecordedAt: at,
	}
	if err := tx.SetInstallation(ctx, installation, at, b); err != nil {
		return Binding{}, err
	}
	return b, nil
}

// BindStream returns environment's state for installation, binding an
// unbound stream to it (recorded with principal at at). A stream already
// bound to installation costs one read; a stream bound to another is
// domain.ErrInstallationMismatch.
func BindStream(ctx context.Context, s StreamStore, environment, installation, principal string, at time.Time) (domain.StreamState, error) {
	st, err := s.State(ctx, environment)
	if err != nil {
		return domain.StreamState{}, err
	}
	if st.InstallationID == installation {
		return st, nil
	}
	if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
		return domain.StreamState{}, err
	}
	err = s.Locked(ctx, environment, at, func(tx LockedStream) error {
		st, err = BindLocked(ctx, tx, installation, principal, at)
		return err
	})
	if err != nil {
		return domain.StreamState{}, fmt.Errorf("bind stream %s: %w", environment, err)
	}
	return st, nil
}

// ApplyResult applies the received result r for sequence to
// environment's stream in one locked transaction: the fencing rule
// (domain.CheckAcknowledger: only the installation the stream is bound to
// may send a result; an unbound stream is bound only by a pull, never by a
// result), then the acknowledgement rules (domain.DecideAcknowledgement),
// then r's exact bytes are recorded — or, for a byte-identical replay,
// nothing is. A refused result returns the rule's error and the
// transaction is rolled back, so nothing changes.
func ApplyResult(ctx context.Context, s StreamStore, environment, installation string, sequence int64, r ReceivedResult, at time.Time) (Acknowledgement, error) {
	var ack Acknowledgement
	err := s.Locked(ctx, environment, at, func(tx LockedStream) error {
		st, err := tx.State(ctx)
		if err != nil {
			return err
		}
		if err := domain.CheckAcknowledger(st.InstallationID, installation); err != nil {
			return err
		}
		stored, err := tx.CommandAt(ctx, sequence)
		if err != nil {
			return err
		}
		action, err := domain.DecideAcknowledgement(st.AcknowledgedSequence, sequence, stored, r.ReceivedResult)
		if err != nil {
			return err
		}
		ack = Acknowledgement{Sequence: sequence, ResultDigest: r.Digest, Replayed: action == domain.AckReplay}
		if action == domain.AckReplay {
			return nil
		}
		if err := tx.Record(ctx, sequence, r, at); err != nil {
			return fmt.Errorf("record the result of command %d: %w", sequence, err)
		}
		return nil
	})
	if err != nil {
		return Acknowledgement{}, fmt.Errorf("acknowledge command %d of stream %s: %w", sequence, environment, err)
	}
	return ack, nil
}

// RebindStream binds environment's stream to installation ("" unbinds) in
// one locked transaction (RebindLocked).
func RebindStream(ctx context.Context, s StreamStore, environment, installation, principal, reason string, at time.Time) (Binding, error) {
	var b Binding
	err := s.Locked(ctx, environment, at, func(tx LockedStream) error {
		var err error
		b, err = RebindLocked(ctx, tx, installation, principal, reason, at)
		return err
	})
	if err != nil {
		return Binding{}, fmt.Errorf("rebind stream %s: %w", environment, err)
	}
	return b, nil
}
