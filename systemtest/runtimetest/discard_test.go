package runtimetest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/journaltest"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// TestADiscardedLastCommitIsLoggedNamingTheFileAndItsResultRecoveredByteForByte:
// the Runtime is killed right after saving a result (commit #2), the -shm
// of delivery.sqlite is removed and a byte of the result is flipped in the
// frame that ends the log's last commit. `serve` starts, logs a warning
// naming delivery.sqlite-wal (docs/site-runtime.md#a-discarded-last-commit),
// recovers the command — it was not executed again: one native effect —
// and the server records a result byte-identical to the lost one. (The
// batch executor's shapes on the local cluster:
// systemtest/processtest.)
func TestADiscardedLastCommitIsLoggedNamingTheFileAndItsResultRecoveredByteForByte(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	p := e.start(t, application.FailAfterPersistResult)
	if err := p.Wait(time.Minute); err != nil || killedAt(p) != application.FailAfterPersistResult {
		t.Fatalf("crash: %v\n%s", err, p.Output())
	}
	image := filepath.Join(t.TempDir(), "image")
	copyDir(t, e.rt.JournalDir, image)
	lost := checkpoint(t, image).Pending.Result
	if lost == nil {
		t.Fatal("the crash image holds no saved result")
	}
	path := filepath.Join(e.rt.JournalDir, domain.DeliveryFile)
	if err := os.Remove(path + "-shm"); err != nil {
		t.Fatal(err)
	}
	if err := journaltest.FlipInLastFrame(path+"-wal", "Job created as"); err != nil {
		t.Fatal(err)
	}
	p = e.start(t, "")
	line, err := p.WaitForLog(regexp.MustCompile(`"level":"warn".*"msg":"journal delivery\.sqlite-wal: a damaged last commit is discarded.*`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, line, `"file":"delivery.sqlite-wal"`, `"commit_frame_discarded":true`)
	rec := e.waitAcknowledged(t, p, id(1, 1))
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"result delivered".*"path":"recovered"`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Result, lost) {
		t.Fatalf("the recovered result differs from the lost one:\n%s\n%s", rec.Result, lost)
	}
	if effects, err := harness.ReadEffects(e.rt.Effects); err != nil || len(effects) != 1 {
		t.Fatalf("%d native effects (%v); want the one before the kill", len(effects), err)
	}
}
