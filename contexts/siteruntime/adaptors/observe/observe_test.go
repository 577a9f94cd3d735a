package observe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/observe"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Every failed heartbeat is counted; the log carries the first of each
// HeartbeatLogInterval (a minute), so a burst within it logs once.
func TestHeartbeatFailuresAreCountedAndLoggedOncePerInterval(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	reg := prometheus.NewRegistry()
	e, err := observe.New(zap.New(core), reg, clock.System{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("write heartbeat: read-only file system")
	for range 50 {
		e.HeartbeatFailed(cause)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64 = -1
	for _, f := range families {
		if f.GetName() == "metallo_runtime_heartbeat_failures_total" {
			counted = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if counted != 50 {
		t.Fatalf("metallo_runtime_heartbeat_failures_total = %v, want 50", counted)
	}
	entries := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(entries) != 1 {
		t.Fatalf("%d warnings logged for a burst of 50 failures, want 1", len(entries))
	}
	if got := entries[0].ContextMap()["error"]; got != cause.Error() {
		t.Fatalf("logged error %v", got)
	}
}

// gauge returns the value of the series of name whose labels include
// labels (nil: the first series); found is false when there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// Every retry step's series exists at zero from the start; the gauges of
// the stream's head, the pending command, the last accepted request and a
// refused credential follow what the worker reports
// (docs/operations.md#metrics).
func TestRuntimeGaugesAndRetriesFromTheStart(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	e, err := observe.New(zap.New(core), reg, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range application.RetrySteps() {
		if v, ok := gauge(t, reg, "metallo_runtime_retries_total", map[string]string{"step": step}); !ok || v != 0 {
			t.Fatalf("metallo_runtime_retries_total{step=%q} = %v (present %v) at the start, want 0", step, v, ok)
		}
	}
	if v, _ := gauge(t, reg, "metallo_runtime_last_accepted_request_timestamp_seconds", nil); v != float64(start.Unix()) {
		t.Fatalf("last accepted request at the start = %v, want the start %d", v, start.Unix())
	}
	e.Started(domain.Checkpoint{Acknowledged: 4, Pending: &domain.Pending{Sequence: 5}})
	e.StreamHead(9)
	for name, want := range map[string]float64{"metallo_runtime_acknowledged_sequence": 4, "metallo_runtime_pending_sequence": 5, "metallo_runtime_stream_head_sequence": 9} {
		if v, _ := gauge(t, reg, name, nil); v != want {
			t.Fatalf("%s = %v, want %v", name, v, want)
		}
	}

	// An outage of the pull: failures counted, its end logged with its
	// duration.
	clk.Advance(time.Second)
	e.SiteAnswered(application.SiteFailed)
	e.Retrying(application.StepPull, 1, errors.New("connection refused"), 200*time.Millisecond)
	clk.Advance(90 * time.Second)
	e.Retrying(application.StepPull, 2, errors.New("connection refused"), 400*time.Millisecond)
	e.SiteAnswered(application.SiteAccepted)
	e.RetryEnded(application.StepPull, 2)
	if v, _ := gauge(t, reg, "metallo_runtime_retries_total", map[string]string{"step": application.StepPull}); v != 2 {
		t.Fatalf("pull retries = %v, want 2", v)
	}
	if v, _ := gauge(t, reg, "metallo_runtime_last_accepted_request_timestamp_seconds", nil); v != float64(clk.Now().Unix()) {
		t.Fatalf("last accepted request = %v, want %d", v, clk.Now().Unix())
	}
	ended := logs.FilterMessage("transient failure ended; the step succeeded").All()
	if len(ended) != 1 || ended[0].ContextMap()["outage"] != 90*time.Second || ended[0].ContextMap()["failures"] != int64(2) {
		t.Fatalf("outage end logged as %+v, want one line with outage 1m30s and 2 failures", ended)
	}

	// A refused credential: the gauge while it lasts, one line at its start
	// and one at its end.
	e.SiteAnswered(application.SiteRefused)
	clk.Advance(time.Minute)
	e.SiteAnswered(application.SiteRefused)
	if v, _ := gauge(t, reg, "metallo_runtime_credential_refused", nil); v != 1 {
		t.Fatalf("credential refused = %v while refused", v)
	}
	e.SiteAnswered(application.SiteAccepted)
	if v, _ := gauge(t, reg, "metallo_runtime_credential_refused", nil); v != 0 {
		t.Fatalf("credential refused = %v after an accepted request", v)
	}
	if n := len(logs.FilterMessageSnippet("refuses the credential; retrying").All()); n != 1 {
		t.Fatalf("%d lines for one run of refusals' start, want 1", n)
	}
	if got := logs.FilterMessageSnippet("no longer refuses").All(); len(got) != 1 || got[0].ContextMap()["refused_for"] != time.Minute {
		t.Fatalf("refusal end logged as %+v", got)
	}

	// One line per delivered result: debug when executed, info otherwise;
	// the command is no longer pending.
	e.Delivered(application.Delivery{Sequence: 5, CommandID: "c5", Operation: siteprotocol.OpObserve, Outcome: siteprotocol.OutcomeSucceeded,
		Reason: siteprotocol.ReasonObserved, Path: application.PathRecovered})
	e.Pending(6)
	e.Delivered(application.Delivery{Sequence: 6, CommandID: "c6", Operation: siteprotocol.OpObserve, Outcome: siteprotocol.OutcomeSucceeded,
		Reason: siteprotocol.ReasonObserved, Path: application.PathExecuted})
	delivered := logs.FilterMessage("result delivered").All()
	if len(delivered) != 2 || delivered[0].Level != zapcore.InfoLevel || delivered[1].Level != zapcore.DebugLevel ||
		delivered[1].ContextMap()["command"] != "c6" || delivered[1].ContextMap()["reason"] != string(siteprotocol.ReasonObserved) {
		t.Fatalf("delivered lines %+v", delivered)
	}
	if _, ok := delivered[1].ContextMap()["note"]; ok {
		t.Fatalf("a delivery without a note logged one: %+v", delivered[1])
	}
	// An executed start with a note (its account checked by name only) is
	// logged at info, the note in its own field.
	note := "account checked by name only: binding b1 was applied without an account UID"
	e.Delivered(application.Delivery{Sequence: 7, CommandID: "c7", Operation: siteprotocol.OpStart, Outcome: siteprotocol.OutcomeSucceeded,
		Reason: siteprotocol.ReasonCreated, Path: application.PathExecuted, Note: note})
	if got := logs.FilterMessage("result delivered").All(); len(got) != 3 || got[2].Level != zapcore.InfoLevel || got[2].ContextMap()["note"] != note {
		t.Fatalf("delivered line with a note %+v", got)
	}
	if v, _ := gauge(t, reg, "metallo_runtime_pending_sequence", nil); v != 0 {
		t.Fatalf("pending = %v after delivery", v)
	}
	e.ShutDown(domain.Checkpoint{Acknowledged: 7})
	if got := logs.FilterMessageSnippet("shut down").All(); len(got) != 1 || got[0].ContextMap()["checkpoint"] != int64(7) {
		t.Fatalf("shutdown logged as %+v", got)
	}
}

// Every refused or failed command is logged once, when its result is
// acknowledged: at warn, with its operation, its Attempt, its reason and
// its message; a long wait is logged when it has lasted the worker's
// LongWait, naming what it waits for and its bound, and then its end
// (docs/operations.md#logs).
func TestRefusedAndFailedCommandsAndLongWaitsAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	e, err := observe.New(zap.New(core), prometheus.NewRegistry(), clock.NewManual(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range []siteprotocol.Outcome{siteprotocol.OutcomeRefused, siteprotocol.OutcomeFailed, siteprotocol.OutcomeSucceeded} {
		reason := map[siteprotocol.Outcome]siteprotocol.Reason{siteprotocol.OutcomeRefused: siteprotocol.ReasonAttemptConflict,
			siteprotocol.OutcomeFailed: siteprotocol.ReasonDeadlineExceeded, siteprotocol.OutcomeSucceeded: siteprotocol.ReasonRead}[out]
		e.Delivered(application.Delivery{Sequence: int64(i + 1), CommandID: "c", Operation: siteprotocol.OpReadFile, AttemptID: "a-7",
			Outcome: out, Reason: reason, Message: "what happened", Path: application.PathExecuted})
	}
	got := logs.FilterMessage("result delivered").All()
	if len(got) != 2 {
		t.Fatalf("%d lines at info and above; want the refused and the failed command's", len(got))
	}
	for i, reason := range []siteprotocol.Reason{siteprotocol.ReasonAttemptConflict, siteprotocol.ReasonDeadlineExceeded} {
		m := got[i].ContextMap()
		if got[i].Level != zapcore.WarnLevel || m["operation"] != "read-file" || m["attempt"] != "a-7" || m["reason"] != string(reason) || m["message"] != "what happened" {
			t.Fatalf("line %d: %v %+v", i, got[i].Level, m)
		}
	}

	since := time.Date(2026, 12, 4, 10, 0, 1, 0, time.UTC)
	w := application.Work{Sequence: 9, CommandID: "c9", Operation: siteprotocol.OpReadFile, AttemptID: "a-7", Since: since, Until: since.Add(time.Hour),
		Wait: &application.Wait{What: "the workspace reader Pod to end", Since: since, Until: since.Add(3 * time.Minute)}}
	e.LongWait(w)
	e.LongWaitEnded(w, "reached its bound", 3*time.Minute)
	long, ended := logs.FilterMessage("a command waits").All(), logs.FilterMessage("the command's wait ended").All()
	if len(long) != 1 || long[0].ContextMap()["waiting_for"] != "the workspace reader Pod to end" || long[0].ContextMap()["attempt"] != "a-7" {
		t.Fatalf("long wait lines %+v", long)
	}
	if len(ended) != 1 || ended[0].ContextMap()["result"] != "reached its bound" || ended[0].ContextMap()["waited"] != 3*time.Minute {
		t.Fatalf("wait end lines %+v", ended)
	}
}
