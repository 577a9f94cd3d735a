package application_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// While a command runs, the heartbeat records it — its sequence,
// operation and Attempt, since when and until when at most (its
// operation's ceiling) — and the bounded wait under way, and keeps
// beating: liveness sees a busy worker, not a silent one. A wait that
// lasts LongWait is logged once, then its end. Once the command is
// answered the heartbeat records no command
// (docs/site-runtime.md#command-bounds).
func TestTheHeartbeatRecordsTheCommandAndItsWaitWhileItRuns(t *testing.T) {
	h := newHarness()
	h.cfg.BeatInterval = time.Millisecond
	h.cfg.LongWait = time.Nanosecond // every wait is long: logged at the first tick
	inWait, release := make(chan context.Context), make(chan struct{})
	h.exec.during = func(ctx context.Context, _ siteprotocol.Command) {
		end := application.BeginWait(ctx, "the service's answer", time.Now().Add(time.Hour))
		inWait <- ctx
		<-release
		end("ended")
	}
	appendObserves(t, h, 1, 1)
	stop := h.start(t)
	ctx := <-inWait
	beatsBefore := len(h.heart.busyRecords())
	// Beats go on while the command waits, recording it and its wait.
	waitFor(t, "beats during the wait", func() bool {
		recs := h.heart.busyRecords()
		if len(recs) < beatsBefore+3 {
			return false
		}
		last := recs[len(recs)-1]
		return last != nil && last.Wait != nil && last.Wait.What == "the service's answer"
	})
	waitFor(t, "the long wait logged", func() bool { return len(h.events.loggedWaits()) == 1 })
	close(release)
	waitAcked(t, h, 1)
	_ = stop()

	recs := h.heart.busyRecords()
	var during *application.Work
	for _, r := range recs {
		if r != nil && r.Wait != nil {
			during = r
			break
		}
	}
	if during == nil {
		t.Fatal("no beat recorded the wait")
	}
	cmd, _ := siteprotocol.ParsePulled(h.site.stored[0])
	if during.Sequence != 1 || during.CommandID != cmd.ID || during.Operation != siteprotocol.OpObserve || during.AttemptID != cmd.AttemptID ||
		!during.Until.Equal(during.Since.Add(application.Bounds{}.Ceiling(siteprotocol.OpObserve))) {
		t.Fatalf("the heartbeat recorded %+v", *during)
	}
	if recs[len(recs)-1] != nil {
		t.Fatalf("after the command the heartbeat records %+v, want no command", *recs[len(recs)-1])
	}
	if got := h.events.loggedWaits(); len(got) != 2 || got[0] != "long the service's answer" || got[1] != "ended the service's answer: ended" {
		t.Fatalf("logged waits %q", got)
	}
	if start := application.CommandStart(ctx); start.IsZero() {
		t.Fatal("the command's context carries no start")
	}
}

// The command's start is saved with it (commit #1), and a Recover after a
// restart runs with that start, not the time of the recovery: its waits
// count the time already spent (docs/site-runtime.md#command-bounds). A
// command saved by a Runtime that kept no start counts from the recovery.
func TestARecoveryRunsWithTheStartSavedWithTheCommand(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Time
	during := func(ctx context.Context, _ siteprotocol.Command) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, application.CommandStart(ctx))
	}

	h := newHarness()
	h.exec.during = during
	appendObserves(t, h, 1, 1)
	var saved time.Time
	h.journal.onSave = func(p domain.Pending) { saved = p.StartedAt }
	stop := h.start(t)
	waitAcked(t, h, 1)
	_ = stop()
	mu.Lock()
	if saved.IsZero() || len(starts) != 1 || !starts[0].Equal(saved) {
		t.Fatalf("saved start %v; the executor saw %v", saved, starts)
	}
	mu.Unlock()

	for _, begun := range []time.Time{time.Now().Add(-time.Hour).UTC(), {}} {
		h := newHarness()
		h.exec.during = during
		h.site.appendCommands(t, observe(t, 1))
		cmd, _ := siteprotocol.ParsePulled(h.site.stored[0])
		h.journal.cp.Pending = &domain.Pending{Sequence: 1, Raw: h.site.stored[0], Command: cmd, StartedAt: begun}
		mu.Lock()
		starts = nil
		mu.Unlock()
		before := time.Now()
		stop := h.start(t)
		waitAcked(t, h, 1)
		_ = stop()
		mu.Lock()
		switch {
		case len(starts) != 1:
			t.Fatalf("recovered %d times", len(starts))
		case !begun.IsZero() && !starts[0].Equal(begun):
			t.Fatalf("the recovery ran with start %v; the command was begun at %v", starts[0], begun)
		case begun.IsZero() && starts[0].Before(before):
			t.Fatalf("a command saved without a start recovered with start %v, before the recovery", starts[0])
		}
		mu.Unlock()
	}
}

// The ceiling of every operation is at least every bound its steps may
// wait out, added up, so liveness fails only past all of them: a proxy
// outlasts its permission check and its exchange; a read-file its
// permission check, two reader removals and the reader's wait; a
// checkout prepare its grant, its helper's wait, its revocation and two
// removals. An operation it does not know gets the longest.
func TestTheCeilingOfEveryOperationExceedsItsBounds(t *testing.T) {
	b := application.Bounds{Proxy: 7 * time.Second, ReadLogs: 11 * time.Second, ReadFile: 13 * time.Minute, Checkout: 17 * time.Minute,
		Deletion: 19 * time.Second, Permissions: 23 * time.Second, Grants: 29 * time.Second, Removal: 31 * time.Second}
	for op, least := range map[siteprotocol.Operation]time.Duration{
		siteprotocol.OpProxy:    b.Permissions + b.Proxy,
		siteprotocol.OpReadLogs: b.Permissions + b.ReadLogs,
		siteprotocol.OpReadFile: b.Permissions + 2*b.Removal + b.ReadFile,
		siteprotocol.OpPrepare:  b.Permissions + 2*b.Grants + b.Checkout + 2*b.Removal,
		siteprotocol.OpStart:    b.Permissions + application.StartWatchWait + b.Deletion,
		siteprotocol.OpCancel:   b.Deletion,
		siteprotocol.OpCleanup:  b.Grants + b.Deletion,
	} {
		if got := b.Ceiling(op); got < least+application.CeilingAllowance {
			t.Errorf("%s: ceiling %s, below its bounds %s plus the allowance", op, got, least)
		}
	}
	if got, want := b.Ceiling("made-up"), b.Ceiling(siteprotocol.OpPrepare); got != want {
		t.Errorf("an unknown operation's ceiling is %s, want the longest, %s", got, want)
	}
}

// A cancel's deletion wait and a checkout's wait for its helper count from
// the command's start: recovered after a restart past the bound (an hour
// here: a wait begun again would not end), the cancel answers
// deletion-pending and the prepare deadline-exceeded at once, after the
// one look a recovery takes; the helper is adopted, not created again
// (docs/site-runtime.md#command-bounds).
func TestWaitsRecoveredPastTheirBoundAnswerAtOnce(t *testing.T) {
	begun := application.WithCommandStart(context.Background(), time.Now().Add(-2*time.Hour))

	f := newBatchFixture(t, time.Hour)
	f.prepared(t)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	f.native.neverGone = true
	r := f.runIn(t, begun, f.cmd(t, siteprotocol.OpCancel, nil), true)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeletionPending)

	c := newCheckoutFixture(t)
	c.cfg.Wait = time.Hour
	c.helper.never = true
	c.reg = c.registry(t, nil)
	p := c.cmd(t, siteprotocol.OpPrepare, repoPrepare)
	// The helper is created, then the process ends while it waits (its
	// context canceled: the wait is left, as a kill leaves it).
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for c.native.podCreates() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := c.reg.Execute(ctx, p); err == nil {
		t.Fatal("the interrupted prepare answered")
	}
	cancel()
	pods := c.native.podCreates()
	if pods != 1 {
		t.Fatalf("%d helpers created before the restart", pods)
	}
	r = c.runIn(t, begun, p, true)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if c.native.podCreates() != pods {
		t.Fatal("the recovery created a second helper")
	}
	c.settled(t)
}
