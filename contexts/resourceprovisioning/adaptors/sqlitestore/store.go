// Package sqlitestore is Resource Provisioning's store on a SQLite file (modernc,
// sqlc-generated queries in sqlitedb). Writes go through the handle's single
// connection with BEGIN IMMEDIATE, so write transactions are serialised and
// change-feed positions taken inside them follow commit order. Reads use a
// separate read-only pool on the same WAL file, so they never wait for a
// write transaction and see committed data only.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/internal/rows"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore/sqlitedb"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/database"
)

// readConns bounds the read pool.
const readConns = 4

// Store implements application.Store on a SQLite file.
type Store struct {
	write *sql.DB
	read  *sql.DB
	rq    *sqlitedb.Queries
}

var _ application.Store = (*Store)(nil)

// New returns a Store writing through write (the handle's single-connection
// database, already migrated) and reading through a read-only pool it opens
// on path. Close releases the read pool; write belongs to the caller.
func New(write *sql.DB, path string) (*Store, error) {
	read, err := database.OpenSQLiteReadPool(path, readConns)
	if err != nil {
		return nil, err
	}
	return &Store{write: write, read: read, rq: sqlitedb.New(read)}, nil
}

// Close closes the read pool.
func (s *Store) Close() error { return s.read.Close() }

// InReportTx implements application.Store.
func (s *Store) InReportTx(ctx context.Context, fn func(context.Context, application.ReportTx) error) error {
	return s.inTx(ctx, func(ctx context.Context, q *sqlitedb.Queries) error { return fn(ctx, reportTx{q}) })
}

// InEventTx implements application.Store (write transactions are
// serialised anyway).
func (s *Store) InEventTx(ctx context.Context, fn func(context.Context, application.EventTx) error) error {
	return s.inTx(ctx, func(ctx context.Context, q *sqlitedb.Queries) error { return fn(ctx, eventTx{reportTx{q}}) })
}

// InAccountTx implements application.Store.
func (s *Store) InAccountTx(ctx context.Context, fn func(context.Context, application.AccountTx) error) error {
	return s.inTx(ctx, func(ctx context.Context, q *sqlitedb.Queries) error { return fn(ctx, accountTx{reportTx{q}}) })
}

func (s *Store) inTx(ctx context.Context, fn func(context.Context, *sqlitedb.Queries) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return dbErr("begin", err)
	}
	if err := fn(ctx, sqlitedb.New(tx)); err != nil {
		_ = tx.Rollback()
		return err
	}
	return dbErr("commit", tx.Commit())
}

// dbErr wraps a database error for op. A file that cannot be opened, read
// or written, a lock not granted within the busy timeout, or a closed
// database is an *database.UnavailableError (wrapping
// application.ErrUnavailable; its message carries no driver text, which can
// name the file); a cancelled context is wrapped plainly, like any other
// error.
func dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, application.ErrUnavailable) || !database.Unavailable(err) {
		return fmt.Errorf("sqlite %s: %w", op, err)
	}
	return &database.UnavailableError{Sentinel: application.ErrUnavailable, Op: "sqlite " + op, Cause: err}
}

// Ping implements application.Store: both pools answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return dbErr("ping", err)
	}
	return dbErr("ping read pool", s.read.PingContext(ctx))
}

// ProjectAllocations implements application.Reader.
func (s *Store) ProjectAllocations(ctx context.Context, projectID, site string) ([]domain.Allocation, error) {
	rs, err := s.rq.ProjectAllocations(ctx, sqlitedb.ProjectAllocationsParams{ProjectID: projectID, Site: site})
	if err != nil {
		return nil, dbErr("project allocations", err)
	}
	return rows.ToDomainAll(rs, toRow)
}

// AllocationsAfter implements application.Reader.
func (s *Store) AllocationsAfter(ctx context.Context, afterID string, limit int) ([]domain.Allocation, error) {
	rs, err := s.rq.AllocationsAfter(ctx, sqlitedb.AllocationsAfterParams{After: afterID, MaxRows: maxRows(limit)})
	if err != nil {
		return nil, dbErr("allocations page", err)
	}
	return rows.ToDomainAll(rs, toRow)
}

// ChangesHead implements application.Reader.
func (s *Store) ChangesHead(ctx context.Context) (int64, error) {
	p, err := s.rq.ChangesHead(ctx)
	return p, dbErr("changes head", err)
}

// ChangesAfter implements application.Reader.
func (s *Store) ChangesAfter(ctx context.Context, after int64, limit int) ([]domain.Change, error) {
	rs, err := s.rq.ChangesAfter(ctx, sqlitedb.ChangesAfterParams{After: after, MaxRows: maxRows(limit)})
	if err != nil {
		return nil, dbErr("changes", err)
	}
	return rows.Changes(rs, func(r sqlitedb.ChangesAfterRow) (int64, string, []byte) {
		return r.Position, r.EventType, []byte(r.Payload)
	})
}

// BindingConflicts implements application.Reader.
func (s *Store) BindingConflicts(ctx context.Context) ([]domain.BindingConflict, error) {
	rs, err := s.rq.BindingConflicts(ctx)
	if err != nil {
		return nil, dbErr("binding conflicts", err)
	}
	return rows.GroupConflicts(len(rs), func(i int) (string, string, string) {
		return rs[i].Instance, rs[i].ExternalID, rs[i].ProjectID
	}), nil
}

// maxRows turns a row limit into a LIMIT value; 0 or less means no limit
// (SQLite's LIMIT -1).
func maxRows(limit int) int64 {
	if limit <= 0 {
		return -1
	}
	return int64(limit)
}

func toRow(r sqlitedb.Allocation) rows.Allocation {
	var applied []byte
	if r.AppliedLimits.Valid {
		applied = []byte(r.AppliedLimits.String)
	}
	return rows.Allocation{
		ID: r.ID, Site: r.Site, ProviderResourceID: r.ProviderResourceID, ProjectID: r.ProjectID,
		OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID, NativeScope: r.NativeScope,
		Lifecycle: r.Lifecycle, Reasons: []byte(r.Reasons), Configured: []byte(r.ConfiguredLimits), Applied: applied,
		WaldurState: r.WaldurState, Paused: r.Paused, Revision: r.Revision, ContentDigest: r.ContentDigest,
		ObservedAt: rows.FromMicros(r.ObservedAt), LastSeenAt: rows.FromMicros(r.LastSeenAt),
	}
}

func nullJSON(b []byte) sql.NullString {
	return sql.NullString{String: string(b), Valid: b != nil}
}

type reportTx struct{ q *sqlitedb.Queries }

func (t reportTx) LockAllocation(ctx context.Context, id string) (*domain.Allocation, error) {
	r, err := t.q.LockAllocation(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
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

func (t reportTx) ProviderProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error) {
	ids, err := t.q.ProviderProjectClaims(ctx, sqlitedb.ProviderProjectClaimsParams{Instance: instance, ExternalID: providerProjectID, MaxRows: maxRows(limit)})
	return ids, dbErr("provider project claims", err)
}

func (t reportTx) InsertAllocation(ctx context.Context, a domain.Allocation) (bool, error) {
	r := rows.FromDomain(a)
	n, err := t.q.InsertAllocation(ctx, sqlitedb.InsertAllocationParams{
		ID: r.ID, Site: r.Site, ProviderResourceID: r.ProviderResourceID, ProjectID: r.ProjectID,
		OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID, NativeScope: r.NativeScope,
		Lifecycle: r.Lifecycle, Reasons: string(r.Reasons), ConfiguredLimits: string(r.Configured),
		AppliedLimits: nullJSON(r.Applied), WaldurState: r.WaldurState, Paused: r.Paused, Revision: r.Revision,
		ContentDigest: r.ContentDigest, ObservedAt: rows.Micros(r.ObservedAt), LastSeenAt: rows.Micros(r.LastSeenAt),
	})
	return n == 1, dbErr("insert allocation", err)
}

func (t reportTx) UpdateAllocation(ctx context.Context, a domain.Allocation) error {
	r := rows.FromDomain(a)
	return dbErr("update allocation", t.q.UpdateAllocation(ctx, sqlitedb.UpdateAllocationParams{
		ID: r.ID, ProjectID: r.ProjectID, OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID,
		NativeScope: r.NativeScope, Lifecycle: r.Lifecycle, Reasons: string(r.Reasons),
		ConfiguredLimits: string(r.Configured), AppliedLimits: nullJSON(r.Applied), WaldurState: r.WaldurState,
		Paused: r.Paused, Revision: r.Revision, ContentDigest: r.ContentDigest,
		ObservedAt: rows.Micros(r.ObservedAt), LastSeenAt: rows.Micros(r.LastSeenAt),
	}))
}

func (t reportTx) RenewAllocation(ctx context.Context, id string, observedAt, lastSeenAt time.Time) error {
	return dbErr("renew allocation", t.q.RenewAllocation(ctx, sqlitedb.RenewAllocationParams{ID: id, ObservedAt: rows.Micros(observedAt), LastSeenAt: rows.Micros(lastSeenAt)}))
}

func (t reportTx) InsertReceipt(ctx context.Context, r domain.Receipt) error {
	return dbErr("insert receipt", t.q.InsertReceipt(ctx, sqlitedb.InsertReceiptParams{
		AllocationID: r.AllocationID, Revision: r.Revision, ObservedAt: rows.Micros(r.ObservedAt),
		ReceivedAt: rows.Micros(r.ReceivedAt), ContentDigest: r.ContentDigest, Report: string(r.Report),
	}))
}

func (t reportTx) AppendChanges(ctx context.Context, events []domain.AllocationChanged, recordedAt time.Time) error {
	out := make([]outgoing, 0, len(events))
	for _, ev := range events {
		out = append(out, outgoing{domain.AllocationChangedType, ev.AllocationID, ev.Revision, ev.Payload()})
	}
	return t.appendOutbox(ctx, out, recordedAt)
}

// outgoing is one outbox row to write.
type outgoing struct {
	eventType, subjectID string
	revision             int64
	payload              []byte
}

// appendOutbox writes outbox rows at the next feed positions (taken inside
// the serialised write transaction, so they follow commit order).
func (t reportTx) appendOutbox(ctx context.Context, out []outgoing, recordedAt time.Time) error {
	if len(out) == 0 {
		return nil
	}
	last, err := t.q.AdvanceChangesHead(ctx, int64(len(out)))
	if err != nil {
		return dbErr("advance changes head", err)
	}
	first := last - int64(len(out)) + 1
	for i, o := range out {
		if err := t.q.InsertChange(ctx, sqlitedb.InsertChangeParams{
			Position: first + int64(i), EventType: o.eventType, SubjectID: o.subjectID, Revision: o.revision,
			Payload: string(o.payload), RecordedAt: rows.Micros(recordedAt),
		}); err != nil {
			return dbErr("insert change", err)
		}
	}
	return nil
}

type eventTx struct{ reportTx }

func (t eventTx) InsertEventReceipt(ctx context.Context, r domain.EventReceipt) (bool, error) {
	n, err := t.q.InsertEventReceipt(ctx, sqlitedb.InsertEventReceiptParams{
		EventID: r.EventID, EventType: r.Type, ContentDigest: r.ContentDigest, Outcome: r.Outcome,
		OccurredAt: rows.Micros(r.OccurredAt), ReceivedAt: rows.Micros(r.ReceivedAt),
	})
	return n == 1, dbErr("insert event receipt", err)
}

func (t eventTx) EventReceipt(ctx context.Context, eventID string) (domain.EventReceipt, error) {
	r, err := t.q.EventReceipt(ctx, eventID)
	if err != nil {
		return domain.EventReceipt{}, dbErr("event receipt", err)
	}
	return domain.EventReceipt{EventID: r.EventID, Type: r.EventType, ContentDigest: r.ContentDigest, Outcome: r.Outcome, OccurredAt: rows.FromMicros(r.OccurredAt), ReceivedAt: rows.FromMicros(r.ReceivedAt)}, nil
}

func (t eventTx) SetEventOutcome(ctx context.Context, eventID, outcome string) error {
	return dbErr("set event outcome", t.q.SetEventOutcome(ctx, sqlitedb.SetEventOutcomeParams{EventID: eventID, Outcome: outcome}))
}

func (t eventTx) UpsertProject(ctx context.Context, p domain.ProjectView) (bool, error) {
	n, err := t.q.UpsertProject(ctx, sqlitedb.UpsertProjectParams{ProjectID: p.ProjectID, Revision: p.Revision, State: p.State, UpdatedAt: rows.Micros(p.UpdatedAt)})
	return n == 1, dbErr("upsert project", err)
}

func (t eventTx) ReplaceProjectBindings(ctx context.Context, projectID string, bindings []domain.ProviderBinding) error {
	if err := t.q.DeleteProjectBindings(ctx, projectID); err != nil {
		return dbErr("delete project bindings", err)
	}
	for _, b := range bindings {
		if err := t.q.InsertProjectBinding(ctx, sqlitedb.InsertProjectBindingParams{ProjectID: projectID, Instance: b.Instance, ExternalID: b.ExternalID}); err != nil {
			return dbErr("insert project binding", err)
		}
	}
	return nil
}

func (t eventTx) UpsertPartyBinding(ctx context.Context, b domain.PartyProviderBinding, occurredAt, updatedAt time.Time) (bool, error) {
	n, err := t.q.UpsertPartyBinding(ctx, sqlitedb.UpsertPartyBindingParams{
		BindingID: b.ID, PartyID: b.PartyID, Revision: b.Revision, Provider: b.Provider, Instance: b.Instance,
		ExternalID: b.ExternalID, State: b.State, Generation: b.Generation, UpdatedAt: rows.Micros(updatedAt),
		OccurredAt: rows.Micros(occurredAt),
	})
	return n == 1, dbErr("upsert party binding", err)
}

// CountReceipts returns how many receipts (material changes) allocationID
// has; a diagnostic for tests and operators.
func (s *Store) CountReceipts(ctx context.Context, allocationID string) (int64, error) {
	n, err := s.rq.CountReceipts(ctx, allocationID)
	return n, dbErr("count receipts", err)
}
