package executionports

import (
	"context"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/environments"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/background"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database"
)

// The delivery of member bindings to the Runtimes
// (docs/execution-ports.md#delivery-of-member-bindings).

// NewDeliveryStore returns the delivery store of the handle's engine.
func NewDeliveryStore(h *database.Handle) application.DeliveryStore {
	if h.Pool != nil {
		return pgstore.New(h.Pool)
	}
	return sqlitestore.New(h.DB)
}

func newDeliverer(store application.DeliveryStore, streams *application.Streams, owner application.MemberBindings, c clock.Clock, envs *environments.Set) *application.Deliverer {
	return application.NewDeliverer(store, streams, owner, c, envs.IDs())
}

// RunDelivery runs the deliverer for the process's lifetime: a full
// reconcile of every environment at start and every interval (≤ 0:
// application.DefaultDeliveryInterval) after the previous pass ended. A
// failed pass is logged and retried at the next one; nothing it did is
// lost (each delivery's bytes are stored before the append).
func RunDelivery(lc fx.Lifecycle, d *application.Deliverer, interval time.Duration, log *zap.Logger) {
	if interval <= 0 {
		interval = application.DefaultDeliveryInterval
	}
	background.Run(lc, "binding delivery", func(ctx context.Context) {
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			passes, err := d.ReconcileAll(ctx)
			if err != nil && ctx.Err() == nil {
				log.Warn("binding delivery pass failed; retrying at the next", zap.Error(err), zap.Duration("interval", interval))
			}
			for _, p := range passes {
				if p.Appended > 0 {
					log.Info("binding delivery appended commands", zap.String("environment", p.Environment), zap.Int("appended", p.Appended))
				}
			}
			timer.Reset(interval)
		}
	})
}
