package runtimetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// The Runtime's stop report (docs/site-protocol.md#the-stop-report), end to
// end between a real execution role and a real Runtime process: a Runtime
// stopped by a damaged journal (it refuses to start and exits) or by a
// foreign native object (its worker stops and the process idles) shows the
// reason in the execution role's environment listing once it has stopped —
// the report is sent before the exit, and before the idle process's stop
// is awaited here — and the listing shows none once the repaired Runtime
// works again. The order is asserted: none while working, the reason after
// the stop, none after the resume.

// listedStop reads the listing's stop, failing the test on an error.
func listedStop(t *testing.T, e *env) *harness.RuntimeStop {
	t.Helper()
	s, err := e.site.ListedStop()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// awaitCleared waits until the listing shows no stop, the Runtime p
// having resumed; it fails if p exits first or a minute passes.
func awaitCleared(t *testing.T, e *env, p *harness.Process) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for listedStop(t, e) != nil {
		if p.Exited() {
			t.Fatalf("the Runtime exited before its stop was cleared:\n%s", p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stop is still listed a minute after the Runtime resumed: %+v\n%s", listedStop(t, e), p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestARuntimeStoppedByADamagedJournalIsListedWithItsReasonAndClearedWhenResumed(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	crashAt(t, e, application.FailAfterPersistResult)
	if s := listedStop(t, e); s != nil {
		t.Fatalf("a stop is listed before any: %+v", s)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	copyDir(t, e.rt.JournalDir, backup)
	flipLast(t, filepath.Join(e.rt.JournalDir, domain.DeliveryFile), "Job created as")

	refused := e.start(t, "")
	if err := refused.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	if refused.ExitErr() == nil {
		t.Fatalf("a damaged journal started:\n%s", refused.Output())
	}
	s := listedStop(t, e)
	if s == nil || s.Reason != string(domain.StopJournalIntegrity) || s.InstallationID == "" || s.RuntimeVersion == "" || !strings.Contains(s.Message, "delivery.sqlite") {
		t.Fatalf("after the refused start the listing shows %+v, want journal-integrity naming delivery.sqlite\n%s", s, refused.Output())
	}
	mustContain(t, refused.Output(), "runtime stop reported to the Site API")

	replaceDir(t, backup, e.rt.JournalDir) // the operator restores the journal
	p := e.start(t, "")
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", 1)
	awaitCleared(t, e, p)
}

func TestARuntimeStoppedByAForeignNativeObjectIsListedWithItsReasonAndClearedWhenResumed(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	crashAt(t, e, application.FailAfterPersistPending)
	foreign, _ := json.Marshal(harness.Effect{CommandID: id(1, 1), AttemptID: id(3, 1), UID: "foreign", SpecDigest: strings.Repeat("0", 64)})
	if err := os.WriteFile(e.rt.Effects, append(foreign, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.start(t, "")
	waitMetric(t, p, `metallo_runtime_stopped{reason="`+string(domain.StopUnexplainedNativeState)+`"}`, 1)
	deadline := time.Now().Add(time.Minute)
	var s *harness.RuntimeStop
	for s = listedStop(t, e); s == nil && time.Now().Before(deadline); s = listedStop(t, e) {
		time.Sleep(20 * time.Millisecond)
	}
	if s == nil || s.Reason != string(domain.StopUnexplainedNativeState) || s.Sequence != 1 {
		t.Fatalf("after the stop the listing shows %+v, want unexplained-native-state at 1\n%s", s, p.Output())
	}
	if p.Exited() {
		t.Fatalf("the stopped Runtime exited:\n%s", p.Output())
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if s := listedStop(t, e); s == nil {
		t.Fatal("stopping the idle process cleared its stop")
	}

	// The operator removes the foreign object; the Runtime recovers the
	// command and works again.
	if err := os.WriteFile(e.rt.Effects, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	resumed := e.start(t, "")
	waitMetric(t, resumed, "metallo_runtime_acknowledged_sequence", 1)
	awaitCleared(t, e, resumed)
}
