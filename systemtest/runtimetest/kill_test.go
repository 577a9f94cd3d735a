package runtimetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

const (
	killCommands  = 200
	minKills      = 50
	minHitsEachFP = 3
)

// leavesPendingWithoutResult lists the failpoints after which the journal
// holds a pending command without its result: the next start recovers it,
// so only then can after-recover be reached.
func leavesPendingWithoutResult(name string) bool {
	switch name {
	case application.FailAfterPersistPending, application.FailAfterNativeCall, application.FailAfterNativeRecord,
		application.FailAfterBindingRecord, application.FailAfterRecover:
		return true
	}
	return false
}

// TestKilledAtRandomFailpointsTheRuntimeDeliversEveryCommandOnceInOrderWithByteIdenticalResults
// is the kill test: the Runtime binary against a real execution role, 200
// commands (batch starts performed by the stand-in native system, member
// bindings, unknown operations), SIGKILLed by its own failpoints at randomly
// chosen points at least 50 times — every failpoint at least 3 times — and
// restarted each time with randomly chosen pull limits and folding. At the
// end every command is acknowledged in order with byte-identical results, no
// command has two native effects and no pending state is left.
// METALLO_KILL_SEED repeats a run's choices.
func TestKilledAtRandomFailpointsTheRuntimeDeliversEveryCommandOnceInOrderWithByteIdenticalResults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("METALLO_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("METALLO_KILL_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("kill test seed %d (METALLO_KILL_SEED=%d repeats its choices)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	e := newEnv(t)
	kinds := make(map[int]siteprotocol.Operation, killCommands)
	revision := int64(0)
	for n := 1; n <= killCommands; n++ {
		switch {
		case n%5 == 0:
			revision++
			kinds[n] = siteprotocol.OpBindMember
			e.append(t, bindCmd(n, revision))
		case n%23 == 0:
			kinds[n] = "teleport"
			e.append(t, unknownCmd(n))
		default:
			kinds[n] = siteprotocol.OpStart
			e.append(t, startCmd(n, nil))
		}
	}

	hits := map[string]int{}
	kills, prev := 0, ""
	// done reports whether the Runtime p has recorded the acknowledgement
	// of the last command: its metric moves only after the clear, when no
	// failpoint of the command can fire any more.
	done := func(p *harness.Process) bool {
		addr, err := harness.AdminAddr(p)
		if err != nil {
			return false // exited before serving metrics
		}
		v, found, err := harness.Metric(addr, "metallo_runtime_acknowledged_sequence")
		return err == nil && found && v == killCommands
	}
	start := time.Now()
	for run := 1; ; run++ {
		if time.Since(start) > 10*time.Minute {
			t.Fatalf("the kill test ran longer than 10 minutes (%d runs, %d kills)", run, kills)
		}
		name, nth := chooseFailpoint(rng, hits, kills, prev)
		extra := []string{"--pull-limit", fmt.Sprint([]int{1, 3, 100}[rng.IntN(3)]), "--fold-acknowledgement=" + strconv.FormatBool(rng.IntN(2) == 0)}
		if name == application.FailAfterAcknowledge {
			extra[1] = fmt.Sprint(1 + 2*rng.IntN(2))
		}
		spec := fmt.Sprintf("%s@%d", name, nth)
		p := e.start(t, spec, extra...)
		completed := false
		deadline := time.Now().Add(time.Minute)
		for !p.Exited() && !completed {
			if time.Now().After(deadline) {
				p.Kill()
				t.Fatalf("run %d (%s %v) neither died nor finished within a minute:\n%s", run, spec, extra, p.Output())
			}
			select {
			case <-p.Done():
			case <-time.After(20 * time.Millisecond):
				completed = done(p)
			}
		}
		if p.Exited() {
			at := killedAt(p)
			if at != name {
				t.Fatalf("run %d armed %s but exited (%v) at %q:\n%s", run, spec, p.ExitErr(), at, p.Output())
			}
			hits[name]++
			kills++
			prev = name
			continue
		}
		// Everything is acknowledged and cleared: stop the Runtime.
		if err := p.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		if p.ExitErr() != nil {
			t.Fatalf("the last run exited with %v:\n%s", p.ExitErr(), p.Output())
		}
		t.Logf("%d runs, %d kills in %s; kills per failpoint: %v", run, kills, time.Since(start).Round(time.Millisecond), hits)
		break
	}
	if kills < minKills {
		t.Errorf("only %d kills; want at least %d", kills, minKills)
	}
	for _, n := range application.FailpointNames() {
		if hits[n] < minHitsEachFP {
			t.Errorf("failpoint %s hit %d times; want at least %d", n, hits[n], minHitsEachFP)
		}
	}
	verifyDelivery(t, e, kinds)
}

// chooseFailpoint picks the next failpoint and hit count: failpoints below
// their quota first, after-recover only when the last kill left a command
// to recover, and single hits once the remaining quota needs every command.
func chooseFailpoint(rng *rand.Rand, hits map[string]int, kills int, prev string) (string, int) {
	var candidates, under []string
	for _, n := range application.FailpointNames() {
		if n == application.FailAfterRecover && !leavesPendingWithoutResult(prev) {
			continue
		}
		candidates = append(candidates, n)
		if hits[n] < minHitsEachFP {
			under = append(under, n)
		}
	}
	pool := candidates
	if len(under) > 0 && rng.IntN(4) != 0 {
		pool = under
	}
	name := pool[rng.IntN(len(pool))]
	switch {
	case name == application.FailAfterRecover, name == application.FailAfterBindingRecord, kills < minKills+10 && rng.IntN(2) == 0:
		return name, 1
	}
	return name, 1 + rng.IntN(3)
}

// verifyDelivery checks the end state of the kill test.
func verifyDelivery(t *testing.T, e *env, kinds map[int]siteprotocol.Operation) {
	t.Helper()
	effects, err := harness.ReadEffects(e.rt.Effects)
	if err != nil {
		t.Fatal(err)
	}
	effectOf := map[string]harness.Effect{}
	for _, eff := range effects {
		if _, dup := effectOf[eff.CommandID]; dup {
			t.Errorf("command %s has two native effects", eff.CommandID)
		}
		effectOf[eff.CommandID] = eff
	}
	puts := e.site.Proxy.Puts()
	bySeq := map[int64][][]byte{}
	last := int64(0)
	for i, p := range puts {
		if p.Status != 200 {
			t.Errorf("PUT %d (sequence %d) was answered %d: %s", i, p.Sequence, p.Status, p.Response)
		}
		if p.Sequence < last || p.Sequence > last+1 {
			t.Errorf("PUT %d sends sequence %d after %d: not in order", i, p.Sequence, last)
		}
		last = max(last, p.Sequence)
		bySeq[p.Sequence] = append(bySeq[p.Sequence], p.Body)
	}
	starts := 0
	for n := 1; n <= killCommands; n++ {
		rec, err := e.site.Command(id(1, n))
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := siteprotocol.ParsePulled(rec.Command)
		if err != nil || cmd.Sequence != int64(n) {
			t.Fatalf("command %d: %v (sequence %d)", n, err, cmd.Sequence)
		}
		if len(rec.Result) == 0 {
			t.Fatalf("command %d has no recorded result", n)
		}
		for _, sent := range bySeq[int64(n)] {
			if !bytes.Equal(sent, rec.Result) {
				t.Fatalf("command %d: a sent result differs from the recorded one:\n%s\n%s", n, sent, rec.Result)
			}
		}
		var want []byte
		switch kinds[n] {
		case siteprotocol.OpStart:
			starts++
			eff, ok := effectOf[cmd.ID]
			if !ok {
				t.Fatalf("start %d was acknowledged without a native effect", n)
			}
			a := harness.Answer(cmd, eff.UID)
			_, want, err = siteprotocol.NewResult(cmd, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
		case siteprotocol.OpBindMember:
			r, perr := siteprotocol.ParseResult(rec.Result)
			d, _ := siteprotocol.DecodeDetail[siteprotocol.BindingDetail](r)
			if perr != nil || r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonApplied || d.AppliedRevision != int64(n/5) {
				t.Fatalf("bind-member %d answered %s", n, rec.Result)
			}
			continue
		default:
			r, perr := siteprotocol.ParseResult(rec.Result)
			if perr != nil || r.Outcome != siteprotocol.OutcomeRefused || r.Reason != siteprotocol.ReasonUnsupportedOperation {
				t.Fatalf("unknown operation %d answered %s", n, rec.Result)
			}
			continue
		}
		if err != nil || !bytes.Equal(want, rec.Result) {
			t.Fatalf("start %d: recorded %s, want %s (%v)", n, rec.Result, want, err)
		}
	}
	if len(effects) != starts {
		t.Errorf("%d native effects for %d start commands", len(effects), starts)
	}
	cp := checkpoint(t, e.rt.JournalDir)
	if cp.Acknowledged != killCommands || cp.Pending != nil {
		t.Errorf("journal left at checkpoint %d with pending %v", cp.Acknowledged, cp.Pending != nil)
	}
	if !slices.ContainsFunc(puts, func(p harness.Put) bool { return len(bySeq[p.Sequence]) > 1 }) {
		t.Log("no result was sent twice in this run")
	}
}
