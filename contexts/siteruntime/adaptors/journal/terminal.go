package journal

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/recordsdb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// Terminal states of watched objects (schema version 2, table
// terminal_states of jobs.sqlite and services.sqlite;
// docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).

func terminalDigest(r recordsdb.TerminalState) string {
	d := rowDigest("terminal_states").S(r.AttemptID).S(r.Kind).S(r.Name).S(r.Namespace).S(r.Uid).S(r.State).
		S(r.Reason).S(r.Message).S(r.StartedAt).S(r.FinishedAt)
	if r.ExitCode.Valid {
		d = d.I(r.ExitCode.Int64)
	} else {
		d = d.B(nil)
	}
	return d.S(r.ObservedAt).Sum()
}

func terminalRowName(r recordsdb.TerminalState) string {
	return fmt.Sprintf("terminal_states (attempt %s, %s %s, uid %s)", r.AttemptID, r.Kind, r.Name, r.Uid)
}

// checkTerminalStates verifies every terminal state's digest.
func checkTerminalStates(ctx context.Context, q *recordsdb.Queries, file string) error {
	rows, err := q.ListAllTerminalStates(ctx)
	if err != nil {
		return integrity(file, "terminal_states", "cannot be read: %v", err)
	}
	for _, r := range rows {
		if r.Digest != terminalDigest(r) {
			return integrity(file, terminalRowName(r), "digest mismatch")
		}
	}
	return nil
}

// SaveTerminal records ts in one durable commit, unless a state of the
// same object (attempt, kind, name, UID) is recorded: the first is kept
// and saved is false. State must be succeeded or failed.
func (s *Records) SaveTerminal(ctx context.Context, ts domain.TerminalState) (saved bool, err error) {
	row := recordsdb.TerminalState{
		AttemptID: ts.AttemptID, Kind: ts.Kind, Name: ts.Name, Namespace: ts.Namespace, Uid: ts.UID, State: ts.State,
		Reason: ts.Reason, Message: ts.Message, StartedAt: ts.StartedAt, FinishedAt: ts.FinishedAt,
		ObservedAt: ts.ObservedAt.UTC().Truncate(time.Second).Format(time.RFC3339),
	}
	if ts.ExitCode != nil {
		row.ExitCode = sql.NullInt64{Int64: int64(*ts.ExitCode), Valid: true}
	}
	row.Digest = terminalDigest(row)
	err = s.j.tx(ctx, s.file, func(ctx context.Context, fl *file) error {
		n, err := fl.records.InsertTerminalState(ctx, recordsdb.InsertTerminalStateParams(row))
		if err != nil {
			return fmt.Errorf("journal %s: save %s: %w", s.file, terminalRowName(row), err)
		}
		saved = n == 1
		return nil
	})
	return saved, err
}

// TerminalState returns the recorded terminal state of the object ref
// names (by attempt, kind, name and UID), verifying its digest; found is
// false when none is recorded.
func (s *Records) TerminalState(ctx context.Context, attemptID, kind, name, uid string) (domain.TerminalState, bool, error) {
	var rows []recordsdb.TerminalState
	err := s.j.use(ctx, s.file, func(ctx context.Context, fl *file) error {
		var err error
		rows, err = fl.records.GetTerminalState(ctx, recordsdb.GetTerminalStateParams{AttemptID: attemptID, Kind: kind, Name: name, Uid: uid})
		if err != nil {
			return fmt.Errorf("journal %s: read terminal state: %w", s.file, err)
		}
		return nil
	})
	if err != nil || len(rows) == 0 {
		return domain.TerminalState{}, false, err
	}
	r := rows[0]
	if r.Digest != terminalDigest(r) {
		return domain.TerminalState{}, false, integrity(s.file, terminalRowName(r), "digest mismatch")
	}
	at, err := time.Parse(time.RFC3339, r.ObservedAt)
	if err != nil {
		return domain.TerminalState{}, false, integrity(s.file, terminalRowName(r), "observed_at %q: %v", r.ObservedAt, err)
	}
	ts := domain.TerminalState{
		AttemptID: r.AttemptID, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, UID: r.Uid, State: r.State,
		Reason: r.Reason, Message: r.Message, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, ObservedAt: at,
	}
	if r.ExitCode.Valid {
		code := int32(r.ExitCode.Int64)
		ts.ExitCode = &code
	}
	return ts, true, nil
}

// AllRecords returns every record of the file, verifying each (the
// Runtime's watch reads which objects it created).
func (s *Records) AllRecords(ctx context.Context) ([]domain.NativeRecord, error) {
	var rows []recordsdb.NativeRecord
	err := s.j.use(ctx, s.file, func(ctx context.Context, fl *file) error {
		var err error
		if rows, err = fl.records.ListAllNativeRecords(ctx); err != nil {
			return fmt.Errorf("journal %s: read records: %w", s.file, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]domain.NativeRecord, 0, len(rows))
	for _, r := range rows {
		nr, err := s.fromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, nr)
	}
	return out, nil
}

func (s *Records) fromRow(r recordsdb.NativeRecord) (domain.NativeRecord, error) {
	if r.Digest != recordDigest(r) || r.SpecDigest != sha256Hex(r.Spec) {
		return domain.NativeRecord{}, integrity(s.file, fmt.Sprintf("native_records (attempt %s, %s %s)", r.AttemptID, r.Kind, r.Name), "digest mismatch")
	}
	return domain.NativeRecord{
		AttemptID: r.AttemptID, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, UID: r.Uid,
		ServiceKind: r.ServiceKind, Phase: r.Phase, CommandID: r.CommandID, Sequence: r.Sequence,
		Spec: r.Spec, SpecDigest: r.SpecDigest,
	}, nil
}

var _ application.TerminalStates = (*Records)(nil)
