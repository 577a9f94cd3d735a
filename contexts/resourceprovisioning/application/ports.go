// Package application holds Resource Provisioning's services: report intake
// (one transaction per batch), the Beto event intake that builds the Project
// and Party binding views, native member accounts (the agent's account
// report and lookup, and the Runtime member bindings derived from the views
// and the reports), and the reads other contexts use (a Project's
// allocations with freshness, the paginated snapshot, the change feed, the
// ready accounts, an environment's desired bindings). It
// declares the ports its adaptors implement: the stores, the clock and an
// observer for refusals worth counting.
//
// Rule sources: docs/resource-provisioning.md; docs/execution-ports.md#owner-ports.
package application

import (
	"context"
	"errors"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// ErrUnavailable is wrapped by every store error that means the database
// could not be reached or answered (connection refused, closed pool,
// timeout, SQLite busy). Stores return it as the platform's
// database.UnavailableError, whose message is this sentence only (no
// driver text); readers map it to ResourceLookupUnavailable and never guess.
var ErrUnavailable = errors.New("resource provisioning store unavailable")

// ErrUnknownCursor is wrapped by a read's error when its position is not
// one this context issued: an allocation cursor that is not an allocation
// ID, a change feed position that is negative or beyond the feed head.
var ErrUnknownCursor = errors.New("not a cursor issued by resource provisioning")

// Clock is the source of server time (receipt times, freshness). Times are
// used in UTC.
type Clock interface {
	Now() time.Time
}

// Observer is told about refusals and conflicts an operator should see
// (logged and counted by the telemetry adaptor), with the context of the
// request that led to it (the log lines carry the request's ID).
type Observer interface {
	// EventConflict: an event_id was received again with other content and
	// refused.
	EventConflict(ctx context.Context, eventID, eventType string)
	// BindingConflict: after a Project event, a provider Project is claimed
	// by several canonical Projects.
	BindingConflict(ctx context.Context, c domain.BindingConflict)
}

// Store is the context's database: transactions for intake and reads.
type Store interface {
	// InReportTx runs fn in one transaction and commits when fn returns
	// nil. fn may be run again when the engine asks for a retry
	// (serialization failure, deadlock); it must not keep effects outside
	// the transaction between runs. Errors wrap ErrUnavailable when the
	// database cannot be reached.
	InReportTx(ctx context.Context, fn func(ctx context.Context, tx ReportTx) error) error
	// InEventTx is InReportTx for the Beto event intake. Event
	// transactions are serialised (on PostgreSQL by a transaction advisory
	// lock), so deriving member bindings from the views never misses a
	// concurrent event's change.
	InEventTx(ctx context.Context, fn func(ctx context.Context, tx EventTx) error) error
	// InAccountTx is InReportTx for the account report intake.
	InAccountTx(ctx context.Context, fn func(ctx context.Context, tx AccountTx) error) error
	Reader
	// Ping checks the database answers (readiness).
	Ping(ctx context.Context) error
}

// Reader is the read side of the store. Reads see committed data only.
type Reader interface {
	// ProjectAllocations returns the allocations bound to projectID, at site
	// (every Site when site is empty), ordered by Site then ID.
	ProjectAllocations(ctx context.Context, projectID, site string) ([]domain.Allocation, error)
	// AllocationsAfter returns up to limit allocations with ID > afterID in
	// ID order (keyset paging).
	AllocationsAfter(ctx context.Context, afterID string, limit int) ([]domain.Allocation, error)
	// ChangesHead returns the position of the newest committed change (0
	// when none). Every change at or below it is committed and readable.
	ChangesHead(ctx context.Context) (int64, error)
	// ChangesAfter returns up to limit changes with position > after, in
	// position (= commit) order.
	ChangesAfter(ctx context.Context, after int64, limit int) ([]domain.Change, error)
	// BindingConflicts returns every provider Project claimed by more than
	// one canonical Project, ordered by instance then provider Project.
	BindingConflicts(ctx context.Context) ([]domain.BindingConflict, error)
	// InconsistentAllocationsAfter returns up to limit allocations with ID >
	// afterID in ID order (keyset paging) that are neither retired nor
	// suspended and whose applied limits differ from the configured ones,
	// that have the reason limits_not_applied, or whose LastSeenAt is before
	// staleBefore (docs/resource-provisioning.md#the-inconsistencies-read).
	InconsistentAllocationsAfter(ctx context.Context, afterID string, staleBefore time.Time, limit int) ([]domain.Allocation, error)
	// AmbiguousResources returns every canonical Project with several
	// non-retired allocations at one Site, ordered by Project then Site,
	// each with its allocation IDs in ID order.
	AmbiguousResources(ctx context.Context) ([]domain.AmbiguousResource, error)
	MemberReader
}

// ReportTx is one report transaction. Allocation rows are locked until the
// transaction ends.
type ReportTx interface {
	// LockAllocation returns the allocation with id, locked for update, or
	// nil when there is none.
	LockAllocation(ctx context.Context, id string) (*domain.Allocation, error)
	// ProviderProjectClaims returns up to two canonical Project IDs whose
	// Waldur binding at instance names providerProjectID, sorted.
	ProviderProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error)
	// InsertAllocation inserts a new allocation; false when the ID exists
	// already (a concurrent transaction inserted it first).
	InsertAllocation(ctx context.Context, a domain.Allocation) (bool, error)
	// UpdateAllocation stores a material change of a locked allocation.
	UpdateAllocation(ctx context.Context, a domain.Allocation) error
	// RenewAllocation moves only observed_at and last_seen_at.
	RenewAllocation(ctx context.Context, id string, observedAt, lastSeenAt time.Time) error
	// InsertReceipt stores the receipt of a material change.
	InsertReceipt(ctx context.Context, r domain.Receipt) error
	// AppendChanges writes AllocationChanged outbox rows in this
	// transaction. Their feed positions follow commit order: no change that
	// commits later gets a position at or below one already readable
	// (SQLite assigns them inside its serialised write transaction;
	// PostgreSQL right after commit, see adaptors/pgstore;
	// docs/resource-provisioning.md#the-change-feeds-ordering).
	AppendChanges(ctx context.Context, events []domain.AllocationChanged, recordedAt time.Time) error
	// AllocationAccountBindings returns the IDs of the bindings named by the
	// allocation's accounts that are not absent, sorted.
	AllocationAccountBindings(ctx context.Context, allocationID string) ([]string, error)
	BindingTx
}

// EventTx is one Beto event transaction.
type EventTx interface {
	// InsertEventReceipt records a new event_id; false when it was received
	// before (nothing inserted).
	InsertEventReceipt(ctx context.Context, r domain.EventReceipt) (bool, error)
	// EventReceipt returns the receipt of eventID (which must exist).
	EventReceipt(ctx context.Context, eventID string) (domain.EventReceipt, error)
	// SetEventOutcome records what the event did (applied or ignored).
	SetEventOutcome(ctx context.Context, eventID, outcome string) error
	// UpsertProject stores p when the view has no row for it or an older
	// revision; true when stored.
	UpsertProject(ctx context.Context, p domain.ProjectView) (bool, error)
	// ReplaceProjectBindings replaces the Project's Waldur bindings.
	ReplaceProjectBindings(ctx context.Context, projectID string, bindings []domain.ProviderBinding) error
	// ProviderProjectClaims is ReportTx.ProviderProjectClaims.
	ProviderProjectClaims(ctx context.Context, instance, providerProjectID string, limit int) ([]string, error)
	// UpsertPartyBinding stores b, changed at Beto's occurredAt, when the
	// view has no row for its ID or an older revision; true when stored.
	UpsertPartyBinding(ctx context.Context, b domain.PartyProviderBinding, occurredAt, updatedAt time.Time) (bool, error)
	MembershipTx
	BindingTx
}
