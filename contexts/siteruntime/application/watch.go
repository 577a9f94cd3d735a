package application

import (
	"context"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// TerminalStates is the record of terminal states of the objects the
// Runtime created (jobs.sqlite, table terminal_states;
// docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).
type TerminalStates interface {
	// SaveTerminal records ts in one durable commit unless a state of the
	// same object (attempt, kind, name, UID) is recorded: the first one is
	// kept and saved is false.
	SaveTerminal(ctx context.Context, ts domain.TerminalState) (saved bool, err error)
	// TerminalState returns the recorded state of the object; found is
	// false when none is recorded.
	TerminalState(ctx context.Context, attemptID, kind, name, uid string) (ts domain.TerminalState, found bool, err error)
	// AllRecords returns every native record of the file, so the watch
	// knows which objects the Runtime created.
	AllRecords(ctx context.Context) ([]domain.NativeRecord, error)
}

// FinishedJob is a Job the watch saw finished: its reference, its
// Attempt (from its identity label) and its observation then.
type FinishedJob struct {
	Ref         siteprotocol.NativeRef
	AttemptID   string
	Observation Observation
}

// JobWatches watches the Jobs the Runtime created in a namespace.
type JobWatches interface {
	// WatchJobs watches the Jobs of namespace carrying the Runtime's
	// identity labels until ctx ends (it returns then). synced is called
	// once, when the first list is done; finished with every Job whose
	// Complete or Failed condition the watch sees — in that list and in
	// every later change, a deleted Job's last state included — once per
	// Job and watch.
	WatchJobs(ctx context.Context, namespace string, synced func(), finished func(FinishedJob))
}

// WatchEvents receives what the watch does, for logs.
type WatchEvents interface {
	// TerminalRecorded reports a terminal state the watch recorded.
	TerminalRecorded(ts domain.TerminalState)
	// TerminalNotRecorded reports a terminal state the watch could not
	// record (err), or a namespace whose watch did not finish its first
	// list within the bound (ts zero, err says so).
	TerminalNotRecorded(ts domain.TerminalState, err error)
}

// DefaultWatchSyncWait bounds how long a start waits for its namespace's
// watch to finish its first list before it creates the Job anyway.
const DefaultWatchSyncWait = 30 * time.Second

// JobWatcher is the Runtime's watch of the Jobs it created
// (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone): while the
// Runtime runs it watches every namespace holding a Job it recorded and
// records each such Job's terminal state (succeeded or failed, with the
// reason, message, times and exit code observe would report) in
// jobs.sqlite the moment the watch sees it. Recording is a fact of the
// object, never a decision: it advances no Run and sends nothing; observe
// reports the recorded state once the Job is gone. A Job removed while the
// Runtime was not running, before the watch saw it finished, has no
// recorded state (observe: native-missing).
type JobWatcher struct {
	watches  JobWatches
	states   TerminalStates
	records  BatchRecords
	clock    Clock
	events   WatchEvents
	syncWait time.Duration

	mu      sync.Mutex
	ctx     context.Context // Start's context; nil until Start
	watched map[string]chan struct{}
	running sync.WaitGroup
}

// NewJobWatcher returns the watch; syncWait 0 is DefaultWatchSyncWait.
func NewJobWatcher(watches JobWatches, states TerminalStates, records BatchRecords, clock Clock, events WatchEvents, syncWait time.Duration) *JobWatcher {
	if syncWait <= 0 {
		syncWait = DefaultWatchSyncWait
	}
	return &JobWatcher{watches: watches, states: states, records: records, clock: clock, events: events, syncWait: syncWait, watched: map[string]chan struct{}{}}
}

// Start starts the watch of the namespace of every recorded Job that is not
// removed; the watches, and those Ensure adds, run until ctx ends (Wait
// waits for them). It fails only when the records cannot be read.
func (w *JobWatcher) Start(ctx context.Context) error {
	recs, err := w.states.AllRecords(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	for _, r := range recs {
		if r.Kind == domain.KindJob && r.UID != "" && r.Phase != domain.PhaseRemoved {
			w.watch(r.Namespace)
		}
	}
	return nil
}

// Wait waits until every watch has returned (after Start's context ended).
func (w *JobWatcher) Wait() { w.running.Wait() }

// Ensure starts the watch of namespace when none runs and waits until its
// first list is done, at most the sync bound (then it reports that the
// watch is not ready and returns: the start goes on) or until ctx ends.
// Before Start it does nothing: Start watches every recorded Job's namespace.
func (w *JobWatcher) Ensure(ctx context.Context, namespace string) {
	synced := w.watch(namespace)
	if synced == nil {
		return
	}
	t := time.NewTimer(w.syncWait)
	defer t.Stop()
	select {
	case <-synced:
	case <-ctx.Done():
	case <-t.C:
		w.events.TerminalNotRecorded(domain.TerminalState{Namespace: namespace},
			errWatchNotSynced{namespace: namespace, wait: w.syncWait})
	}
}

type errWatchNotSynced struct {
	namespace string
	wait      time.Duration
}

func (e errWatchNotSynced) Error() string {
	return "the watch of Jobs in namespace " + e.namespace + " has not listed them after " + e.wait.String() + "; the Job is created, and its terminal state is recorded once the watch lists it"
}

// watch starts namespace's watch once and returns the channel closed when
// its first list is done; nil before Start.
func (w *JobWatcher) watch(namespace string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		return nil
	}
	if ch, ok := w.watched[namespace]; ok {
		return ch
	}
	ch := make(chan struct{})
	w.watched[namespace] = ch
	ctx := w.ctx
	var once sync.Once
	w.running.Add(1)
	go func() {
		defer w.running.Done()
		w.watches.WatchJobs(ctx, namespace, func() { once.Do(func() { close(ch) }) }, func(f FinishedJob) { w.finished(ctx, f) })
	}()
	return ch
}

// finished records f's terminal state when the Job is one the Runtime
// recorded (same Attempt, name and UID); any other Job is ignored.
func (w *JobWatcher) finished(ctx context.Context, f FinishedJob) {
	if f.Observation.State != siteprotocol.StateSucceeded && f.Observation.State != siteprotocol.StateFailed {
		return
	}
	recs, err := w.records.Records(ctx, f.AttemptID)
	ts := TerminalOf(f.AttemptID, f.Ref, f.Observation, w.clock.Now())
	if err != nil {
		w.events.TerminalNotRecorded(ts, err)
		return
	}
	rec := domain.FindRecord(recs, domain.KindJob)
	if rec == nil || rec.UID != f.Ref.UID || rec.Name != f.Ref.Name || rec.Namespace != f.Ref.Namespace {
		return
	}
	saved, err := w.states.SaveTerminal(ctx, ts)
	switch {
	case err != nil:
		w.events.TerminalNotRecorded(ts, err)
	case saved:
		w.events.TerminalRecorded(ts)
	}
}

// TerminalOf is the terminal state of the object ref of attemptID as obs
// reports it, seen at now.
func TerminalOf(attemptID string, ref siteprotocol.NativeRef, obs Observation, now time.Time) domain.TerminalState {
	return domain.TerminalState{
		AttemptID: attemptID, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID,
		State: string(obs.State), Reason: obs.Reason, Message: obs.Message, StartedAt: obs.StartedAt, FinishedAt: obs.FinishedAt,
		ExitCode: obs.ExitCode, ObservedAt: now.UTC().Truncate(time.Second),
	}
}
