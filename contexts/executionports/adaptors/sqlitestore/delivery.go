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
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The delivery store of member bindings (application.DeliveryStore,
// docs/execution-ports.md#delivery-of-member-bindings).

var _ application.DeliveryStore = (*Store)(nil)

func parseNullTS(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	return parseTS(s.String)
}

func deliveryOf(r sqlitedb.BindingDelivery) application.Delivery {
	return application.Delivery{
		Environment: r.Environment, BindingID: r.BindingID, Revision: r.Revision, Generation: r.Generation,
		Operation: siteprotocol.Operation(r.Operation), CommandID: r.CommandID, Digest: r.Digest, Canonical: r.Canonical,
		PlannedAt: parseTS(r.PlannedAt), Sequence: r.Sequence.Int64, AppendedAt: parseNullTS(r.AppendedAt),
		Outcome: r.Outcome.String, Reason: r.Reason.String, AppliedRevision: r.AppliedRevision.Int64,
		AcknowledgedAt: parseNullTS(r.AcknowledgedAt),
	}
}

// PlanDelivery implements application.DeliveryStore: in one transaction,
// an insert that does nothing when the binding revision or the command ID
// is stored, then the stored row.
func (s *Store) PlanDelivery(ctx context.Context, d application.Delivery) (application.Delivery, error) {
	var row sqlitedb.BindingDelivery
	err := s.inTx(ctx, func(q *sqlitedb.Queries) error {
		if err := q.InsertDelivery(ctx, sqlitedb.InsertDeliveryParams{
			Environment: d.Environment, BindingID: d.BindingID, Revision: d.Revision, Generation: d.Generation,
			Operation: string(d.Operation), CommandID: d.CommandID, Digest: d.Digest, Canonical: d.Canonical, PlannedAt: ts(d.PlannedAt),
		}); err != nil {
			return err
		}
		var err error
		row, err = q.DeliveryByCommand(ctx, d.CommandID)
		if errors.Is(err, sql.ErrNoRows) {
			row, err = q.DeliveryAt(ctx, sqlitedb.DeliveryAtParams{Environment: d.Environment, BindingID: d.BindingID, Revision: d.Revision})
		}
		return err
	})
	if err != nil {
		return application.Delivery{}, unavailable(fmt.Errorf("store delivery %s: %w", d.CommandID, err))
	}
	return application.CheckPlanned(d, deliveryOf(row))
}

// LatestDeliveries implements application.DeliveryStore.
func (s *Store) LatestDeliveries(ctx context.Context, environment string) ([]application.Delivery, error) {
	rows, err := s.queries(ctx).LatestDeliveries(ctx, environment)
	if err != nil {
		return nil, unavailable(fmt.Errorf("read deliveries of %s: %w", environment, err))
	}
	out := make([]application.Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, deliveryOf(r))
	}
	return out, nil
}

// MarkAppended implements application.DeliveryStore.
func (s *Store) MarkAppended(ctx context.Context, environment, bindingID string, revision, sequence int64, at time.Time) error {
	err := s.queries(ctx).MarkDeliveryAppended(ctx, sqlitedb.MarkDeliveryAppendedParams{
		Sequence: sql.NullInt64{Int64: sequence, Valid: true}, AppendedAt: nullTS(at, true), Environment: environment, BindingID: bindingID, Revision: revision,
	})
	return unavailable(err)
}

// MarkAcknowledged implements application.DeliveryStore.
func (s *Store) MarkAcknowledged(ctx context.Context, environment, bindingID string, revision int64, outcome, reason string, appliedRevision int64, at time.Time) error {
	err := s.queries(ctx).MarkDeliveryAcknowledged(ctx, sqlitedb.MarkDeliveryAcknowledgedParams{
		Outcome: sql.NullString{String: outcome, Valid: true}, Reason: sql.NullString{String: reason, Valid: true},
		AppliedRevision: sql.NullInt64{Int64: appliedRevision, Valid: appliedRevision > 0}, AcknowledgedAt: nullTS(at, true),
		Environment: environment, BindingID: bindingID, Revision: revision,
	})
	return unavailable(err)
}

// WithDeliveryLock implements application.DeliveryStore with a lock per
// environment in this process, taken without waiting: the embedded SQLite
// database has one server process (docs/execution-ports.md#delivery-of-member-bindings).
func (s *Store) WithDeliveryLock(ctx context.Context, environment string, fn func(ctx context.Context) error) (bool, error) {
	m, _ := s.deliveryLocks.LoadOrStore(environment, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		return false, nil
	}
	defer mu.Unlock()
	return true, fn(ctx)
}
