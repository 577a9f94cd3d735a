// Package pgstore is Resource Provisioning's store on PostgreSQL (pgx/v5
// pool, sqlc-generated queries in pgdb). Transactions run at READ COMMITTED
// with row locks: a report locks its allocation row (SELECT … FOR UPDATE, or
// the unique index on insert). Serialization failures and deadlocks are
// retried inside the store.
//
// The change feed: a material change writes its AllocationChanged outbox row
// in its own transaction, without a feed position; the sequencer gives
// committed rows their positions afterwards (sequencer.go).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/internal/rows"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/database"
)

// maxAttempts bounds retries of a transaction after a serialization failure
// or a deadlock.
const maxAttempts = 8

// Store implements application.Store on a pgx pool. The pool belongs to the
// caller.
type Store struct {
	pool *pgxpool.Pool
	q    *pgdb.Queries
	seq  *groupRunner
}

// New returns a Store on pool (already migrated).
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: pgdb.New(pool), seq: newGroupRunner()}
}

var _ application.Store = (*Store)(nil)

// InReportTx implements application.Store. After a transaction that wrote
// changes commits, it waits until they have feed positions (see
// sequencer.go) before it returns; a failure there is not the report's
// failure (the change is stored and the next sequencer run positions it),
// so it is not returned.
func (s *Store) InReportTx(ctx context.Context, fn func(context.Context, application.ReportTx) error) error {
	return s.inWriteTx(ctx, false, func(ctx context.Context, t *reportTx) error { return fn(ctx, t) })
}

// InEventTx implements application.Store. Event transactions take the
// transaction advisory lock EventLockKey first, so they run one at a time:
// a binding derived from the Project and Party binding views then always
// sees the changes of the events before it.
func (s *Store) InEventTx(ctx context.Context, fn func(context.Context, application.EventTx) error) error {
	return s.inWriteTx(ctx, true, func(ctx context.Context, t *reportTx) error { return fn(ctx, eventTx{t}) })
}

// InAccountTx implements application.Store.
func (s *Store) InAccountTx(ctx context.Context, fn func(context.Context, application.AccountTx) error) error {
	return s.inWriteTx(ctx, false, func(ctx context.Context, t *reportTx) error { return fn(ctx, accountTx{t}) })
}

// EventLockKey is the transaction advisory lock of event transactions.
const EventLockKey int64 = 764_002

// inWriteTx runs fn in one transaction (after the event lock when
// lockEvents) and, when it wrote changes and committed, waits until they
// have feed positions (see sequencer.go) before it returns; a failure there
// is not the transaction's failure (the change is stored and the next
// sequencer run positions it), so it is not returned.
func (s *Store) inWriteTx(ctx context.Context, lockEvents bool, fn func(context.Context, *reportTx) error) error {
	var appended bool
	err := s.inTx(ctx, func(ctx context.Context, q *pgdb.Queries) error {
		if lockEvents {
			if err := q.LockSequencer(ctx, EventLockKey); err != nil {
				return dbErr("lock events", err)
			}
		}
		t := &reportTx{q: q}
		if err := fn(ctx, t); err != nil {
			return err
		}
		appended = t.appended
		return nil
	})
	if err == nil && appended {
		_, _ = s.seq.await(func() (int64, error) { return s.positionChanges(ctx) })
	}
	return err
}

func (s *Store) inTx(ctx context.Context, fn func(context.Context, *pgdb.Queries) error) error {
	for attempt := 1; ; attempt++ {
		err := s.attempt(ctx, fn)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
	}
}

func (s *Store) attempt(ctx context.Context, fn func(context.Context, *pgdb.Queries) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return dbErr("begin", err)
	}
	if err := fn(ctx, pgdb.New(tx)); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return dbErr("commit", err)
	}
	return nil
}

// retryable reports a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// dbErr wraps a database error for op. Failures to reach or use the
// database now are an *database.UnavailableError (wrapping
// application.ErrUnavailable; its message carries no driver text): a
// connection that could not be made (pgconn.ConnectError, whatever its
// SQLSTATE: a dropped database's FATAL 3D000 or a refused login's 28xxx
// arrive that way) or was lost (network errors, EOF, reset), a closed pool,
// a deadline passed, and the SQLSTATE classes 08 (connection exception),
// 53 (insufficient resources), 57 (operator intervention: admin shutdown,
// crash shutdown, cannot connect now), 58 (system error), 28 (invalid
// authorization) and 3D000 (invalid catalog name), PostgreSQL Appendix A.
// A cancelled context is the caller's, not the database's state: wrapped
// plainly, like any other error.
func dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, application.ErrUnavailable) || !database.Unavailable(err) {
		return fmt.Errorf("postgres %s: %w", op, err)
	}
	return &database.UnavailableError{Sentinel: application.ErrUnavailable, Op: "postgres " + op, Cause: err}
}

// Ping implements application.Store.
func (s *Store) Ping(ctx context.Context) error { return dbErr("ping", s.pool.Ping(ctx)) }

// ProjectAllocations implements application.Reader.
func (s *Store) ProjectAllocations(ctx context.Context, projectID, site string) ([]domain.Allocation, error) {
	rs, err := s.q.ProjectAllocations(ctx, pgdb.ProjectAllocationsParams{ProjectID: projectID, Site: site})
	if err != nil {
		return nil, dbErr("project allocations", err)
	}
	return rows.ToDomainAll(rs, toRow)
}

// AllocationsAfter implements application.Reader.
func (s *Store) AllocationsAfter(ctx context.Context, afterID string, limit int) ([]domain.Allocation, error) {
	rs, err := s.q.AllocationsAfter(ctx, pgdb.AllocationsAfterParams{After: afterID, MaxRows: clampRows(limit)})
	if err != nil {
		return nil, dbErr("allocations page", err)
	}
	return rows.ToDomainAll(rs, toRow)
}

// ChangesHead implements application.Reader.
func (s *Store) ChangesHead(ctx context.Context) (int64, error) {
	p, err := s.q.ChangesHead(ctx)
	return p, dbErr("changes head", err)
}

// ChangesAfter implements application.Reader.
func (s *Store) ChangesAfter(ctx context.Context, after int64, limit int) ([]domain.Change, error) {
	rs, err := s.q.ChangesAfter(ctx, pgdb.ChangesAfterParams{After: after, MaxRows: clampRows(limit)})
	if err != nil {
		return nil, dbErr("changes", err)
	}
	return rows.Changes(rs, func(r pgdb.ChangesAfterRow) (int64, string, []byte) { return r.Position, r.EventType, r.Payload })
}

// BindingConflicts implements application.Reader.
func (s *Store) BindingConflicts(ctx context.Context) ([]domain.BindingConflict, error) {
	rs, err := s.q.BindingConflicts(ctx)
	if err != nil {
		return nil, dbErr("binding conflicts", err)
	}
	return rows.GroupConflicts(len(rs), func(i int) (string, string, string) {
		return rs[i].Instance, rs[i].ExternalID, rs[i].ProjectID
	}), nil
}

// clampRows turns a row limit into a LIMIT value; 0 or less means no limit.
func clampRows(limit int) int32 {
	if limit <= 0 || limit > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(limit)
}

func toRow(r pgdb.Allocation) rows.Allocation {
	return rows.Allocation{
		ID: r.ID, Site: r.Site, ProviderResourceID: r.ProviderResourceID, ProjectID: r.ProjectID,
		OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID, NativeScope: r.NativeScope,
		Lifecycle: r.Lifecycle, Reasons: r.Reasons, Configured: r.ConfiguredLimits, Applied: r.AppliedLimits,
		WaldurState: r.WaldurState, Paused: r.Paused, Revision: r.Revision, ContentDigest: r.ContentDigest,
		ObservedAt: r.ObservedAt, LastSeenAt: r.LastSeenAt,
	}
}

type reportTx struct {
	q *pgdb.Queries
	// appended is set when the transaction wrote outbox rows.
	appended bool
}

func (t *reportTx) LockAllocation(ctx context.Context, id string) (*domain.Allocation, error) {
	r, err := t.q.LockAllocation(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("lock allocation", err)
	}
	a, err := toRow(r).ToDomain()
	if err != nil {
		return nil, err
	}
	return &a, nil
}

func (t *reportTx) ProviderProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error) {
	ids, err := t.q.ProviderProjectClaims(ctx, pgdb.ProviderProjectClaimsParams{Instance: instance, ExternalID: providerProjectID, MaxRows: clampRows(limit)})
	return ids, dbErr("provider project claims", err)
}

func (t *reportTx) InsertAllocation(ctx context.Context, a domain.Allocation) (bool, error) {
	r := rows.FromDomain(a)
	n, err := t.q.InsertAllocation(ctx, pgdb.InsertAllocationParams{
		ID: r.ID, Site: r.Site, ProviderResourceID: r.ProviderResourceID, ProjectID: r.ProjectID,
		OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID, NativeScope: r.NativeScope,
		Lifecycle: r.Lifecycle, Reasons: r.Reasons, ConfiguredLimits: r.Configured, AppliedLimits: r.Applied,
		WaldurState: r.WaldurState, Paused: r.Paused, Revision: r.Revision, ContentDigest: r.ContentDigest,
		ObservedAt: r.ObservedAt, LastSeenAt: r.LastSeenAt,
	})
	return n == 1, dbErr("insert allocation", err)
}

func (t *reportTx) UpdateAllocation(ctx context.Context, a domain.Allocation) error {
	r := rows.FromDomain(a)
	return dbErr("update allocation", t.q.UpdateAllocation(ctx, pgdb.UpdateAllocationParams{
		ID: r.ID, ProjectID: r.ProjectID, OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID,
		NativeScope: r.NativeScope, Lifecycle: r.Lifecycle, Reasons: r.Reasons, ConfiguredLimits: r.Configured,
		AppliedLimits: r.Applied, WaldurState: r.WaldurState, Paused: r.Paused, Revision: r.Revision,
		ContentDigest: r.ContentDigest, ObservedAt: r.ObservedAt, LastSeenAt: r.LastSeenAt,
	}))
}

func (t *reportTx) RenewAllocation(ctx context.Context, id string, observedAt, lastSeenAt time.Time) error {
	return dbErr("renew allocation", t.q.RenewAllocation(ctx, pgdb.RenewAllocationParams{ID: id, ObservedAt: observedAt.UTC(), LastSeenAt: lastSeenAt.UTC()}))
}

func (t *reportTx) InsertReceipt(ctx context.Context, r domain.Receipt) error {
	return dbErr("insert receipt", t.q.InsertReceipt(ctx, pgdb.InsertReceiptParams{
		AllocationID: r.AllocationID, Revision: r.Revision, ObservedAt: r.ObservedAt.UTC(),
		ReceivedAt: r.ReceivedAt.UTC(), ContentDigest: r.ContentDigest, Report: r.Report,
	}))
}

func (t *reportTx) AppendChanges(ctx context.Context, events []domain.AllocationChanged, recordedAt time.Time) error {
	for _, ev := range events {
		if err := t.q.InsertChange(ctx, pgdb.InsertChangeParams{
			EventType: domain.AllocationChangedType, SubjectID: ev.AllocationID, Revision: ev.Revision, Payload: ev.Payload(), RecordedAt: recordedAt.UTC(),
		}); err != nil {
			return dbErr("insert change", err)
		}
	}
	t.appended = t.appended || len(events) > 0
	return nil
}

type eventTx struct{ *reportTx }

func (t eventTx) InsertEventReceipt(ctx context.Context, r domain.EventReceipt) (bool, error) {
	n, err := t.q.InsertEventReceipt(ctx, pgdb.InsertEventReceiptParams{
		EventID: r.EventID, EventType: r.Type, ContentDigest: r.ContentDigest, Outcome: r.Outcome,
		OccurredAt: r.OccurredAt.UTC(), ReceivedAt: r.ReceivedAt.UTC(),
	})
	return n == 1, dbErr("insert event receipt", err)
}

func (t eventTx) EventReceipt(ctx context.Context, eventID string) (domain.EventReceipt, error) {
	r, err := t.q.EventReceipt(ctx, eventID)
	if err != nil {
		return domain.EventReceipt{}, dbErr("event receipt", err)
	}
	return domain.EventReceipt{EventID: r.EventID, Type: r.EventType, ContentDigest: r.ContentDigest, Outcome: r.Outcome, OccurredAt: r.OccurredAt.UTC(), ReceivedAt: r.ReceivedAt.UTC()}, nil
}

func (t eventTx) SetEventOutcome(ctx context.Context, eventID, outcome string) error {
	return dbErr("set event outcome", t.q.SetEventOutcome(ctx, pgdb.SetEventOutcomeParams{EventID: eventID, Outcome: outcome}))
}

func (t eventTx) UpsertProject(ctx context.Context, p domain.ProjectView) (bool, error) {
	n, err := t.q.UpsertProject(ctx, pgdb.UpsertProjectParams{ProjectID: p.ProjectID, Revision: p.Revision, State: p.State, UpdatedAt: p.UpdatedAt.UTC()})
	return n == 1, dbErr("upsert project", err)
}

func (t eventTx) ReplaceProjectBindings(ctx context.Context, projectID string, bindings []domain.ProviderBinding) error {
	if err := t.q.DeleteProjectBindings(ctx, projectID); err != nil {
		return dbErr("delete project bindings", err)
	}
	for _, b := range bindings {
		if err := t.q.InsertProjectBinding(ctx, pgdb.InsertProjectBindingParams{ProjectID: projectID, Instance: b.Instance, ExternalID: b.ExternalID}); err != nil {
			return dbErr("insert project binding", err)
		}
	}
	return nil
}

func (t eventTx) UpsertPartyBinding(ctx context.Context, b domain.PartyProviderBinding, occurredAt, updatedAt time.Time) (bool, error) {
	n, err := t.q.UpsertPartyBinding(ctx, pgdb.UpsertPartyBindingParams{
		BindingID: b.ID, PartyID: b.PartyID, Revision: b.Revision, Provider: b.Provider, Instance: b.Instance,
		ExternalID: b.ExternalID, State: b.State, Generation: b.Generation, UpdatedAt: updatedAt.UTC(), OccurredAt: occurredAt.UTC(),
	})
	return n == 1, dbErr("upsert party binding", err)
}

// CountReceipts returns how many receipts (material changes) allocationID
// has; a diagnostic for tests and operators.
func (s *Store) CountReceipts(ctx context.Context, allocationID string) (int64, error) {
	n, err := s.q.CountReceipts(ctx, allocationID)
	return n, dbErr("count receipts", err)
}

// Close releases nothing: the pool belongs to the caller.
func (s *Store) Close() error { return nil }
