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
	q  *sqlitedb.Queries
}

var _ application.StreamStore = (*Store)(nil)

// New returns a store on db (a migrated execution_ports SQLite database).
func New(db *sql.DB) *Store { return &Store{db: db, q: sqlitedb.New(db)} }

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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(s.q.WithTx(tx)); err != nil {
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
				Environment: environment, Sequence: head, CommandID: c.ID, Digest: c.Digest, Canonical: c.Canonical, AppendedAt: ts(at),
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
			return application.Appended{}, fmt.Errorf("append command %s to stream %s: %w", c.ID, environment, err)
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
	return state(ctx, s.q, environment)
}

func state(ctx context.Context, q *sqlitedb.Queries, environment string) (domain.StreamState, error) {
	row, err := q.StreamState(ctx, environment)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.StreamState{Environment: environment}, nil
	}
	if err != nil {
		return domain.StreamState{}, fmt.Errorf("read stream %s: %w", environment, err)
	}
	return stateOf(row), nil
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
	err = s.inTx(ctx, func(q *sqlitedb.Queries) error {
		if err := q.EnsureStream(ctx, sqlitedb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
			return err
		}
		if err := bindIfUnbound(ctx, q, environment, installation, principal, at); err != nil {
			return err
		}
		st, err = state(ctx, q, environment)
		return err
	})
	if err != nil {
		return domain.StreamState{}, fmt.Errorf("bind stream %s: %w", environment, err)
	}
	if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
		return domain.StreamState{}, err
	}
	return st, nil
}

// bindIfUnbound binds an unbound stream to installation and records it.
func bindIfUnbound(ctx context.Context, q *sqlitedb.Queries, environment, installation, principal string, at time.Time) error {
	n, err := q.BindIfUnbound(ctx, sqlitedb.BindIfUnboundParams{Environment: environment, InstallationID: text(installation), BoundAt: nullTS(at, true)})
	if err != nil || n == 0 {
		return err
	}
	return q.InsertBinding(ctx, sqlitedb.InsertBindingParams{
		Environment: environment, Action: application.BindingBound, InstallationID: text(installation),
		Principal: principal, Reason: "first use by an unbound stream's Runtime", RecordedAt: ts(at),
	})
}

// CommandsAfter implements application.StreamStore.
func (s *Store) CommandsAfter(ctx context.Context, environment string, after int64, limit int) ([]application.StoredCommand, error) {
	rows, err := s.q.CommandsAfter(ctx, sqlitedb.CommandsAfterParams{Environment: environment, Sequence: after, Limit: int64(limit)})
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
	err := s.inTx(ctx, func(q *sqlitedb.Queries) error {
		if err := q.EnsureStream(ctx, sqlitedb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
			return err
		}
		st, err := state(ctx, q, environment)
		if err != nil {
			return err
		}
		if err := domain.CheckInstallation(st.InstallationID, installation); err != nil {
			return err
		}
		if st.InstallationID == "" {
			if err := bindIfUnbound(ctx, q, environment, installation, principal, at); err != nil {
				return err
			}
		}
		var stored *domain.StoredCommand
		row, err := q.CommandAt(ctx, sqlitedb.CommandAtParams{Environment: environment, Sequence: sequence})
		switch {
		case err == nil:
			stored = &domain.StoredCommand{ID: row.CommandID, Digest: row.Digest, ResultDigest: row.ResultDigest.String}
		case !errors.Is(err, sql.ErrNoRows):
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
		n, err := q.RecordResult(ctx, sqlitedb.RecordResultParams{Environment: environment, Sequence: sequence, Result: r.Bytes, ResultDigest: text(r.Digest), AcknowledgedAt: nullTS(at, true)})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("command %d already holds a result while the stream is acknowledged to %d", sequence, st.AcknowledgedSequence)
		}
		n, err = q.AdvanceAcknowledged(ctx, sqlitedb.AdvanceAcknowledgedParams{Environment: environment, Sequence: sequence})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("acknowledged sequence of stream %s moved inside its transaction", environment)
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
	row, err := s.q.CommandRecord(ctx, sqlitedb.CommandRecordParams{Environment: environment, CommandID: id})
	if errors.Is(err, sql.ErrNoRows) {
		return application.CommandRecord{}, fmt.Errorf("%w: no command %s in stream %s", domain.ErrUnknownCommand, id, environment)
	}
	if err != nil {
		return application.CommandRecord{}, fmt.Errorf("read command %s: %w", id, err)
	}
	return application.CommandRecord{
		Command:    application.StoredCommand{Sequence: row.Sequence, Digest: row.Digest, Canonical: row.Canonical},
		AppendedAt: parseTS(row.AppendedAt), Result: row.Result, ResultDigest: row.ResultDigest.String, AcknowledgedAt: parseTS(row.AcknowledgedAt.String),
	}, nil
}

// Rebind implements application.StreamStore.
func (s *Store) Rebind(ctx context.Context, environment, installation, principal, reason string, at time.Time) (application.Binding, error) {
	b := application.Binding{Environment: environment, Action: application.BindingRebound, InstallationID: installation, Principal: principal, Reason: reason, RecordedAt: parseTS(ts(at))}
	err := s.inTx(ctx, func(q *sqlitedb.Queries) error {
		if err := q.EnsureStream(ctx, sqlitedb.EnsureStreamParams{Environment: environment, CreatedAt: ts(at)}); err != nil {
			return err
		}
		st, err := state(ctx, q, environment)
		if err != nil {
			return err
		}
		b.PreviousInstallationID = st.InstallationID
		if err := q.SetInstallation(ctx, sqlitedb.SetInstallationParams{Environment: environment, InstallationID: text(installation), BoundAt: nullTS(at, installation != "")}); err != nil {
			return err
		}
		return q.InsertBinding(ctx, sqlitedb.InsertBindingParams{
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
			PreviousInstallationID: r.PreviousInstallationID.String, Principal: r.Principal, Reason: r.Reason, RecordedAt: parseTS(r.RecordedAt),
		})
	}
	return out, nil
}
