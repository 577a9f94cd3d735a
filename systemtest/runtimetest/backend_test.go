package runtimetest

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// A Runtime started with a backend other than its environment's
// (docs/site-runtime.md#stop-conditions): the environment is kubernetes
// (environments.yaml's default), the Runtime --backend slurm, composed
// without any Kubernetes piece. Its worker stops with backend-mismatch at
// once, having executed nothing — no effect, no result, no journal write,
// the journal directory's bytes unchanged — and the stop is listed with
// its reason. Started again with the environment's backend on the same
// journal, it delivers every command: the stop changed nothing.
func TestARuntimeOfAnotherBackendThanItsEnvironmentsStopsHavingExecutedNothing(t *testing.T) {
	e := newEnv(t)
	e.append(t, bindCmd(1, 1), startCmd(2, nil))
	before := snapshot(t, e.rt.JournalDir)
	p := e.start(t, "", "--backend", "slurm")
	deadline := time.Now().Add(time.Minute)
	for listedStop(t, e) == nil {
		if p.Exited() {
			t.Fatalf("the Runtime exited:\n%s", p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stop listed a minute after the start:\n%s", p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := listedStop(t, e); s.Reason != string(domain.StopBackendMismatch) || s.Sequence != 0 {
		t.Fatalf("listed stop %+v, want backend-mismatch at sequence 0", s)
	}
	awaitStop(t, e, p, domain.StopBackendMismatch, before, false)
	if b, err := os.ReadFile(e.rt.Effects); err == nil && len(b) > 0 || err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stopped Runtime left native effects (%v): %s", err, b)
	}
	for _, n := range []int{1, 2} {
		rec, err := e.site.Command(id(1, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Result) > 0 || rec.ResultDigest != "" {
			t.Fatalf("command %d has a result: %s", n, rec.Result)
		}
	}
	if cp := checkpoint(t, e.rt.JournalDir); cp.Acknowledged != 0 || cp.Pending != nil {
		t.Fatalf("the journal moved: %+v", cp)
	}

	deliverAll(t, e, 2)
	if s := listedStop(t, e); s != nil {
		t.Fatalf("the stop is still listed after the Runtime of the right backend delivered: %+v", s)
	}
}
