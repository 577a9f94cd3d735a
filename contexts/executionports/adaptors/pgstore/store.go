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
			Channel: Channel, Environment: environment, CommandID: c.ID, Digest: c.Digest, Canonical: c.Canonical, AppendedAt: ts(at),
		})
		switch {
		case err == nil:
			return application.Appended{ID: c.ID, Sequence: seq, Digest: c.Digest, Created: true}, nil
		case errors.Is(err, pgx.ErrNoRows): // the stream's row does not exist yet
			if err := s.q.EnsureStream(ctx, pgdb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
				return application.Appended{}, fmt.Errorf("create stream %s: %w", environment, err)
			}
			continue
		case !isUniqueViolation(err):
			return application.Appended{}, fmt.Errorf("append command %s to stream %s: %w", c.ID, environment, err)
		}
		existing, err := s.q.CommandByID(ctx, c.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // the conflicting append rolled back meanwhile
		}
		if err != nil {
			return application.Appended{}, fmt.Errorf("read command %s: %w", c.ID, err)
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
		return domain.StreamState{}, fmt.Errorf("read stream %s: %w", environment, err)
	}
	return stateOf(environment, row.HeadSequence, row.AcknowledgedSequence, row.InstallationID, row.BoundAt), nil
}

// Bind implements application.StreamStore.
func (s *Store) Bind(ctx context.Context, environment, installation, principal string, at time.Time) (domain.StreamState, error) {
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
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.EnsureStream(ctx, pgdb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
			return err
		}
		return bindIfUnbound(ctx, q, environment, installation, principal, at)
	})
	if err != nil {
		return domain.StreamState{}, fmt.Errorf("bind stream %s: %w", environment, err)
	}
	st, err = s.State(ctx, environment)
	if err != nil {
		return domain.StreamState{}, err
	}
	if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
		return domain.StreamState{}, err
	}
	return st, nil
}

// bindIfUnbound binds an unbound stream to installation and records it.
func bindIfUnbound(ctx context.Context, q *pgdb.Queries, environment, installation, principal string, at time.Time) error {
	n, err := q.BindIfUnbound(ctx, pgdb.BindIfUnboundParams{Environment: environment, InstallationID: text(installation), BoundAt: ts(at)})
	if err != nil || n == 0 {
		return err
	}
	return q.InsertBinding(ctx, pgdb.InsertBindingParams{
		Environment: environment, Action: application.BindingBound, InstallationID: text(installation),
		Principal: principal, Reason: "first use by an unbound stream's Runtime", RecordedAt: ts(at),
	})
}

// CommandsAfter implements application.StreamStore.
func (s *Store) CommandsAfter(ctx context.Context, environment string, after int64, limit int) ([]application.StoredCommand, error) {
	rows, err := s.q.CommandsAfter(ctx, pgdb.CommandsAfterParams{Environment: environment, Sequence: after, Limit: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read commands of stream %s after %d: %w", environment, after, err)
	}
	out := make([]application.StoredCommand, 0, len(rows))
	for _, r := range rows {
		out = append(out, application.StoredCommand{Sequence: r.Sequence, Digest: r.Digest, Canonical: r.Canonical})
	}
	return out, nil
}

// Acknowledge implements application.StreamStore.
func (s *Store) Acknowledge(ctx context.Context, environment, installation, principal string, sequence int64, r application.ReceivedResult, at time.Time) (application.Acknowledgement, error) {
	var ack application.Acknowledgement
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		st, err := lockStream(ctx, q, environment, at)
		if err != nil {
			return err
		}
		if err := domain.CheckInstallation(st.InstallationID.String, installation); err != nil {
			return err
		}
		if !st.InstallationID.Valid {
			if err := bindIfUnbound(ctx, q, environment, installation, principal, at); err != nil {
				return err
			}
		}
		var stored *domain.StoredCommand
		row, err := q.CommandAt(ctx, pgdb.CommandAtParams{Environment: environment, Sequence: sequence})
		switch {
		case err == nil:
			stored = &domain.StoredCommand{ID: row.CommandID, Digest: row.Digest, ResultDigest: row.ResultDigest.String}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		action, err := domain.DecideAcknowledgement(st.AcknowledgedSequence, sequence, stored, r.ReceivedResult)
		if err != nil {
			return err
		}
		ack = application.Acknowledgement{Sequence: sequence, ResultDigest: r.Digest, Replayed: action == domain.AckReplay}
		if action == domain.AckReplay {
			return nil
		}
		n, err := q.RecordResult(ctx, pgdb.RecordResultParams{Environment: environment, Sequence: sequence, Result: r.Bytes, ResultDigest: text(r.Digest), AcknowledgedAt: ts(at)})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("command %d already holds a result while the stream is acknowledged to %d", sequence, st.AcknowledgedSequence)
		}
		n, err = q.AdvanceAcknowledged(ctx, pgdb.AdvanceAcknowledgedParams{Environment: environment, Sequence: sequence})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("acknowledged sequence of stream %s moved under its lock", environment)
		}
		return nil
	})
	if err != nil {
		return application.Acknowledgement{}, fmt.Errorf("acknowledge command %d of stream %s: %w", sequence, environment, err)
	}
	return ack, nil
}

// Command implements application.StreamStore.
func (s *Store) Command(ctx context.Context, environment, id string) (application.CommandRecord, error) {
	row, err := s.q.CommandRecord(ctx, pgdb.CommandRecordParams{Environment: environment, CommandID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return application.CommandRecord{}, fmt.Errorf("%w: no command %s in stream %s", domain.ErrUnknownCommand, id, environment)
	}
	if err != nil {
		return application.CommandRecord{}, fmt.Errorf("read command %s: %w", id, err)
	}
	return application.CommandRecord{
		Command:    application.StoredCommand{Sequence: row.Sequence, Digest: row.Digest, Canonical: row.Canonical},
		AppendedAt: row.AppendedAt.Time, Result: row.Result, ResultDigest: row.ResultDigest.String, AcknowledgedAt: row.AcknowledgedAt.Time,
	}, nil
}

// Rebind implements application.StreamStore.
func (s *Store) Rebind(ctx context.Context, environment, installation, principal, reason string, at time.Time) (application.Binding, error) {
	b := application.Binding{Environment: environment, Action: application.BindingRebound, InstallationID: installation, Principal: principal, Reason: reason, RecordedAt: at.UTC()}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		st, err := lockStream(ctx, q, environment, at)
		if err != nil {
			return err
		}
		b.PreviousInstallationID = st.InstallationID.String
		boundAt := ts(at)
		boundAt.Valid = installation != ""
		if err := q.SetInstallation(ctx, pgdb.SetInstallationParams{Environment: environment, InstallationID: text(installation), BoundAt: boundAt}); err != nil {
			return err
		}
		return q.InsertBinding(ctx, pgdb.InsertBindingParams{
			Environment: environment, Action: b.Action, InstallationID: text(installation), PreviousInstallationID: text(b.PreviousInstallationID),
			Principal: principal, Reason: reason, RecordedAt: ts(at),
		})
	})
	if err != nil {
		return application.Binding{}, fmt.Errorf("rebind stream %s: %w", environment, err)
	}
	return b, nil
}

// Bindings implements application.StreamStore.
func (s *Store) Bindings(ctx context.Context, environment string) ([]application.Binding, error) {
	rows, err := s.q.Bindings(ctx, environment)
	if err != nil {
		return nil, fmt.Errorf("read bindings of stream %s: %w", environment, err)
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

// lockStream locks the stream's row for the transaction, creating the row
// for a stream never used.
func lockStream(ctx context.Context, q *pgdb.Queries, environment string, at time.Time) (pgdb.LockStreamRow, error) {
	st, err := q.LockStream(ctx, environment)
	if !errors.Is(err, pgx.ErrNoRows) {
		return st, err
	}
	if err := q.EnsureStream(ctx, pgdb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
		return st, err
	}
	return q.LockStream(ctx, environment)
}
