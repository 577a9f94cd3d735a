package application_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func appendObserves(t *testing.T, h *harness, from, to int) {
	t.Helper()
	for n := from; n <= to; n++ {
		h.site.appendCommands(t, observe(t, n))
	}
}

func waitAcked(t *testing.T, h *harness, seq int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("acknowledgement of %d", seq), func() bool {
		cp, _ := h.journal.snapshot()
		return cp.Acknowledged == seq && cp.Pending == nil
	})
}

func TestWorkerDeliversEachCommandOnceInOrderAndClearsOnExactAcknowledgement(t *testing.T) {
	h := newHarness()
	h.cfg.PullLimit = 1 // every command is the last of its pull: never folded
	appendObserves(t, h, 1, 5)
	stop := h.start(t)
	waitAcked(t, h, 5)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, commits := h.journal.snapshot()
	if commits != 15 {
		t.Fatalf("journal commits = %d, want 3 per command (pending, result, clear)", commits)
	}
	executes, recovers, effects := h.exec.counts()
	if executes != 5 || recovers != 0 {
		t.Fatalf("executes=%d recovers=%d", executes, recovers)
	}
	for id, n := range effects {
		if n != 1 {
			t.Fatalf("command %s has %d effects", id, n)
		}
	}
	delivered, _, _, _ := h.events.get()
	for i, seq := range delivered {
		if seq != int64(i+1) {
			t.Fatalf("delivered out of order: %v", delivered)
		}
	}
	_, puts, results := h.site.state()
	for i, put := range puts {
		r, err := siteprotocol.ParseResult(put)
		if err != nil || r.Sequence != int64(i+1) || !bytes.Equal(results[r.Sequence], put) {
			t.Fatalf("put %d: %v %s", i, err, put)
		}
	}
	if beats, _ := h.heart.get(); beats < 5 {
		t.Fatalf("heartbeat beat %d times for 5 commands", beats)
	}
}

func TestWorkerFoldsTheClearIntoTheNextCommandsFirstCommitWithinAPull(t *testing.T) {
	h := newHarness()
	h.cfg.FoldAcknowledgement = true
	appendObserves(t, h, 1, 5)
	stop := h.start(t)
	waitAcked(t, h, 5)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Five commands in one pull: 2 commits each, plus the last one's clear.
	if _, commits := h.journal.snapshot(); commits != 11 {
		t.Fatalf("journal commits = %d, want 11", commits)
	}
}

func TestWorkerReplaysASavedResultByteForByteWithoutExecutingAgain(t *testing.T) {
	h := newHarness()
	appendObserves(t, h, 1, 2)
	stop := h.start(t)
	waitAcked(t, h, 2)
	_ = stop()

	// Command 3 was executed and its result saved, then the process died
	// before sending.
	h.site.appendCommands(t, observe(t, 3))
	raw := h.site.stored[2]
	cmd, _ := siteprotocol.ParsePulled(raw)
	_, saved, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, "saved before the crash", siteprotocol.ObserveDetail{State: siteprotocol.StateQueued}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := siteprotocol.ParseResult(saved)
	h.journal.cp.Pending = &domain.Pending{Sequence: 3, Raw: raw, Command: cmd, Result: saved, ResultDigest: r.Digest}
	executes, _, _ := h.exec.counts()

	stop = h.start(t)
	waitAcked(t, h, 3)
	_ = stop()
	after, recovers, _ := h.exec.counts()
	if after != executes || recovers != 0 {
		t.Fatalf("a saved result must be replayed, not executed or recovered: executes %d->%d, recovers %d", executes, after, recovers)
	}
	_, _, results := h.site.state()
	if !bytes.Equal(results[3], saved) {
		t.Fatalf("server recorded %s, want the saved bytes %s", results[3], saved)
	}
	if _, replayed, _, _ := h.events.get(); len(replayed) != 1 || replayed[0] != 3 {
		t.Fatalf("replayed = %v", replayed)
	}
}

func TestWorkerRecoversAPendingCommandWithoutAResultAndNeverExecutesIt(t *testing.T) {
	h := newHarness()
	h.site.appendCommands(t, observe(t, 1))
	cmd, _ := siteprotocol.ParsePulled(h.site.stored[0])
	h.journal.cp.Pending = &domain.Pending{Sequence: 1, Raw: h.site.stored[0], Command: cmd}
	h.exec.effects[cmd.ID] = 1 // the crash happened after the native effect

	stop := h.start(t)
	waitAcked(t, h, 1)
	_ = stop()
	executes, recovers, effects := h.exec.counts()
	if executes != 0 || recovers != 1 || effects[cmd.ID] != 1 {
		t.Fatalf("executes=%d recovers=%d effects=%d", executes, recovers, effects[cmd.ID])
	}
}

func TestLostAcknowledgementIsFollowedByAByteIdenticalReplayAndNoSecondExecute(t *testing.T) {
	h := newHarness()
	h.site.dropAck = 1
	appendObserves(t, h, 1, 1)
	stop := h.start(t)
	waitAcked(t, h, 1)
	_ = stop()
	_, puts, results := h.site.state()
	if len(puts) != 2 || !bytes.Equal(puts[0], puts[1]) || !bytes.Equal(puts[0], results[1]) {
		t.Fatalf("want two byte-identical PUTs, got %d", len(puts))
	}
	if executes, recovers, _ := h.exec.counts(); executes != 1 || recovers != 0 {
		t.Fatalf("executes=%d recovers=%d", executes, recovers)
	}
}

func TestUncertainExecuteIsRecoveredNeverExecutedAgain(t *testing.T) {
	h := newHarness()
	h.exec.failExec = fmt.Errorf("%w: native API timed out", application.ErrTransient)
	appendObserves(t, h, 1, 1)
	stop := h.start(t)
	waitAcked(t, h, 1)
	_ = stop()
	executes, recovers, effects := h.exec.counts()
	if executes != 1 || recovers != 1 {
		t.Fatalf("executes=%d recovers=%d", executes, recovers)
	}
	for id, n := range effects {
		if n != 1 {
			t.Fatalf("command %s has %d effects", id, n)
		}
	}
	h.events.mu.Lock()
	defer h.events.mu.Unlock()
	if !slices.Equal(h.events.retries, []string{application.StepExecute}) || !slices.Equal(h.events.ended, []string{application.StepExecute}) ||
		!slices.Equal(h.events.recovered, []int64{1}) {
		t.Fatalf("retries %v, ends %v, recovered %v; want the execute step's failure, its end, and command 1 recovered",
			h.events.retries, h.events.ended, h.events.recovered)
	}
}

func TestTransientFailuresAreRetriedWithoutAdvancingOrClearing(t *testing.T) {
	h := newHarness()
	h.cfg.PullLimit = 1
	transient := fmt.Errorf("%w: connection refused", application.ErrTransient)
	unavailable := &application.Problem{Status: 401, Reason: "unauthenticated", Detail: "token rotated"}
	h.site.failNext = []error{transient, transient, unavailable, transient}
	h.journal.fail = []error{fmt.Errorf("disk I/O error")}
	appendObserves(t, h, 1, 3)
	stop := h.start(t)
	waitAcked(t, h, 3)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, _, _, retries := h.events.get()
	if len(retries) != 5 {
		t.Fatalf("retries = %v, want 5", retries)
	}
	if executes, _, _ := h.exec.counts(); executes != 3 {
		t.Fatalf("executes = %d", executes)
	}
}

func TestBackoffWaitsAreCappedExponentialWithJitter(t *testing.T) {
	for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		for range 50 {
			d := application.Backoff(100, 1000, attempt)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: wait %d outside [%d, %d]", attempt, d, want/2, want)
			}
		}
	}
	// A run of failures as long as an outage of hours: the wait stays capped
	// (200ms << 36 overflowed int64 and panicked in rand.Int64N).
	for attempt := range 200 {
		for _, initial := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond, time.Second} {
			d := application.Backoff(initial, 30*time.Second, attempt)
			if d < 0 || d > 30*time.Second {
				t.Fatalf("attempt %d, initial %v: wait %v outside [0, 30s]", attempt, initial, d)
			}
			if attempt >= 40 && d < 15*time.Second {
				t.Fatalf("attempt %d, initial %v: wait %v below half the cap", attempt, initial, d)
			}
		}
	}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[application.Backoff(time.Millisecond, time.Second, 3)] = true
	}
	if len(seen) < 2 {
		t.Fatal("backoff waits carry no jitter")
	}
}

func TestStopConditions(t *testing.T) {
	type tc struct {
		reason domain.StopReason
		setup  func(t *testing.T, h *harness)
	}
	pendingFrom := func(h *harness, seq int64, withResult bool) {
		raw := h.site.stored[seq-1]
		cmd, _ := siteprotocol.ParsePulled(raw)
		p := &domain.Pending{Sequence: seq, Raw: raw, Command: cmd}
		if withResult {
			r, b, _ := siteprotocol.NewResult(cmd, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError, "a different result", nil, nil)
			p.Result, p.ResultDigest = b, r.Digest
		}
		h.journal.cp.Pending = p
	}
	cases := map[string]tc{
		"server acknowledged beyond checkpoint plus pending": {domain.StopServerAhead, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 3)
			h.site.acked = 2
			h.journal.cp.Acknowledged = 0
			pendingFrom(h, 1, false)
		}},
		"server acknowledged less than the checkpoint": {domain.StopServerBehind, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 3)
			h.site.acked = 1
			h.journal.cp.Acknowledged = 2
		}},
		"server's command at the pending sequence differs": {domain.StopCommandMismatch, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			other := newFakeSite()
			other.appendCommands(t, observe(t, 99))
			raw := other.stored[0]
			cmd, _ := siteprotocol.ParsePulled(raw)
			h.journal.cp.Pending = &domain.Pending{Sequence: 1, Raw: raw, Command: cmd}
		}},
		"server has no command at the pending sequence": {domain.StopCommandMismatch, func(t *testing.T, h *harness) {
			other := newFakeSite()
			other.appendCommands(t, observe(t, 99))
			cmd, _ := siteprotocol.ParsePulled(other.stored[0])
			h.journal.cp.Pending = &domain.Pending{Sequence: 1, Raw: other.stored[0], Command: cmd}
		}},
		"server rejects the saved result as a conflict": {domain.StopResultConflict, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			cmd, _ := siteprotocol.ParsePulled(h.site.stored[0])
			_, recorded, _ := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, "recorded", nil, nil)
			h.site.results[1], h.site.acked = recorded, 1
			pendingFrom(h, 1, true)
		}},
		"journal integrity fails while running": {domain.StopJournalIntegrity, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			h.journal.integrity = fmt.Errorf("%w: delivery.sqlite pending row 1: digest mismatch", application.ErrJournalIntegrity)
		}},
		"journal bound to another authority than configured": {domain.StopBindingMismatch, func(t *testing.T, h *harness) {
			h.journal.cp.Binding.Authority = "https://elsewhere.example"
		}},
		"server's stream names another authority": {domain.StopBindingMismatch, func(t *testing.T, h *harness) {
			h.site.auth = "https://elsewhere.example"
		}},
		"server bound the stream to another installation": {domain.StopInstallationMismatch, func(t *testing.T, h *harness) {
			h.site.install = "22222222-2222-4222-8222-222222222222"
		}},
		// docs/site-runtime.md#stop-conditions: a pending command and
		// commands to pull, none executed or recovered (checked below).
		"server's stream belongs to a slurm environment; the Runtime is kubernetes": {domain.StopBackendMismatch, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 2)
			pendingFrom(h, 1, false)
			h.site.backend = siteprotocol.BackendSlurm
		}},
		"a slurm Runtime meets a server that names no backend (kubernetes)": {domain.StopBackendMismatch, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 2)
			h.cfg.Backend = siteprotocol.BackendSlurm
		}},
		"server refuses the installation": {domain.StopInstallationMismatch, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			h.site.failNext = []error{nil, &application.Problem{Status: 409, Reason: siteprotocol.ProblemInstallationMismatch}}
		}},
		"recovery finds native state it cannot explain": {domain.StopUnexplainedNativeState, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			pendingFrom(h, 1, false)
			h.exec.recoverErr = fmt.Errorf("Job attempt-x has another spec digest: %w", application.ErrUnexplained)
		}},
		"pulled command fails its digest": {domain.StopInvalidCommand, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			h.site.stored[0] = bytes.Replace(h.site.stored[0], []byte(`"observe"`), []byte(`"cancel"`), 1)
		}},
		"server answers out of order": {domain.StopOutOfOrder, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			h.site.failNext = []error{nil, nil, &application.Problem{Status: 409, Reason: siteprotocol.ProblemOutOfOrder}}
		}},
		"server's answer of one command exceeds the pull bound": {domain.StopProtocolViolation, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			h.site.answerBytes = 16
		}},
		"server acknowledges another sequence": {domain.StopProtocolViolation, func(t *testing.T, h *harness) {
			appendObserves(t, h, 1, 1)
			h.site.ackShift = 1
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness()
			c.setup(t, h)
			before, _ := h.journal.snapshot()
			_, commitsBefore := h.journal.snapshot()
			stop := h.runUntilStopped(t)
			if stop.Reason != c.reason {
				t.Fatalf("stopped with %s (%v), want %s", stop.Reason, stop.Err, c.reason)
			}
			if _, reason := h.heart.get(); reason != c.reason {
				t.Fatalf("heartbeat stop reason %q", reason)
			}
			if h.events.stop == nil || h.events.stop.Reason != c.reason {
				t.Fatal("stop not reported to events")
			}
			if !h.journal.sealed {
				t.Fatal("the journal was not sealed at the stop")
			}
			// The stop is reported to the Site API once, after the local
			// log and metric, with the reason and where it stopped
			// (docs/site-protocol.md#the-stop-report).
			reports := h.site.stopReports()
			if len(reports) != 1 || reports[0].Reason != c.reason || reports[0].Message == "" {
				t.Fatalf("stop reports sent: %+v", reports)
			}
			if ev := h.events.stopReports; len(ev) != 1 || !ev[0].afterStopped || ev[0].err != nil || ev[0].reason != c.reason {
				t.Fatalf("the report's events: %+v", ev)
			}
			after, commitsAfter := h.journal.snapshot()
			if want := after.Next() - 1; after.Pending != nil && reports[0].Sequence != after.Pending.Sequence || after.Pending == nil && reports[0].Sequence != want {
				t.Fatalf("the report's sequence is %d; the journal at the stop: %+v", reports[0].Sequence, after)
			}
			if c.reason != domain.StopJournalIntegrity && c.reason != domain.StopProtocolViolation && c.reason != domain.StopOutOfOrder && commitsAfter != commitsBefore {
				t.Fatalf("the journal was written before the stop: %d commits", commitsAfter-commitsBefore)
			}
			if after.Acknowledged != before.Acknowledged && c.reason != domain.StopProtocolViolation {
				t.Fatalf("checkpoint moved %d -> %d", before.Acknowledged, after.Acknowledged)
			}
			if c.reason == domain.StopBackendMismatch {
				if h.exec.executes+h.exec.recovers != 0 || len(h.site.puts) != 0 || h.site.pulls != 0 {
					t.Fatalf("a Runtime of another backend acted: %d executes, %d recovers, %d results sent, %d pulls",
						h.exec.executes, h.exec.recovers, len(h.site.puts), h.site.pulls)
				}
			}
		})
	}
}

// A server that answers a pull over the protocol's byte bound (one without
// the MaxPullBytes budget) is asked again for one command, which always
// fits: the worker goes on in order, nothing skipped or repeated.
func TestAnOversizedPullAnswerIsAskedAgainForOneCommand(t *testing.T) {
	h := newHarness()
	appendObserves(t, h, 1, 3)
	h.site.answerBytes = len(h.site.stored[0]) + 8 // one command fits, two do not
	stop := h.start(t)
	waitAcked(t, h, 3)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if h.events.stop != nil {
		t.Fatalf("stopped: %v", h.events.stop)
	}
	delivered, _, _, retries := h.events.get()
	if len(delivered) != 3 || delivered[0] != 1 || delivered[2] != 3 {
		t.Fatalf("delivered %v", delivered)
	}
	if !slices.Contains(retries, "pull") {
		t.Fatalf("the oversized answer was not reported as a retried pull: %v", retries)
	}
	if executes, _, _ := h.exec.counts(); executes != 3 {
		t.Fatalf("executes = %d", executes)
	}
}

// A heartbeat that cannot be written is reported (Events.HeartbeatFailed:
// logged and counted) and the worker goes on delivering.
func TestHeartbeatFailuresAreReportedAndDeliveryGoesOn(t *testing.T) {
	h := newHarness()
	h.heart.fail = errors.New("write heartbeat: read-only file system")
	appendObserves(t, h, 1, 2)
	stop := h.start(t)
	waitAcked(t, h, 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := h.events.heartbeatFailures(); n == 0 {
		t.Fatal("no heartbeat failure reported")
	}
}

// A run of credential refusals (401 unauthenticated, 403 forbidden) is
// recorded in the heartbeat naming the credential, retried, and ended by
// the first request that is not refused; unavailability (a connection
// failure, a 5xx) is never a refusal and ends a run
// (docs/site-runtime.md#a-refused-credential).
func TestCredentialRefusalsAreRecordedInTheHeartbeatAndEndedByAnyOtherAnswer(t *testing.T) {
	h := newHarness()
	h.cfg.PullLimit = 1
	h.cfg.Credential = "--token-file /var/run/secrets/metallo/token"
	unauthenticated := &application.Problem{Status: 401, Reason: siteprotocol.ProblemUnauthenticated, Detail: "no valid bearer token"}
	forbidden := &application.Problem{Status: 403, Reason: siteprotocol.ProblemForbidden, Detail: "environment:other may not use this route"}
	transient := fmt.Errorf("%w: GET /site/v1/streams/alpha-k8s answered 503", application.ErrTransient)
	// stream state: refused twice, then a 503 ends the run, then refused
	// again (a second run), then accepted; the first pull is refused too.
	h.site.failNext = []error{unauthenticated, forbidden, transient, unauthenticated, nil, forbidden}
	appendObserves(t, h, 1, 2)
	stop := h.start(t)
	waitAcked(t, h, 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cause, runs := h.heart.refused()
	if cause != "" || runs != 3 {
		t.Fatalf("heartbeat refusal %q after %d runs; want none left after 3 runs", cause, runs)
	}
	h.events.mu.Lock()
	outcomes := slices.Clone(h.events.outcomes)
	h.events.mu.Unlock()
	want := []application.SiteOutcome{application.SiteRefused, application.SiteRefused, application.SiteFailed, application.SiteRefused,
		application.SiteAccepted, application.SiteRefused, application.SiteAccepted}
	if len(outcomes) < len(want) || !slices.Equal(outcomes[:len(want)], want) {
		t.Fatalf("site outcomes %v, want them to start %v", outcomes, want)
	}
	if executes, _, _ := h.exec.counts(); executes != 2 {
		t.Fatalf("executes = %d, want 2", executes)
	}
}

// A credential file that is missing or empty (a projected token that
// vanished) is a refusal of the credential: retried, recorded in the
// heartbeat naming the file, and ended by the first request that is sent.
func TestAnUnreadableCredentialFileCountsAsARefusal(t *testing.T) {
	h := newHarness()
	h.cfg.Credential = "--token-file /var/run/secrets/metallo/token"
	unreadable := fmt.Errorf("%w: %w: read token file: open /var/run/secrets/metallo/token: no such file or directory",
		application.ErrTransient, application.ErrCredentialUnreadable)
	h.site.failNext = []error{unreadable, unreadable}
	stop := h.start(t)
	waitFor(t, "the refusal's end", func() bool {
		cause, runs := h.heart.refused()
		return runs == 1 && cause == ""
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.heart.mu.Lock()
	cause := h.heart.lastCause
	h.heart.mu.Unlock()
	for _, want := range []string{"--token-file /var/run/secrets/metallo/token", "cannot be used", "no such file"} {
		if !strings.Contains(cause, want) {
			t.Fatalf("refusal %q does not name %q", cause, want)
		}
	}
}

// The heartbeat's refusal names the credential and the refusal; a problem
// that is no refusal (unknown-environment) records none.
func TestARefusalNamesTheCredential(t *testing.T) {
	h := newHarness()
	h.cfg.Credential = "--key-file /etc/metallo/key"
	h.site.failNext = []error{
		&application.Problem{Status: 404, Reason: siteprotocol.ProblemUnknownEnvironment, Detail: "no such environment"},
		&application.Problem{Status: 401, Reason: siteprotocol.ProblemUnauthenticated, Detail: "no valid bearer token"},
	}
	stop := h.start(t)
	waitFor(t, "the refusal's end", func() bool {
		cause, runs := h.heart.refused()
		return runs == 1 && cause == ""
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.heart.mu.Lock()
	cause := h.heart.lastCause
	h.heart.mu.Unlock()
	for _, want := range []string{"--key-file /etc/metallo/key", "401", "unauthenticated", "no valid bearer token"} {
		if !strings.Contains(cause, want) {
			t.Fatalf("refusal %q does not name %q", cause, want)
		}
	}
	if _, runs := h.heart.refused(); runs != 1 {
		t.Fatalf("%d runs of refusals, want 1 (unknown-environment is no refusal)", runs)
	}
}

// The worker reports the stream's head, the pending command, each retried
// step's end and, at shutdown, the checkpoint it leaves.
func TestWorkerReportsHeadPendingRetryEndsAndShutdown(t *testing.T) {
	h := newHarness()
	h.cfg.PullLimit = 1
	h.site.failNext = []error{nil, fmt.Errorf("%w: connection refused", application.ErrTransient)}
	h.journal.fail = []error{fmt.Errorf("disk I/O error")}
	appendObserves(t, h, 1, 3)
	stop := h.start(t)
	waitAcked(t, h, 3)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.events.mu.Lock()
	defer h.events.mu.Unlock()
	if h.events.head != 3 || h.events.pending != 0 {
		t.Fatalf("head %d pending %d, want 3 and 0", h.events.head, h.events.pending)
	}
	if !slices.Contains(h.events.ended, application.StepPull) || !slices.Contains(h.events.ended, application.StepPersistPending) {
		t.Fatalf("retry ends %v, want pull and persist pending command", h.events.ended)
	}
	if h.events.shutdown == nil || h.events.shutdown.Acknowledged != 3 {
		t.Fatalf("shutdown reported %+v, want checkpoint 3", h.events.shutdown)
	}
	for _, d := range h.events.deliveries {
		if d.CommandID == "" || d.Operation != siteprotocol.OpObserve || d.Path != application.PathExecuted || d.Reason != siteprotocol.ReasonObserved {
			t.Fatalf("delivery %+v", d)
		}
	}
	for _, step := range append(slices.Clone(h.events.retries), h.events.ended...) {
		if !slices.Contains(application.RetrySteps(), step) {
			t.Fatalf("step %q is not one of RetrySteps", step)
		}
	}
}

// An executor's note for the command's log line (a start's account checked
// by name only) reaches Events with the delivery; it is no part of the
// exact result the server receives.
func TestAnExecutorsNoteReachesTheDeliverysEventNotTheResult(t *testing.T) {
	h := newHarness()
	h.exec.note = "account checked by name only: binding b1 was applied without an account UID"
	appendObserves(t, h, 1, 1)
	stop := h.start(t)
	waitAcked(t, h, 1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.events.mu.Lock()
	defer h.events.mu.Unlock()
	if len(h.events.deliveries) != 1 || h.events.deliveries[0].Note != h.exec.note {
		t.Fatalf("deliveries %+v, want one with the executor's note", h.events.deliveries)
	}
	_, _, results := h.site.state()
	if len(results) != 1 || strings.Contains(string(results[1]), "by name only") {
		t.Fatalf("results sent %d: %s, want one without the note", len(results), results[1])
	}
}
