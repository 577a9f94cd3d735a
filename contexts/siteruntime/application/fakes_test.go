package application_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

const (
	env       = "alpha-k8s"
	authority = "https://site.example"
	install   = "11111111-1111-4111-8111-111111111111"
	member    = "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80"
	project   = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"
)

func binding() domain.Binding {
	return domain.Binding{Environment: env, Authority: authority, InstallationID: install}
}

// uuidN returns a distinct lower-case UUID for n.
func uuidN(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n) }

// command builds a valid command of op (its JSON as Execution appends it).
func command(t *testing.T, n int, op siteprotocol.Operation, family siteprotocol.Family, payload any) []byte {
	t.Helper()
	c := map[string]any{
		"id": uuidN(n), "operation": op, "issued_at": "2026-11-29T10:00:00Z",
		"member_id": member, "project_id": project,
	}
	if family != "" {
		c["family"] = family
		c["run_id"] = uuidN(1000 + n)
		c["attempt_id"] = uuidN(2000 + n)
		c["account_ref"] = map[string]any{"binding_id": uuidN(3000), "generation": 1}
	}
	if payload != nil {
		c["payload"] = payload
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func observe(t *testing.T, n int) []byte {
	return command(t, n, siteprotocol.OpObserve, siteprotocol.FamilyBatch, nil)
}

// fakeSite is an in-memory model of the Site protocol's server side
// (docs/site-protocol.md#acknowledgement-and-exact-replay): it stands in for the
// execution role in unit tests.
type fakeSite struct {
	mu       sync.Mutex
	env      string
	auth     string
	install  string
	backend  siteprotocol.Backend // the stream state's backend ("" as a server that predates it)
	stored   [][]byte             // stored[i] is command i+1 as served
	acked    int64
	results  map[int64][]byte
	puts     [][]byte
	pulls    int
	peeks    int
	failNext []error // errors returned by the next calls, in order
	// answerBytes, when set, is the most command bytes one answer may
	// carry before the client refuses it as oversized: it models a server
	// without the pull byte budget behind the client's bound.
	answerBytes int
	dropAck     int   // the next dropAck PUTs are recorded but answered with a transient error
	ackShift    int64 // added to acknowledged_sequence in answers (a broken server)
	// stops are the stop reports received; stopErr answers them.
	stops   []siteprotocol.StopReport
	stopErr error
}

func (s *fakeSite) ReportStop(_ context.Context, r siteprotocol.StopReport) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, r)
	return s.stopErr
}

func (s *fakeSite) stopReports() []siteprotocol.StopReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]siteprotocol.StopReport(nil), s.stops...)
}

func newFakeSite() *fakeSite {
	return &fakeSite{env: env, auth: authority, results: map[int64][]byte{}}
}

func (s *fakeSite) appendCommands(t *testing.T, cmds ...[]byte) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, raw := range cmds {
		c, canonical, err := siteprotocol.ParseAppend(raw)
		if err != nil {
			t.Fatal(err)
		}
		served, err := siteprotocol.EncodeStored(canonical, int64(len(s.stored)+1), c.Digest)
		if err != nil {
			t.Fatal(err)
		}
		s.stored = append(s.stored, served)
	}
}

func (s *fakeSite) popFailure() error {
	if len(s.failNext) == 0 {
		return nil
	}
	err := s.failNext[0]
	s.failNext = s.failNext[1:]
	return err
}

func (s *fakeSite) StreamState(context.Context) (siteprotocol.StreamState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.popFailure(); err != nil {
		return siteprotocol.StreamState{}, err
	}
	return siteprotocol.StreamState{Environment: s.env, Authority: s.auth, Backend: s.backend, AcknowledgedSequence: s.acked,
		HeadSequence: int64(len(s.stored)), InstallationID: s.install}, nil
}

func (s *fakeSite) Pull(ctx context.Context, after int64, limit int, wait time.Duration) (siteprotocol.Pull, error) {
	s.mu.Lock()
	s.pulls++
	if err := s.popFailure(); err != nil {
		s.mu.Unlock()
		return siteprotocol.Pull{}, err
	}
	p, err := s.answer(after, limit)
	s.mu.Unlock()
	if err != nil {
		return siteprotocol.Pull{}, err
	}
	out := p.Commands
	if len(out) == 0 && wait > 0 {
		// An idle long poll: yield briefly so tests waiting on a
		// condition can observe the idle worker.
		select {
		case <-ctx.Done():
			return siteprotocol.Pull{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return p, nil
}

// answer returns the commands after after, at most limit; s.mu is held.
func (s *fakeSite) answer(after int64, limit int) (siteprotocol.Pull, error) {
	var out []json.RawMessage
	size := 0
	for i := after; i < int64(len(s.stored)) && len(out) < limit; i++ {
		out = append(out, s.stored[i])
		size += len(s.stored[i])
	}
	if s.answerBytes > 0 && size > s.answerBytes {
		return siteprotocol.Pull{}, fmt.Errorf("%w: %d command bytes", application.ErrOversizedAnswer, size)
	}
	return siteprotocol.Pull{Commands: out, HeadSequence: int64(len(s.stored)), AcknowledgedSequence: s.acked}, nil
}

// Peek is the read-only pull: it binds nothing and never waits.
func (s *fakeSite) Peek(_ context.Context, after int64, limit int) (siteprotocol.Pull, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peeks++
	if err := s.popFailure(); err != nil {
		return siteprotocol.Pull{}, err
	}
	return s.answer(after, limit)
}

func (s *fakeSite) SendResult(_ context.Context, seq int64, result []byte) (siteprotocol.Acknowledgement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.popFailure(); err != nil {
		return siteprotocol.Acknowledgement{}, err
	}
	s.puts = append(s.puts, append([]byte(nil), result...))
	r, err := siteprotocol.ParseResult(result)
	if err != nil {
		return siteprotocol.Acknowledgement{}, &application.Problem{Status: 422, Reason: siteprotocol.ProblemInvalidResult, Detail: err.Error()}
	}
	switch {
	case seq <= s.acked:
		if prev := s.results[seq]; siteprotocol.Digest(prev) != siteprotocol.Digest(result) {
			return siteprotocol.Acknowledgement{}, &application.Problem{Status: 409, Reason: siteprotocol.ProblemResultConflict, Detail: "another result is recorded"}
		}
	case seq == s.acked+1:
		c, _ := siteprotocol.ParsePulled(s.stored[seq-1])
		if r.CommandID != c.ID || r.CommandDigest != c.Digest || r.Sequence != seq {
			return siteprotocol.Acknowledgement{}, &application.Problem{Status: 409, Reason: siteprotocol.ProblemIdentityMismatch, Detail: "not the stored command"}
		}
		s.results[seq] = append([]byte(nil), result...)
		s.acked = seq
	default:
		return siteprotocol.Acknowledgement{}, &application.Problem{Status: 409, Reason: siteprotocol.ProblemOutOfOrder, Detail: "not next"}
	}
	if s.dropAck > 0 {
		s.dropAck--
		return siteprotocol.Acknowledgement{}, fmt.Errorf("%w: connection reset after the server committed", application.ErrTransient)
	}
	return siteprotocol.Acknowledgement{AcknowledgedSequence: seq + s.ackShift, ResultDigest: r.Digest}, nil
}

func (s *fakeSite) state() (acked int64, puts [][]byte, results map[int64][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := map[int64][]byte{}
	for k, v := range s.results {
		res[k] = v
	}
	return s.acked, append([][]byte(nil), s.puts...), res
}

// fakeJournal is an in-memory RuntimeJournal that counts its commits.
type fakeJournal struct {
	mu        sync.Mutex
	cp        domain.Checkpoint
	commits   int
	integrity error // returned by every write when set
	fail      []error
	sealed    bool
	// onSave sees every pending command saved (commit #1).
	onSave func(domain.Pending)
}

func newFakeJournal() *fakeJournal {
	return &fakeJournal{cp: domain.Checkpoint{Binding: binding()}}
}

func (j *fakeJournal) Restore(context.Context) (domain.Checkpoint, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cp := j.cp
	if cp.Pending != nil {
		p := *cp.Pending
		cp.Pending = &p
	}
	return cp, nil
}

func (j *fakeJournal) write(f func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.integrity != nil {
		return j.integrity
	}
	if len(j.fail) > 0 {
		err := j.fail[0]
		j.fail = j.fail[1:]
		return err
	}
	if err := f(); err != nil {
		return err
	}
	j.commits++
	return nil
}

func (j *fakeJournal) SavePending(_ context.Context, p domain.Pending, prior *domain.Acknowledgement) error {
	return j.write(func() error {
		if prior != nil {
			if j.cp.Pending == nil || j.cp.Pending.Sequence != prior.Sequence || j.cp.Pending.ResultDigest != prior.ResultDigest {
				return fmt.Errorf("%w: folded acknowledgement %d does not match", application.ErrJournalIntegrity, prior.Sequence)
			}
			j.cp.Acknowledged, j.cp.Pending = prior.Sequence, nil
		}
		if j.cp.Pending != nil {
			return fmt.Errorf("%w: pending %d exists", application.ErrJournalIntegrity, j.cp.Pending.Sequence)
		}
		j.cp.Pending = &p
		if j.onSave != nil {
			j.onSave(p)
		}
		return nil
	})
}

func (j *fakeJournal) SaveResult(_ context.Context, seq int64, result []byte, digest string) error {
	return j.write(func() error {
		if j.cp.Pending == nil || j.cp.Pending.Sequence != seq {
			return fmt.Errorf("%w: no pending %d", application.ErrJournalIntegrity, seq)
		}
		p := *j.cp.Pending
		p.Result, p.ResultDigest = result, digest
		j.cp.Pending = &p
		return nil
	})
}

func (j *fakeJournal) Acknowledge(_ context.Context, ack domain.Acknowledgement) error {
	return j.write(func() error {
		if j.cp.Pending == nil || j.cp.Pending.Sequence != ack.Sequence || j.cp.Pending.ResultDigest != ack.ResultDigest {
			return fmt.Errorf("%w: acknowledgement %d does not match", application.ErrJournalIntegrity, ack.Sequence)
		}
		j.cp.Acknowledged, j.cp.Pending = ack.Sequence, nil
		return nil
	})
}

func (j *fakeJournal) Seal() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sealed = true
	j.integrity = fmt.Errorf("sealed")
	return nil
}

func (j *fakeJournal) snapshot() (domain.Checkpoint, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cp, j.commits
}

// effectExecutor stands in for a native system: Execute records an effect
// unconditionally; Recover looks for the effect before acting.
type effectExecutor struct {
	mu         sync.Mutex
	effects    map[string]int // command ID -> times performed
	executes   int
	recovers   int
	failExec   error  // returned once by Execute, after performing the effect
	recoverErr error  // returned by every Recover when set
	note       string // every answer's Note
	// during, when set, runs at the start of every Execute and Recover,
	// with the command's context (a native wait).
	during func(ctx context.Context, cmd siteprotocol.Command)
}

func newEffectExecutor() *effectExecutor { return &effectExecutor{effects: map[string]int{}} }

func (e *effectExecutor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	if e.during != nil {
		e.during(ctx, cmd)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.executes++
	e.effects[cmd.ID]++
	if err := e.failExec; err != nil {
		e.failExec = nil
		return domain.Answer{}, err
	}
	return e.answer(cmd), nil
}

func (e *effectExecutor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	if e.during != nil {
		e.during(ctx, cmd)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recovers++
	if e.recoverErr != nil {
		return domain.Answer{}, e.recoverErr
	}
	if e.effects[cmd.ID] == 0 {
		e.effects[cmd.ID]++
	}
	return e.answer(cmd), nil
}

func (e *effectExecutor) answer(cmd siteprotocol.Command) domain.Answer {
	a := domain.Succeeded(siteprotocol.ReasonObserved, "observed "+cmd.AttemptID, siteprotocol.ObserveDetail{State: siteprotocol.StateRunning})
	a.Note = e.note
	return a
}

func (e *effectExecutor) counts() (executes, recovers int, effects map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]int{}
	for k, v := range e.effects {
		m[k] = v
	}
	return e.executes, e.recovers, m
}

// fakeHeart records beats, the stop and the credential refusals.
type fakeHeart struct {
	mu      sync.Mutex
	beats   int
	stopped domain.StopReason
	fail    error // returned by every Beat when set (an unwritable file)
	// refusal is the cause of the last Refused call; runs counts the
	// runs of refusals begun.
	refusal   string
	runs      int
	lastCause string
	// busy is every command recorded by Busy (nil: between commands), in
	// order.
	busy []*application.Work
}

func (h *fakeHeart) Busy(_ context.Context, w *application.Work) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w != nil {
		c := *w
		w = &c
	}
	h.busy = append(h.busy, w)
	return nil
}

// busyRecords returns what Busy recorded.
func (h *fakeHeart) busyRecords() []*application.Work {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*application.Work(nil), h.busy...)
}

func (h *fakeHeart) Refused(_ context.Context, cause string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cause != "" && h.refusal == "" {
		h.runs++
	}
	if cause != "" {
		h.lastCause = cause
	}
	h.refusal = cause
	return nil
}

func (h *fakeHeart) refused() (cause string, runs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refusal, h.runs
}

func (h *fakeHeart) Beat(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return h.fail
	}
	if h.stopped == "" {
		h.beats++
	}
	return nil
}

func (h *fakeHeart) Stopped(_ context.Context, r domain.StopReason, _ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = r
	return nil
}

func (h *fakeHeart) get() (int, domain.StopReason) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beats, h.stopped
}

// fakeEvents records delivered sequences and retries.
type fakeEvents struct {
	mu          sync.Mutex
	stopReports []stopReportEvent
	delivered   []int64
	deliveries  []application.Delivery
	replayed    []int64
	recovered   []int64
	retries     []string
	ended       []string
	outcomes    []application.SiteOutcome
	head        int64
	pending     int64
	shutdown    *domain.Checkpoint
	stop        *domain.StopError
	beatFails   int
	// waits lists the long waits logged and their ends, in order: "long
	// <what>" and "ended <what>: <result>".
	waits []string
}

func (e *fakeEvents) LongWait(w application.Work) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waits = append(e.waits, "long "+w.Wait.What)
}

func (e *fakeEvents) LongWaitEnded(w application.Work, result string, _ time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waits = append(e.waits, "ended "+w.Wait.What+": "+result)
}

func (e *fakeEvents) loggedWaits() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.waits...)
}

func (e *fakeEvents) ShutDown(cp domain.Checkpoint) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown = &cp
}

func (e *fakeEvents) RetryEnded(step string, _ int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, step)
}

func (e *fakeEvents) SiteAnswered(o application.SiteOutcome) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outcomes = append(e.outcomes, o)
}

func (e *fakeEvents) StreamHead(seq int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.head = seq
}

func (e *fakeEvents) Pending(seq int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = seq
}

func (e *fakeEvents) HeartbeatFailed(error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.beatFails++
}

func (e *fakeEvents) heartbeatFailures() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.beatFails
}

func (e *fakeEvents) Started(domain.Checkpoint) {}
func (e *fakeEvents) Stopped(s *domain.StopError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stop = s
}
func (e *fakeEvents) StopReported(reason domain.StopReason, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopReports = append(e.stopReports, stopReportEvent{reason: reason, err: err, afterStopped: e.stop != nil})
}

// stopReportEvent is one StopReported call: afterStopped says whether
// Stopped had been reported before it.
type stopReportEvent struct {
	reason       domain.StopReason
	err          error
	afterStopped bool
}

func (e *fakeEvents) Retrying(step string, _ int, _ error, _ time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.retries = append(e.retries, step)
}
func (e *fakeEvents) Delivered(d application.Delivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivered = append(e.delivered, d.Sequence)
	e.deliveries = append(e.deliveries, d)
	e.pending = 0
	switch d.Path {
	case application.PathReplayed:
		e.replayed = append(e.replayed, d.Sequence)
	case application.PathRecovered:
		e.recovered = append(e.recovered, d.Sequence)
	}
}

func (e *fakeEvents) get() (delivered, replayed, recovered []int64, retries []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int64(nil), e.delivered...), append([]int64(nil), e.replayed...), append([]int64(nil), e.recovered...), append([]string(nil), e.retries...)
}

// harness wires a worker to the fakes.
type harness struct {
	site    *fakeSite
	journal *fakeJournal
	exec    *effectExecutor
	heart   *fakeHeart
	events  *fakeEvents
	cfg     application.WorkerConfig
}

func newHarness() *harness {
	return &harness{
		site: newFakeSite(), journal: newFakeJournal(), exec: newEffectExecutor(),
		heart: &fakeHeart{}, events: &fakeEvents{},
		cfg: application.WorkerConfig{Environment: env, Authority: authority, PullWait: time.Second,
			BackoffInitial: time.Millisecond, BackoffMax: 4 * time.Millisecond},
	}
}

// start runs a worker until stop is called; stop returns Run's error.
func (h *harness) start(t *testing.T) (stop func() error) {
	t.Helper()
	reg, err := application.NewRegistry(application.Registration{Operation: siteprotocol.OpObserve, Family: siteprotocol.FamilyBatch, Executor: h.exec})
	if err != nil {
		t.Fatal(err)
	}
	w := application.NewWorker(h.cfg, h.site, h.journal, reg, h.heart, nil, h.events)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("worker did not return after cancel")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// runUntilStopped runs a worker that is expected to stop by itself.
func (h *harness) runUntilStopped(t *testing.T) *domain.StopError {
	t.Helper()
	reg, err := application.NewRegistry(application.Registration{Operation: siteprotocol.OpObserve, Family: siteprotocol.FamilyBatch, Executor: h.exec})
	if err != nil {
		t.Fatal(err)
	}
	w := application.NewWorker(h.cfg, h.site, h.journal, reg, h.heart, nil, h.events)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = w.Run(ctx)
	stop, ok := err.(*domain.StopError)
	if !ok {
		t.Fatalf("worker returned %v, want a *StopError", err)
	}
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
