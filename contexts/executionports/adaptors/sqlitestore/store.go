// Package sqlitestore is the SQLite adaptor of the execution_ports stream
// store (application.StreamStore): the embedded default database, a file
// opened by platform/database (WAL, synchronous=FULL, one connection, BEGIN
// IMMEDIATE), through the sqlc queries in sql/sqlite/executionports. Every
// write is one transaction; times are stored as RFC 3339 text in UTC.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore/sqlitedb"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// maxAttempts bounds the retries of an append that met the same command ID
// written by another process between its check and its insert.
const maxAttempts = 4

// Store is the SQLite stream store.
type Store struct {
	db *sql.DB
	// unprepared runs each statement as text; prepared (once a preparation
	// succeeded) runs statements SQLite compiled once, sparing the parse
	// and planning of every statement of every transaction.
	unprepared *sqlitedb.Queries
	mu         sync.Mutex
	prepared   *sqlitedb.Queries
	// deliveryLocks holds each environment's delivery lock (delivery.go).
	deliveryLocks sync.Map
}

var _ application.StreamStore = (*Store)(nil)

// New returns a store on db (a migrated execution_ports SQLite database).
// Its statements are prepared on first use; while the database cannot
// prepare them (unreachable, closed), each call runs its statements as
// text, so it fails as that call would and is classified the same way.
func New(db *sql.DB) *Store { return &Store{db: db, unprepared: sqlitedb.New(db)} }

// queries returns the prepared statements, preparing them when not yet
// done; on a failed preparation, the unprepared ones.
func (s *Store) queries(ctx context.Context) *sqlitedb.Queries {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared == nil {
		q, err := sqlitedb.Prepare(ctx, s.db)
		if err != nil {
			return s.unprepared
		}
		s.prepared = q
	}
	return s.prepared
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func nullTS(t time.Time, valid bool) sql.NullString {
	return sql.NullString{String: ts(t), Valid: valid}
}

func parseTS(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func text(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// inTx runs fn in one transaction (BEGIN IMMEDIATE), committing when it
// returns nil.
func (s *Store) inTx(ctx context.Context, fn func(q *sqlitedb.Queries) error) error {
	q := s.queries(ctx)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(q.WithTx(tx)); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// errRetry asks Append to run its transaction again.
var errRetry = errors.New("retry")

// Append implements application.StreamStore.
func (s *Store) Append(ctx context.Context, environment string, c application.NewCommand, at time.Time) (application.Appended, error) {
	for range maxAttempts {
		var out application.Appended
		err := s.inTx(ctx, func(q *sqlitedb.Queries) error {
			existing, err := q.CommandByID(ctx, c.ID)
			switch {
			case err == nil:
				seq, err := domain.DecideRetry(domain.ExistingCommand{Environment: existing.Environment, Sequence: existing.Sequence, Digest: existing.Digest}, environment, c.Digest)
				out = application.Appended{ID: c.ID, Sequence: seq, Digest: c.Digest}
				return err
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			head, err := q.AdvanceHead(ctx, environment)
			if errors.Is(err, sql.ErrNoRows) {
				if err := q.EnsureStream(ctx, sqlitedb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
					return err
				}
				head, err = q.AdvanceHead(ctx, environment)
			}
			if err != nil {
				return err
			}
			n, err := q.InsertCommand(ctx, sqlitedb.InsertCommandParams{
				Environment: environment, Sequence: head, CommandID: c.ID, Operation: c.Operation, Digest: c.Digest, Canonical: c.Canonical, AppendedAt: ts(at),
			})
			if err != nil {
				return err
			}
			if n == 0 {
				return errRetry
			}
			out = application.Appended{ID: c.ID, Sequence: head, Digest: c.Digest, Created: true}
			return nil
		})
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return application.Appended{}, unavailable(fmt.Errorf("append command %s to stream %s: %w", c.ID, environment, err))
		}
		return out, nil
	}
	return application.Appended{}, fmt.Errorf("append command %s to stream %s: gave up after %d concurrent attempts", c.ID, environment, maxAttempts)
}

func stateOf(row sqlitedb.StreamStateRow) domain.StreamState {
	return domain.StreamState{
		Environment: row.Environment, HeadSequence: row.HeadSequence, AcknowledgedSequence: row.AcknowledgedSequence,
		InstallationID: row.InstallationID.String, BoundAt: parseTS(row.BoundAt.String),
	}
}

// State implements application.StreamStore.
func (s *Store) State(ctx context.Context, environment string) (domain.StreamState, error) {
	return state(ctx, s.queries(ctx), environment)
}

func state(ctx context.Context, q *sqlitedb.Queries, environment string) (domain.StreamState, error) {
	row, err := q.StreamState(ctx, environment)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.StreamState{Environment: environment}, nil
	}
	if err != nil {
		return domain.StreamState{}, unavailable(fmt.Errorf("read stream %s: %w", environment, err))
	}
	return stateOf(row), nil
}

// CommandsAfter implements application.StreamStore: one statement bounded
// by the gapless sequence range, whose sum of canonical sizes stops at
// maxBytes (always the first).
func (s *Store) CommandsAfter(ctx context.Context, environment string, after int64, limit int, maxBytes int64) ([]application.StoredCommand, error) {
	rows, err := s.queries(ctx).CommandsAfter(ctx, sqlitedb.CommandsAfterParams{Environment: environment, After: after, MaxCount: int64(limit), MaxBytes: maxBytes})
	if err != nil {
		return nil, unavailable(fmt.Errorf("read commands of stream %s after %d: %w", environment, after, err))
	}
	out := make([]application.StoredCommand, 0, len(rows))
	for _, r := range rows {
		out = append(out, application.StoredCommand{Sequence: r.Sequence, Digest: r.Digest, Canonical: r.Canonical})
	}
	return out, nil
}

// Command implements application.StreamStore.
func (s *Store) Command(ctx context.Context, environment, id string) (application.CommandRecord, error) {
	row, err := s.queries(ctx).CommandRecord(ctx, sqlitedb.CommandRecordParams{Environment: environment, CommandID: id})
	if errors.Is(err, sql.ErrNoRows) {
		return application.CommandRecord{}, fmt.Errorf("%w: no command %s in stream %s", domain.ErrUnknownCommand, id, environment)
	}
	if err != nil {
		return application.CommandRecord{}, unavailable(fmt.Errorf("read command %s: %w", id, err))
	}
	return application.CommandRecord{
		Command:    application.StoredCommand{Sequence: row.Sequence, Digest: row.Digest, Canonical: row.Canonical},
		AppendedAt: parseTS(row.AppendedAt), Result: row.Result, ResultDigest: row.ResultDigest.String, AcknowledgedAt: parseTS(row.AcknowledgedAt.String),
		ResultExpiredAt: parseTS(row.ResultExpiredAt.String),
	}, nil
}

// ExpireResults implements application.StreamStore: one statement (one
// transaction) over the held results of operation by age.
func (s *Store) ExpireResults(ctx context.Context, operation string, acknowledgedBefore, at time.Time, limit int) (int, error) {
	n, err := s.queries(ctx).ExpireResults(ctx, sqlitedb.ExpireResultsParams{
		ExpiredAt: nullTS(at, true), Operation: operation, AcknowledgedBefore: ts(acknowledgedBefore), MaxCount: int64(limit),
	})
	if err != nil {
		return 0, unavailable(fmt.Errorf("expire %s results: %w", operation, err))
	}
	return int(n), nil
}

// RecordRuntimeVersion implements application.StreamStore: one upsert
// (one transaction) that keeps the later pull.
func (s *Store) RecordRuntimeVersion(ctx context.Context, v application.RuntimeVersion) error {
	err := s.queries(ctx).RecordRuntimeVersion(ctx, sqlitedb.RecordRuntimeVersionParams{
		Environment: v.Environment, InstallationID: v.InstallationID, Version: v.Version, PulledAt: ts(v.PulledAt),
	})
	if err != nil {
		return unavailable(fmt.Errorf("record the runtime version of stream %s: %w", v.Environment, err))
	}
	return nil
}

// RuntimeVersion implements application.StreamStore.
func (s *Store) RuntimeVersion(ctx context.Context, environment string) (application.RuntimeVersion, bool, error) {
	row, err := s.queries(ctx).RuntimeVersion(ctx, environment)
	if errors.Is(err, sql.ErrNoRows) {
		return application.RuntimeVersion{}, false, nil
	}
	if err != nil {
		return application.RuntimeVersion{}, false, unavailable(fmt.Errorf("read the runtime version of stream %s: %w", environment, err))
	}
	return application.RuntimeVersion{Environment: environment, InstallationID: row.InstallationID, Version: row.Version, PulledAt: parseTS(row.PulledAt)}, true, nil
}

// Bindings implements application.StreamStore.
func (s *Store) Bindings(ctx context.Context, environment string) ([]application.Binding, error) {
	rows, err := s.queries(ctx).Bindings(ctx, environment)
	if err != nil {
		return nil, unavailable(fmt.Errorf("read bindings of stream %s: %w", environment, err))
	}
	out := make([]application.Binding, 0, len(rows))
	for _, r := range rows {
		out = append(out, application.Binding{
			Environment: environment, Action: r.Action, InstallationID: r.InstallationID.String,
			PreviousInstallationID: r.PreviousInstallationID.String, Principal: r.Principal, Reason: r.Reason, RecordedAt: parseTS(r.RecordedAt),
		})
	}
	return out, nil
}

// Locked implements application.StreamStore: it runs fn in one transaction (BEGIN IMMEDIATE: the database's
// write lock), creating the row of a stream never used.
func (s *Store) Locked(ctx context.Context, environment string, at time.Time, fn func(application.LockedStream) error) error {
	return unavailable(s.inTx(ctx, func(q *sqlitedb.Queries) error {
		if err := q.EnsureStream(ctx, sqlitedb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
			return err
		}
		return fn(&locked{q: q, environment: environment})
	}))
}

// locked implements application.LockedStream inside a transaction.
type locked struct {
	q           *sqlitedb.Queries
	environment string
}

// State returns the stream's state.
func (l *locked) State(ctx context.Context) (domain.StreamState, error) {
	return state(ctx, l.q, l.environment)
}

// SetInstallation sets the bound installation and records b.
func (l *locked) SetInstallation(ctx context.Context, installation string, at time.Time, b application.Binding) error {
	if err := l.q.SetInstallation(ctx, sqlitedb.SetInstallationParams{Environment: l.environment, InstallationID: text(installation), BoundAt: nullTS(at, installation != "")}); err != nil {
		return err
	}
	return l.q.InsertBinding(ctx, sqlitedb.InsertBindingParams{
		Environment: l.environment, Action: b.Action, InstallationID: text(b.InstallationID), PreviousInstallationID: text(b.PreviousInstallationID),
		Principal: b.Principal, Reason: b.Reason, RecordedAt: ts(b.RecordedAt),
	})
}

// CommandAt returns the command at sequence, nil when there is none.
func (l *locked) CommandAt(ctx context.Context, sequence int64) (*domain.StoredCommand, error) {
	row, err := l.q.CommandAt(ctx, sqlitedb.CommandAtParams{Environment: l.environment, Sequence: sequence})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &domain.StoredCommand{ID: row.CommandID, Digest: row.Digest, ResultDigest: row.ResultDigest.String}, nil
}

// Record stores the result's exact bytes and advances the acknowledged
// sequence.
func (l *locked) Record(ctx context.Context, sequence int64, r application.ReceivedResult, at time.Time) error {
	n, err := l.q.RecordResult(ctx, sqlitedb.RecordResultParams{Environment: l.environment, Sequence: sequence, Result: r.Bytes, ResultDigest: text(r.Digest), AcknowledgedAt: nullTS(at, true)})
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("command %d already holds a result", sequence)
	}
	if n, err = l.q.AdvanceAcknowledged(ctx, sqlitedb.AdvanceAcknowledgedParams{Environment: l.environment, Sequence: sequence}); err != nil {
		return err
	}
	if n != 1 {
		return errors.New("the acknowledged sequence moved inside its transaction")
	}
	return nil
}
