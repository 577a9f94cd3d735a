package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore/pgdb"
)

// The change feed's sequencer (docs/resource-provisioning.md#the-change-feeds-ordering).
//
// A material change writes its AllocationChanged outbox row in its own
// transaction, without a feed position. After that transaction commits, a
// sequencer run gives every committed unpositioned row the next positions in
// insertion (seq) order, in a short transaction of its own under a
// transaction-level advisory lock, so one run holds the positions at a time
// across all processes. Positions therefore follow the commit order of the
// runs: a reader of "position > cursor" never sees a position before every
// smaller one is readable, and a change whose transaction commits late gets
// a later position instead of being skipped. Material transactions commit in
// parallel (PostgreSQL group-commits them); only runs are serialised, and
// each run positions every change committed before it started.
//
// Within a process, runs are grouped: a report waits for one run that
// started after its commit; the reports that commit while a run is going on
// share the next one (groupRunner), so a process has at most one run
// waiting for the advisory lock. A change left unpositioned because the
// database failed between the two transactions is positioned by the next
// run (the next material change in any process, or the module's sweeper).

// SequencerLockKey is the transaction advisory lock a run holds (one per
// database; each context has its own database).
const SequencerLockKey int64 = 764_001

// runTimeout bounds one run, which serves every report waiting for it
// whatever their own deadlines.
const runTimeout = 30 * time.Second

// PositionChanges runs the sequencer once (grouped with any run this
// process is about to make) and returns how many changes that run
// positioned. It is safe to call from any number of goroutines and
// processes.
func (s *Store) PositionChanges(ctx context.Context) (int64, error) {
	return s.seq.await(func() (int64, error) { return s.positionChanges(ctx) })
}

// positionChanges is one run.
func (s *Store) positionChanges(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runTimeout)
	defer cancel()
	pending, err := s.q.HasUnpositionedChanges(ctx)
	if err != nil || !pending {
		return 0, dbErr("look for unpositioned changes", err)
	}
	var n int64
	err = s.inTx(ctx, func(ctx context.Context, q *pgdb.Queries) error {
		if err := q.LockSequencer(ctx, SequencerLockKey); err != nil {
			return dbErr("lock sequencer", err)
		}
		var err error
		n, err = q.PositionChanges(ctx)
		return dbErr("position changes", err)
	})
	return n, err
}

// groupRunner runs a function on behalf of many callers: await returns the
// result of a run that started after await was called, starting one when
// none is going on, or waiting for the one going on to end and then for
// the next.
type groupRunner struct {
	mu       sync.Mutex
	cond     *sync.Cond
	running  bool
	started  uint64 // runs started
	finished uint64 // the newest finished run
	n        int64  // its result
	err      error
}

func newGroupRunner() *groupRunner {
	g := &groupRunner{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *groupRunner) await(run func() (int64, error)) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	need := g.started + 1
	for g.finished < need {
		if !g.running {
			g.running = true
			g.started++
			mine := g.started
			g.mu.Unlock()
			n, err := run()
			g.mu.Lock()
			g.running, g.finished, g.n, g.err = false, mine, n, err
			g.cond.Broadcast()
			return n, err
		}
		g.cond.Wait()
	}
	return g.n, g.err
}
