// Package pgstore is the PostgreSQL adaptor of the execution_ports stream
// store (application.StreamStore), on the context's own database through a
// pgx pool and the sqlc queries in sql/postgres/executionports. Appends are
// one statement (the per-stream counter's UPDATE … RETURNING, the INSERT and
// pg_notify); acknowledgements lock the stream row. Listener wakes waiting
// pulls of every server process through LISTEN/NOTIFY.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// Channel is the PostgreSQL notification channel an append notifies with
// the environment as payload.
const Channel = "metallo_execution_streams"

// maxAttempts bounds the retries of an append that met a concurrent append
// of the same command ID, or a stream row created concurrently.
const maxAttempts = 4

// Store is the PostgreSQL stream store.
type Store struct {
	pool *pgxpool.Pool
	q    *pgdb.Queries
}

var _ application.StreamStore = (*Store)(nil)

// New returns a store on pool (a migrated execution_ports database).
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: pgdb.New(pool)}
}

func ts(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t.UTC(), Valid: true} }

func text(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func isUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505"
}

// Append implements application.StreamStore. The append statement runs
// first: a new command costs one round trip. A command ID already stored
// makes it fail with a unique violation (nothing changes); the stored
// command then decides the retry (domain.DecideRetry).
func (s *Store) Append(ctx context.Context, environment string, c application.NewCommand, at time.Time) (application.Appended, error) {
	for range maxAttempts {
		seq, err := s.q.AppendCommand(ctx, pgdb.AppendCommandParams{
			Channel: Channel, Environment: environment, CommandID: c.ID, Operation: c.Operation, Digest: c.Digest, Canonical: c.Canonical, AppendedAt: ts(at),
		})
		switch {
		case err == nil:
			return application.Appended{ID: c.ID, Sequence: seq, Digest: c.Digest, Created: true}, nil
		case errors.Is(err, pgx.ErrNoRows): // the stream's row does not exist yet
			if err := s.q.EnsureStream(ctx, pgdb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
				return application.Appended{}, unavailable(fmt.Errorf("create stream %s: %w", environment, err))
			}
			continue
		case !isUniqueViolation(err):
			return application.Appended{}, unavailable(fmt.Errorf("append command %s to stream %s: %w", c.ID, environment, err))
		}
		existing, err := s.q.CommandByID(ctx, c.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the conflicting append rolled back meanwhile
		}
		if err != nil {
			return application.Appended{}, unavailable(fmt.Errorf("read command %s: %w", c.ID, err))
		}
		seq, err = domain.DecideRetry(domain.ExistingCommand{Environment: existing.Environment, Sequence: existing.Sequence, Digest: existing.Digest}, environment, c.Digest)
		if err != nil {
			return application.Appended{}, fmt.Errorf("append command %s to stream %s: %w", c.ID, environment, err)
		}
		return application.Appended{ID: c.ID, Sequence: seq, Digest: c.Digest}, nil
	}
	return application.Appended{}, fmt.Errorf("append command %s to stream %s: gave up after %d concurrent attempts", c.ID, environment, maxAttempts)
}

func stateOf(environment string, head, acked int64, installation pgtype.Text, boundAt pgtype.Timestamptz) domain.StreamState {
	return domain.StreamState{
		Environment: environment, HeadSequence: head, AcknowledgedSequence: acked,
		InstallationID: installation.String, BoundAt: boundAt.Time,
	}
}

// State implements application.StreamStore.
func (s *Store) State(ctx context.Context, environment string) (domain.StreamState, error) {
	row, err := s.q.StreamState(ctx, environment)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.StreamState{Environment: environment}, nil
	}
	if err != nil {
		return domain.StreamState{}, unavailable(fmt.Errorf("read stream %s: %w", environment, err))
	}
	return stateOf(environment, row.HeadSequence, row.AcknowledgedSequence, row.InstallationID, row.BoundAt), nil
}

// CommandsAfter implements application.StreamStore: one statement whose
// running sum of canonical sizes stops at maxBytes (always the first).
func (s *Store) CommandsAfter(ctx context.Context, environment string, after int64, limit int, maxBytes int64) ([]application.StoredCommand, error) {
	rows, err := s.q.CommandsAfter(ctx, pgdb.CommandsAfterParams{Environment: environment, After: after, MaxCount: int32(min(limit, math.MaxInt32)), MaxBytes: maxBytes})
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
	row, err := s.q.CommandRecord(ctx, pgdb.CommandRecordParams{Environment: environment, CommandID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return application.CommandRecord{}, fmt.Errorf("%w: no command %s in stream %s", domain.ErrUnknownCommand, id, environment)
	}
	if err != nil {
		return application.CommandRecord{}, unavailable(fmt.Errorf("read command %s: %w", id, err))
	}
	return application.CommandRecord{
		Command:    application.StoredCommand{Sequence: row.Sequence, Digest: row.Digest, Canonical: row.Canonical},
		AppendedAt: row.AppendedAt.Time, Result: row.Result, ResultDigest: row.ResultDigest.String, AcknowledgedAt: row.AcknowledgedAt.Time,
		ResultExpiredAt: row.ResultExpiredAt.Time,
	}, nil
}

// ExpireResults implements application.StreamStore: one statement over the
// held results of operation by age (index commands_held_results); rows
// another sweep holds are skipped, not waited for.
func (s *Store) ExpireResults(ctx context.Context, operation string, acknowledgedBefore, at time.Time, limit int) (int, error) {
	n, err := s.q.ExpireResults(ctx, pgdb.ExpireResultsParams{
		ExpiredAt: ts(at), Operation: operation, AcknowledgedBefore: ts(acknowledgedBefore), MaxCount: int32(min(limit, math.MaxInt32)),
	})
	if err != nil {
		return 0, unavailable(fmt.Errorf("expire %s results: %w", operation, err))
	}
	return int(n), nil
}

// RecordRuntimeVersion implements application.StreamStore: one upsert
// that keeps the later pull.
func (s *Store) RecordRuntimeVersion(ctx context.Context, v application.RuntimeVersion) error {
	err := s.q.RecordRuntimeVersion(ctx, pgdb.RecordRuntimeVersionParams{
		Environment: v.Environment, InstallationID: v.InstallationID, Version: v.Version, PulledAt: ts(v.PulledAt),
	})
	if err != nil {
		return unavailable(fmt.Errorf("record the runtime version of stream %s: %w", v.Environment, err))
	}
	return nil
}

// RuntimeVersion implements application.StreamStore.
func (s *Store) RuntimeVersion(ctx context.Context, environment string) (application.RuntimeVersion, bool, error) {
	row, err := s.q.RuntimeVersion(ctx, environment)
	if errors.Is(err, pgx.ErrNoRows) {
		return application.RuntimeVersion{}, false, nil
	}
	if err != nil {
		return application.RuntimeVersion{}, false, unavailable(fmt.Errorf("read the runtime version of stream %s: %w", environment, err))
	}
	return application.RuntimeVersion{Environment: environment, InstallationID: row.InstallationID, Version: row.Version, PulledAt: row.PulledAt.Time.UTC()}, true, nil
}

// Bindings implements application.StreamStore.
func (s *Store) Bindings(ctx context.Context, environment string) ([]application.Binding, error) {
	rows, err := s.q.Bindings(ctx, environment)
	if err != nil {
		return nil, unavailable(fmt.Errorf("read bindings of stream %s: %w", environment, err))
	}
	out := make([]application.Binding, 0, len(rows))
	for _, r := range rows {
		out = append(out, application.Binding{
			Environment: environment, Action: r.Action, InstallationID: r.InstallationID.String,
			PreviousInstallationID: r.PreviousInstallationID.String, Principal: r.Principal, Reason: r.Reason, RecordedAt: r.RecordedAt.Time.UTC(),
		})
	}
	return out, nil
}

// Locked implements application.StreamStore: it runs fn in one transaction that holds environment's stream
// row lock (SELECT … FOR UPDATE, creating the row of a stream never used).
func (s *Store) Locked(ctx context.Context, environment string, at time.Time, fn func(application.LockedStream) error) error {
	return unavailable(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return fn(&locked{q: s.q.WithTx(tx), environment: environment, at: at})
	}))
}

// locked implements application.LockedStream inside a transaction.
type locked struct {
	q           *pgdb.Queries
	environment string
	// at is the transaction's time (a stream row it creates).
	at time.Time
}

// State locks the stream's row and returns its state.
func (l *locked) State(ctx context.Context) (domain.StreamState, error) {
	st, err := l.q.LockStream(ctx, l.environment)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := l.q.EnsureStream(ctx, pgdb.EnsureStreamParams{Environment: l.environment, CreatedAt: ts(l.at)}); err != nil {
			return domain.StreamState{}, err
		}
		st, err = l.q.LockStream(ctx, l.environment)
	}
	if err != nil {
		return domain.StreamState{}, err
	}
	return stateOf(l.environment, st.HeadSequence, st.AcknowledgedSequence, st.InstallationID, st.BoundAt), nil
}

// SetInstallation sets the bound installation and records b.
func (l *locked) SetInstallation(ctx context.Context, installation string, at time.Time, b application.Binding) error {
	boundAt := ts(at)
	boundAt.Valid = installation != ""
	if err := l.q.SetInstallation(ctx, pgdb.SetInstallationParams{Environment: l.environment, InstallationID: text(installation), BoundAt: boundAt}); err != nil {
		return err
	}
	return l.q.InsertBinding(ctx, pgdb.InsertBindingParams{
		Environment: l.environment, Action: b.Action, InstallationID: text(b.InstallationID), PreviousInstallationID: text(b.PreviousInstallationID),
		Principal: b.Principal, Reason: b.Reason, RecordedAt: ts(b.RecordedAt),
	})
}

// CommandAt returns the command at sequence, nil when there is none.
func (l *locked) CommandAt(ctx context.Context, sequence int64) (*domain.StoredCommand, error) {
	row, err := l.q.CommandAt(ctx, pgdb.CommandAtParams{Environment: l.environment, Sequence: sequence})
	if errors.Is(err, pgx.ErrNoRows) {
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
	n, err := l.q.RecordResult(ctx, pgdb.RecordResultParams{Environment: l.environment, Sequence: sequence, Result: r.Bytes, ResultDigest: text(r.Digest), AcknowledgedAt: ts(at)})
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("command %d already holds a result", sequence)
	}
	if n, err = l.q.AdvanceAcknowledged(ctx, pgdb.AdvanceAcknowledgedParams{Environment: l.environment, Sequence: sequence}); err != nil {
		return err
	}
	if n != 1 {
		return errors.New("the acknowledged sequence moved under the stream's lock")
	}
	return nil
}
