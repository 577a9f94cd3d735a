package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The delivery store of member bindings (application.DeliveryStore,
// docs/execution-ports.md#delivery-of-member-bindings).

var _ application.DeliveryStore = (*Store)(nil)

func deliveryOf(r pgdb.BindingDelivery) application.Delivery {
	return application.Delivery{
		Environment: r.Environment, BindingID: r.BindingID, Revision: r.Revision, Generation: r.Generation,
		Operation: siteprotocol.Operation(r.Operation), CommandID: r.CommandID, Digest: r.Digest, Canonical: r.Canonical,
		PlannedAt: r.PlannedAt.Time.UTC(), Sequence: r.Sequence.Int64, AppendedAt: r.AppendedAt.Time.UTC(),
		Outcome: r.Outcome.String, Reason: r.Reason.String, AppliedRevision: r.AppliedRevision.Int64,
		AcknowledgedAt: r.AcknowledgedAt.Time.UTC(),
	}
}

// PlanDelivery implements application.DeliveryStore: one insert that does
// nothing when the binding revision or the command ID is stored, then the
// stored row by command ID.
func (s *Store) PlanDelivery(ctx context.Context, d application.Delivery) (application.Delivery, error) {
	err := s.q.InsertDelivery(ctx, pgdb.InsertDeliveryParams{
		Environment: d.Environment, BindingID: d.BindingID, Revision: d.Revision, Generation: d.Generation,
		Operation: string(d.Operation), CommandID: d.CommandID, Digest: d.Digest, Canonical: d.Canonical, PlannedAt: ts(d.PlannedAt),
	})
	if err != nil {
		return application.Delivery{}, unavailable(fmt.Errorf("store delivery %s: %w", d.CommandID, err))
	}
	row, err := s.q.DeliveryByCommand(ctx, d.CommandID)
	if errors.Is(err, pgx.ErrNoRows) {
		// The binding revision is stored under another command ID.
		row, err = s.q.DeliveryAt(ctx, pgdb.DeliveryAtParams{Environment: d.Environment, BindingID: d.BindingID, Revision: d.Revision})
	}
	if err != nil {
		return application.Delivery{}, unavailable(fmt.Errorf("read delivery %s: %w", d.CommandID, err))
	}
	return application.CheckPlanned(d, deliveryOf(row))
}

// LatestDeliveries implements application.DeliveryStore.
func (s *Store) LatestDeliveries(ctx context.Context, environment string) ([]application.Delivery, error) {
	rows, err := s.q.LatestDeliveries(ctx, environment)
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
	err := s.q.MarkDeliveryAppended(ctx, pgdb.MarkDeliveryAppendedParams{
		Sequence: pgtype.Int8{Int64: sequence, Valid: true}, AppendedAt: ts(at), Environment: environment, BindingID: bindingID, Revision: revision,
	})
	return unavailable(err)
}

// MarkAcknowledged implements application.DeliveryStore.
func (s *Store) MarkAcknowledged(ctx context.Context, environment, bindingID string, revision int64, outcome, reason string, appliedRevision int64, at time.Time) error {
	err := s.q.MarkDeliveryAcknowledged(ctx, pgdb.MarkDeliveryAcknowledgedParams{
		Outcome: pgtype.Text{String: outcome, Valid: true}, Reason: pgtype.Text{String: reason, Valid: true},
		AppliedRevision: pgtype.Int8{Int64: appliedRevision, Valid: appliedRevision > 0}, AcknowledgedAt: ts(at),
		Environment: environment, BindingID: bindingID, Revision: revision,
	})
	return unavailable(err)
}

// WithDeliveryLock implements application.DeliveryStore with a
// session-level advisory lock on a connection of its own, taken without
// waiting (pg_try_advisory_lock) and released when fn returns; a process
// that dies loses its connection and with it the lock.
func (s *Store) WithDeliveryLock(ctx context.Context, environment string, fn func(ctx context.Context) error) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, unavailable(fmt.Errorf("delivery lock of %s: %w", environment, err))
	}
	defer conn.Release()
	q := pgdb.New(conn)
	got, err := q.TryDeliveryLock(ctx, environment)
	if err != nil {
		return false, unavailable(fmt.Errorf("delivery lock of %s: %w", environment, err))
	}
	if !got {
		return false, nil
	}
	runErr := fn(ctx)
	// Unlock on a context of its own: fn's may be cancelled (the process
	// stops), and a lock left on a pooled connection would block every
	// other deliverer until that connection closes.
	unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := q.DeliveryUnlock(unlockCtx, environment); err != nil {
		// The lock's state is unknown: drop the connection so it goes.
		_ = conn.Conn().Close(unlockCtx)
		return true, errors.Join(runErr, unavailable(fmt.Errorf("delivery unlock of %s: %w", environment, err)))
	}
	return true, runErr
}
