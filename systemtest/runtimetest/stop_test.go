package runtimetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// awaitStop waits until the running Runtime p reports its worker stopped
// for reason, then proves the rest of the stop contract: the process stays
// up serving metrics, `runtime liveness` exits non-zero naming the reason,
// and — once the process is stopped — the journal directory's bytes equal
// before (transient empty -wal and -shm files SQLite removes at close may
// vanish when allowTransient).
func awaitStop(t *testing.T, e *env, p *harness.Process, reason domain.StopReason, before map[string]string, allowTransient bool) {
	t.Helper()
	waitMetric(t, p, `metallo_runtime_stopped{reason="`+string(reason)+`"}`, 1)
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"runtime worker stopped.*"reason":"`+string(reason)+`"`), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := e.rt.Liveness()
	if err == nil {
		t.Fatalf("liveness passed for a stopped worker: %s", out)
	}
	mustContain(t, out, "stopped", string(reason))
	if p.Exited() {
		t.Fatalf("the process exited after the stop:\n%s", p.Output())
	}
	during := snapshot(t, e.rt.JournalDir)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"runtime shut down; its worker had stopped".*"reason":"`+string(reason)+`"`), time.Second); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, e.rt.JournalDir)
	if d := harness.SnapshotDiff(during, after); d != "" {
		t.Fatalf("the journal changed after the stop: %s", d)
	}
	if allowTransient {
		for name, sum := range before {
			if (strings.HasSuffix(name, "-wal") && sum == emptySHA) || strings.HasSuffix(name, "-shm") {
				if _, still := after[name]; !still {
					delete(before, name)
				}
			}
		}
	}
	if d := harness.SnapshotDiff(before, after); d != "" {
		t.Fatalf("the journal directory's bytes changed: %s", d)
	}
}

const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// crashAt runs the Runtime until failpoint kills it, then closes the
// journal cleanly (as a backup would hold it).
func crashAt(t *testing.T, e *env, failpoint string) {
	t.Helper()
	p := e.start(t, failpoint)
	if err := p.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	if at := killedAt(p); at != strings.Split(failpoint, "@")[0] {
		t.Fatalf("armed %s, died at %q (%v):\n%s", failpoint, at, p.ExitErr(), p.Output())
	}
	normalise(t, e.rt.JournalDir)
}

// deliverAll runs the Runtime until sequence seq is acknowledged and
// cleared, then stops it.
func deliverAll(t *testing.T, e *env, seq int) {
	t.Helper()
	p := e.start(t, "")
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", float64(seq))
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestTheWorkerStopsWhenTheServerAcknowledgedBeyondTheCheckpointPlusPending(t *testing.T) {
	e := newEnv(t)
	backup := filepath.Join(t.TempDir(), "backup")
	copyDir(t, e.rt.JournalDir, backup) // the journals as installed: checkpoint 0
	e.append(t, startCmd(1, nil), startCmd(2, nil))
	deliverAll(t, e, 2)
	replaceDir(t, backup, e.rt.JournalDir) // an old backup restored
	before := snapshot(t, e.rt.JournalDir)
	awaitStop(t, e, e.start(t, ""), domain.StopServerAhead, before, false)
}

func TestTheWorkerStopsWhenTheServerAcknowledgedLessThanTheCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil), startCmd(2, nil))
	deliverAll(t, e, 2)
	if err := e.site.StartServer("replaced.sqlite", ""); err != nil { // the server lost its stream
		t.Fatal(err)
	}
	before := snapshot(t, e.rt.JournalDir)
	awaitStop(t, e, e.start(t, ""), domain.StopServerBehind, before, false)
}

func TestTheWorkerStopsWhenTheServersCommandAtThePendingSequenceDiffers(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	crashAt(t, e, application.FailAfterPersistPending)
	if err := e.site.StartServer("other.sqlite", ""); err != nil {
		t.Fatal(err)
	}
	e.append(t, startCmd(99, nil)) // another command at sequence 1
	before := snapshot(t, e.rt.JournalDir)
	awaitStop(t, e, e.start(t, ""), domain.StopCommandMismatch, before, false)
	if effects, _ := harness.ReadEffects(e.rt.Effects); len(effects) != 0 {
		t.Fatal("the pending command was executed or recovered against a server that does not hold it")
	}
}

func TestTheWorkerStopsWhenTheServerRejectsTheSavedResultAsAConflict(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	crashAt(t, e, application.FailAfterPersistPending)
	backup := filepath.Join(t.TempDir(), "backup")
	copyDir(t, e.rt.JournalDir, backup)
	deliverAll(t, e, 1) // recovered: the server records result R1
	// The volume is restored from the backup and the native system has
	// lost the effect: recovery executes again and saves another result.
	replaceDir(t, backup, e.rt.JournalDir)
	if err := os.Remove(e.rt.Effects); err != nil {
		t.Fatal(err)
	}
	crashAt(t, e, application.FailAfterPersistResult)
	if cp := checkpoint(t, e.rt.JournalDir); cp.Pending == nil || cp.Pending.Result == nil {
		t.Fatal("no saved result to replay")
	}
	before := snapshot(t, e.rt.JournalDir)
	awaitStop(t, e, e.start(t, ""), domain.StopResultConflict, before, false)
}

func TestTheWorkerStopsWhenAJournalIntegrityCheckFailsWhileRunning(t *testing.T) {
	e := newEnv(t)
	gate := filepath.Join(t.TempDir(), "gate")
	e.append(t, startCmd(1, map[string]string{"GATE": gate}))
	p := e.start(t, "")
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(gate + ".waiting"); err == nil {
			break
		}
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("the executor never reached its gate:\n%s", p.Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The worker sits between the native record and the result. Damage the
	// saved command on disk: checkpoint each file's WAL into the main file
	// from another connection, then flip one byte of the pending command.
	for _, f := range domain.JournalFiles() {
		sqliteCheckpointTruncate(t, filepath.Join(e.rt.JournalDir, f))
	}
	flipLast(t, filepath.Join(e.rt.JournalDir, domain.DeliveryFile), id(3, 1))
	before := snapshot(t, e.rt.JournalDir)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	awaitStop(t, e, p, domain.StopJournalIntegrity, before, true)
	mustContain(t, p.Output(), "delivery.sqlite", "pending (sequence 1)")
}

func flipLast(t *testing.T, path, marker string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(b), marker)
	if i < 0 {
		t.Fatalf("%s does not hold %q", path, marker)
	}
	b[i+len(marker)-1] ^= 0x01
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// A configuration that names another binding than the journal's is refused
// at start (non-zero exit naming both bindings, the directory unchanged):
// the binding is checked on every start, in serve's Preflight, not by a
// worker stop later.
func TestServeRefusesToStartWhenConfigurationNamesAnotherBindingThanTheJournal(t *testing.T) {
	e := newEnv(t)
	before := snapshot(t, e.rt.JournalDir)
	other := strings.Replace(e.rt.Authority, "127.0.0.1", "localhost", 1) // the same server, another authority
	refused := e.start(t, "", "--authority", other)
	if err := refused.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	if refused.ExitErr() == nil {
		t.Fatalf("a Runtime configured for another binding started:\n%s", refused.Output())
	}
	mustContain(t, refused.Output(), e.rt.Authority, other)
	if d := diffSnapshots(before, snapshot(t, e.rt.JournalDir)); d != "" {
		t.Fatalf("the refused start changed the journal directory: %s", d)
	}
}

func TestTheWorkerStopsWhenTheServersStreamNamesAnotherBinding(t *testing.T) {
	t.Run("the server's stream names another authority", func(t *testing.T) {
		e := newEnv(t)
		if err := e.site.StartServer("other.sqlite", "https://metallo.example.org"); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, e.rt.JournalDir)
		awaitStop(t, e, e.start(t, ""), domain.StopBindingMismatch, before, false)
	})
}

func TestTheWorkerStopsWhenRecoveryFindsANativeObjectItCannotExplain(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	crashAt(t, e, application.FailAfterPersistPending)
	// A Job with the command's deterministic name exists, with another
	// specification.
	foreign, _ := json.Marshal(harness.Effect{CommandID: id(1, 1), AttemptID: id(3, 1), UID: "foreign", SpecDigest: strings.Repeat("0", 64)})
	if err := os.WriteFile(e.rt.Effects, append(foreign, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, e.rt.JournalDir)
	p := e.start(t, "")
	awaitStop(t, e, p, domain.StopUnexplainedNativeState, before, false)
	if effects, _ := harness.ReadEffects(e.rt.Effects); len(effects) != 1 {
		t.Fatalf("recovery acted on unexplained native state: %d effects", len(effects))
	}
}

func TestTheWorkerStopsWhenTheServerBoundTheStreamToAnotherInstallation(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	deliverAll(t, e, 1) // binds the stream to the first installation
	second, err := harness.NewRuntime(bins.Runtime, e.site, filepath.Join(t.TempDir(), "second"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := second.Install(); err != nil {
		t.Fatal(out, err)
	}
	e2 := &env{site: e.site, rt: second}
	before := snapshot(t, second.JournalDir)
	awaitStop(t, e2, e2.start(t, ""), domain.StopInstallationMismatch, before, false)
}
