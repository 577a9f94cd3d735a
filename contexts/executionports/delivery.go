package executionports

import (
	"context"
	"sort"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

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

func newDeliverer(store application.DeliveryStore, streams *application.Streams, owner application.MemberBindings, c clock.Clock) *application.Deliverer {
	return application.NewDeliverer(store, streams, owner, c)
}

// DeliverySchedule is when binding delivery runs its passes.
type DeliverySchedule struct {
	// Interval is the period of the full reconcile (≤ 0:
	// application.DefaultDeliveryInterval).
	Interval time.Duration
	// FeedInterval is how often the change feed is read when the last read
	// was not a full page (≤ 0: application.DefaultFeedInterval).
	FeedInterval time.Duration
}

// RunDelivery runs the deliverer for the process's lifetime
// (docs/execution-ports.md#following-the-change-feed): a full reconcile of
// every environment at start and every Interval after the previous one
// ended, and in between it follows feed, running a pass of an environment
// as soon as a member-binding change of it is read. An environment whose
// pass was skipped (another deliverer held its lock) is passed again at the
// next feed read; a failed pass is logged and left to the full reconcile.
// A feed that cannot be read is read again from its head once it answers,
// with a pass of every environment, since changes may have been missed;
// the full reconcile delivers meanwhile. The cursor is kept in memory
// only: the full reconcile at start covers a restart. Nothing a failed pass
// did is lost (each delivery's bytes are stored before the append).
func RunDelivery(lc fx.Lifecycle, d *application.Deliverer, feed application.BindingFeed, sched DeliverySchedule, log *zap.Logger) {
	if sched.Interval <= 0 {
		sched.Interval = application.DefaultDeliveryInterval
	}
	if sched.FeedInterval <= 0 {
		sched.FeedInterval = application.DefaultFeedInterval
	}
	background.Run(lc, "binding delivery", func(ctx context.Context) {
		f := &follower{d: d, feed: feed, log: log, pending: map[string]bool{}}
		f.cursor, f.feedErr = feed.FeedHead(ctx) // before the first full reconcile
		if f.feedErr != nil && ctx.Err() == nil {
			log.Warn("binding delivery cannot read the change feed's head; the full reconcile delivers meanwhile", zap.Error(f.feedErr))
		}
		full := time.NewTimer(0)
		defer full.Stop()
		poll := time.NewTimer(sched.FeedInterval)
		defer poll.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-full.C:
				f.passAll(ctx, sched.Interval)
				full.Reset(sched.Interval)
			case <-poll.C:
				more := f.follow(ctx)
				next := sched.FeedInterval
				if more {
					next = 0
				}
				poll.Reset(next)
			}
		}
	})
}

// follower follows the change feed for one RunDelivery; it is used by one
// goroutine only.
type follower struct {
	d       *application.Deliverer
	feed    application.BindingFeed
	log     *zap.Logger
	cursor  string
	feedErr error
	// pending are the environments with a change read and no pass run
	// since.
	pending map[string]bool
}

// passAll runs the full reconcile: a pass of every environment.
func (f *follower) passAll(ctx context.Context, interval time.Duration) {
	for _, env := range f.d.Environments() {
		f.pass(ctx, env, zap.Duration("interval", interval))
	}
}

// pass runs one pass of env; env stays pending only when the pass was
// skipped (another deliverer held its lock, perhaps reading the bindings
// before the change). A failed pass is left to the full reconcile, so a
// lasting failure is not retried at every feed read.
func (f *follower) pass(ctx context.Context, env string, fields ...zap.Field) {
	p, err := f.d.Reconcile(ctx, env)
	if err != nil && ctx.Err() == nil {
		f.log.Warn("binding delivery pass failed; the full reconcile retries it", append([]zap.Field{zap.String("environment", env), zap.Error(err)}, fields...)...)
	}
	if err != nil || !p.Skipped {
		delete(f.pending, env)
	}
	if p.Appended > 0 {
		f.log.Info("binding delivery appended commands", zap.String("environment", env), zap.Int("appended", p.Appended))
	}
}

// follow reads the feed once and passes the environments with changes (and
// those still pending); true when the page was full and more is to read.
func (f *follower) follow(ctx context.Context) bool {
	if f.cursor == "" {
		head, err := f.feed.FeedHead(ctx)
		if err != nil {
			f.feedFailed(ctx, err)
			return false
		}
		// Changes made while the feed was unreadable were not read: pass
		// every environment once from the new head.
		f.cursor = head
		for _, env := range f.d.Environments() {
			f.pending[env] = true
		}
	}
	page, err := f.feed.BindingChanges(ctx, f.cursor)
	if err != nil {
		f.cursor = "" // read again from the head, with a pass of every environment
		f.feedFailed(ctx, err)
		return false
	}
	if f.feedErr != nil {
		f.log.Info("binding delivery reads the change feed again")
		f.feedErr = nil
	}
	f.cursor = page.Next
	for _, c := range page.Changes {
		if f.d.Delivers(c.Environment) {
			f.pending[c.Environment] = true
		}
	}
	envs := make([]string, 0, len(f.pending))
	for env := range f.pending {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		f.pass(ctx, env)
	}
	return page.More
}

// feedFailed logs the first of consecutive feed failures.
func (f *follower) feedFailed(ctx context.Context, err error) {
	if f.feedErr == nil && ctx.Err() == nil {
		f.log.Warn("binding delivery cannot read the change feed; the full reconcile delivers meanwhile", zap.Error(err))
	}
	f.feedErr = err
}
