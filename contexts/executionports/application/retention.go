package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Where read results live (docs/execution-ports.md#read-results-retention).

const (
	// DefaultReadResultRetention is how long the content of a read's
	// result is kept after its acknowledgement (--read-result-retention).
	DefaultReadResultRetention = time.Hour
	// MaxReadResultSweepInterval bounds the period of the retention sweep:
	// a read result's content is dropped at most about this long after its
	// retention ended (less when the retention itself is shorter).
	MaxReadResultSweepInterval = time.Minute
	// ReadResultSweepBatch is how many results one statement of the sweep
	// expires; the sweep repeats it until fewer are left.
	ReadResultSweepBatch = 256
)

// ReadResultSweepInterval is the sweep period for retention: the
// retention itself when shorter than MaxReadResultSweepInterval (at least
// one second), else MaxReadResultSweepInterval.
func ReadResultSweepInterval(retention time.Duration) time.Duration {
	return max(min(retention, MaxReadResultSweepInterval), time.Second)
}

// ReadResultRetention drops the content of read results (read-logs,
// read-file, proxy: siteprotocol.ReadOperations) once their retention
// after acknowledgement has passed; their digests stay, so an exact replay
// of the same result is still answered as before (domain.DecideAcknowledgement
// compares digests) and GET …/commands/{id} says the content expired
// (docs/execution-ports.md#read-results-retention).
type ReadResultRetention struct {
	store     StreamStore
	clock     Clock
	retention time.Duration
}

// NewReadResultRetention returns the sweep for retention (≤ 0 means
// DefaultReadResultRetention), reading the time from clock.
func NewReadResultRetention(store StreamStore, clock Clock, retention time.Duration) *ReadResultRetention {
	if retention <= 0 {
		retention = DefaultReadResultRetention
	}
	return &ReadResultRetention{store: store, clock: clock, retention: retention}
}

// Retention is the configured retention.
func (r *ReadResultRetention) Retention() time.Duration { return r.retention }

// Sweep drops the content of every read result acknowledged at or before
// the clock's now minus the retention, in batches of ReadResultSweepBatch,
// and returns how many it dropped. It stops at the first store error
// (wrapping ErrUnavailable when the database cannot be reached) or when
// ctx ends, returning what it dropped so far; the next sweep goes on.
func (r *ReadResultRetention) Sweep(ctx context.Context) (int, error) {
	return ExpireReadResults(ctx, r.store, r.clock.Now(), r.retention)
}

// ExpireReadResults drops, as of now, the content of every read result
// acknowledged at or before now − retention (retention ≥ 0), in batches of
// ReadResultSweepBatch, and returns how many it dropped. Errors are the
// store's, or ctx's when it ended.
func ExpireReadResults(ctx context.Context, store StreamStore, now time.Time, retention time.Duration) (int, error) {
	if retention < 0 {
		return 0, errors.New("expire read results: the retention must not be negative")
	}
	before := now.Add(-retention)
	total := 0
	for _, op := range siteprotocol.ReadOperations() {
		for {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			n, err := store.ExpireResults(ctx, string(op), before, now, ReadResultSweepBatch)
			total += n
			if err != nil {
				return total, fmt.Errorf("expire %s results acknowledged by %s: %w", op, before.UTC().Format(time.RFC3339Nano), err)
			}
			if n < ReadResultSweepBatch {
				break
			}
		}
	}
	return total, nil
}
