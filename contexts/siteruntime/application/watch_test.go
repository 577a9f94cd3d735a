package application_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// memTerminal is an in-memory TerminalStates over a memRecords.
type memTerminal struct {
	records *memRecords
	mu      sync.Mutex
	states  map[string]domain.TerminalState
}

func (m *memTerminal) SaveTerminal(_ context.Context, ts domain.TerminalState) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := ts.AttemptID + "/" + ts.Kind + "/" + ts.Name + "/" + ts.UID
	if _, ok := m.states[k]; ok {
		return false, nil
	}
	m.states[k] = ts
	return true, nil
}

func (m *memTerminal) TerminalState(_ context.Context, attempt, kind, name, uid string) (domain.TerminalState, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts, ok := m.states[attempt+"/"+kind+"/"+name+"/"+uid]
	return ts, ok, nil
}

func (m *memTerminal) AllRecords(context.Context) ([]domain.NativeRecord, error) {
	m.records.mu.Lock()
	defer m.records.mu.Unlock()
	var out []domain.NativeRecord
	for _, r := range m.records.rows {
		out = append(out, r)
	}
	return out, nil
}

func (m *memTerminal) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.states)
}

// fakeWatches stands in for the API server's watch of Jobs: each
// namespace's watch is synced at once and a test sends finished Jobs to it.
type fakeWatches struct {
	mu      sync.Mutex
	started map[string]func(application.FinishedJob)
}

func (f *fakeWatches) WatchJobs(ctx context.Context, namespace string, synced func(), finished func(application.FinishedJob)) {
	f.mu.Lock()
	f.started[namespace] = finished
	f.mu.Unlock()
	synced()
	<-ctx.Done()
}

func (f *fakeWatches) send(t *testing.T, namespace string, job application.FinishedJob) {
	t.Helper()
	f.mu.Lock()
	finished := f.started[namespace]
	f.mu.Unlock()
	if finished == nil {
		t.Fatalf("namespace %s is not watched", namespace)
	}
	finished(job)
}

type noWatchEvents struct{}

func (noWatchEvents) TerminalRecorded(domain.TerminalState)           {}
func (noWatchEvents) TerminalNotRecorded(domain.TerminalState, error) {}

func watchedFixture(t *testing.T) (*batchFixture, *memTerminal, *fakeWatches, *application.JobWatcher) {
	t.Helper()
	f := newBatchFixture(t, time.Second)
	states := &memTerminal{records: f.records, states: map[string]domain.TerminalState{}}
	watches := &fakeWatches{started: map[string]func(application.FinishedJob){}}
	w := application.NewJobWatcher(watches, states, f.records, fixedClock{now}, noWatchEvents{}, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.Wait() })
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	exec := application.NewExecutor(batch.New(f.native, jsonSpecs{}, pinned{}).WithTerminalStates(states, w, fixedClock{now}),
		access, f.native, f.records, nil, application.ExecutorConfig{DeletionWait: time.Second})
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	return f, states, watches, w
}

// A Job that succeeded and was removed at once (a TTL of 0) before any
// observe: the watch, started for its namespace before the Job was
// created, recorded its terminal state, and observe — executed and
// recovered alike — reports succeeded with the recorded reason, times and
// exit code, saying the Job is gone. A finished Job the Runtime did not
// record (another UID under the name) is not recorded.
func TestAJobRemovedRightAfterItSucceededIsObservedSucceededSayingItIsGone(t *testing.T) {
	f, states, watches, _ := watchedFixture(t)
	f.prepared(t)
	job := f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false).NativeRefs[0]
	code := int32(0)
	obs := application.Observation{State: siteprotocol.StateSucceeded, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods",
		StartedAt: "2026-11-29T10:00:01Z", FinishedAt: "2026-11-29T10:00:05Z", ExitCode: &code}
	foreign := job
	foreign.UID = "someone-else"
	watches.send(t, namespace, application.FinishedJob{Ref: foreign, AttemptID: attempt, Observation: obs})
	if n := states.count(); n != 0 {
		t.Fatalf("a Job the Runtime did not record was recorded (%d)", n)
	}
	watches.send(t, namespace, application.FinishedJob{Ref: job, AttemptID: attempt, Observation: obs})
	delete(f.native.objects, key(job.Kind, job.Namespace, job.Name))

	p := f.cmd(t, siteprotocol.OpObserve, nil)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	d, _ := siteprotocol.DecodeDetail[siteprotocol.ObserveDetail](r)
	if d.State != siteprotocol.StateSucceeded || d.Reason != obs.Reason || d.StartedAt != obs.StartedAt || d.FinishedAt != obs.FinishedAt ||
		d.ExitCode == nil || *d.ExitCode != 0 || !strings.Contains(r.Message, "is gone") {
		t.Fatalf("observe of the removed Job: %s %s", r.Message, r.Detail)
	}
	if again := f.run(t, p, true); mustJSON(again) != mustJSON(r) {
		t.Fatalf("recovered observe %s; executed %s", mustJSON(again), mustJSON(r))
	}
}

// A Job removed before any terminal state was recorded (the Runtime was
// down) stays failed / native-missing; a terminal state observe read from
// the live Job is recorded too and reported once the Job is gone.
func TestAJobGoneWithoutARecordedStateIsNativeMissingAndObserveRecordsWhatItReads(t *testing.T) {
	f, states, _, _ := watchedFixture(t)
	f.prepared(t)
	job := f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false).NativeRefs[0]
	f.native.observation = application.Observation{State: siteprotocol.StateRunning}
	f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	if states.count() != 0 {
		t.Fatal("a running Job's state was recorded")
	}
	saved := f.native.objects[key(job.Kind, job.Namespace, job.Name)]
	delete(f.native.objects, key(job.Kind, job.Namespace, job.Name))
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)

	f.native.objects[key(job.Kind, job.Namespace, job.Name)] = saved
	f.native.observation = application.Observation{State: siteprotocol.StateFailed, Reason: "BackoffLimitExceeded"}
	f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	delete(f.native.objects, key(job.Kind, job.Namespace, job.Name))
	r := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	if d, _ := siteprotocol.DecodeDetail[siteprotocol.ObserveDetail](r); d.State != siteprotocol.StateFailed || d.Reason != "BackoffLimitExceeded" {
		t.Fatalf("observe of the removed failed Job: %s", r.Detail)
	}
}
