package runtimetest

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// TestADamagedJournalRefusesToStartNamingTheCauseAndKeepsItsBytes: each
// damage makes `serve --role runtime` exit non-zero with an error naming
// the file (and row) at fault, and the journal directory — -wal and -shm
// included — is byte-identical afterwards. The journals are a Runtime's
// real leftovers: a crash image (killed after saving a result) or the same
// closed cleanly.
func TestADamagedJournalRefusesToStartNamingTheCauseAndKeepsItsBytes(t *testing.T) {
	cases := []struct {
		name   string
		clean  bool
		damage func(t *testing.T, dir string)
		want   []string
	}{
		{"truncated delivery.sqlite", true, func(t *testing.T, dir string) {
			p := filepath.Join(dir, domain.DeliveryFile)
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, []string{"delivery.sqlite"}},
		{"one flipped byte in the saved result", true, func(t *testing.T, dir string) {
			flipLast(t, filepath.Join(dir, domain.DeliveryFile), "Job created as")
		}, []string{"delivery.sqlite", "pending (sequence 1)", "saved result"}},
		{"one flipped byte in the saved result, still in the WAL after a crash", false, func(t *testing.T, dir string) {
			flipLast(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), "Job created as")
		}, []string{"delivery.sqlite-wal", "fails its checksum"}},
		{"unknown schema version", true, func(t *testing.T, dir string) {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, domain.JobsFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("UPDATE journal_meta SET schema_version = 99"); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}, []string{"jobs.sqlite", "unknown schema version 99"}},
		{"missing jobs.sqlite after installation", false, func(t *testing.T, dir string) {
			for _, s := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(filepath.Join(dir, domain.JobsFile+s)); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
		}, []string{"jobs.sqlite", "missing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.append(t, startCmd(1, nil))
			p := e.start(t, application.FailAfterPersistResult)
			if err := p.Wait(time.Minute); err != nil || killedAt(p) != application.FailAfterPersistResult {
				t.Fatalf("crash: %v\n%s", err, p.Output())
			}
			if c.clean {
				normalise(t, e.rt.JournalDir)
			} else if _, err := os.Stat(filepath.Join(e.rt.JournalDir, domain.DeliveryFile+"-shm")); err != nil {
				t.Fatal("the crash image has no -shm")
			}
			c.damage(t, e.rt.JournalDir)
			before := snapshot(t, e.rt.JournalDir)
			refused := e.start(t, "")
			if err := refused.Wait(time.Minute); err != nil {
				t.Fatal(err)
			}
			if refused.ExitErr() == nil {
				t.Fatalf("a damaged journal started:\n%s", refused.Output())
			}
			mustContain(t, refused.Output(), c.want...)
			if d := diffSnapshots(before, snapshot(t, e.rt.JournalDir)); d != "" {
				t.Fatalf("the refused start changed the journal directory: %s", d)
			}
		})
	}
}

func TestASecondRuntimeOnTheSameJournalDirectoryFailsFastNamingTheLock(t *testing.T) {
	e := newEnv(t)
	first := e.start(t, "")
	waitMetric(t, first, "metallo_runtime_acknowledged_sequence", 0)
	before := snapshot(t, e.rt.JournalDir)
	second := e.start(t, "", "--heartbeat-file", filepath.Join(t.TempDir(), "second-heartbeat"))
	if err := second.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if second.ExitErr() == nil {
		t.Fatal("a second Runtime started on a locked journal directory")
	}
	mustContain(t, second.Output(), "locked by another Runtime", "flock", e.rt.JournalDir)
	if d := diffSnapshots(before, snapshot(t, e.rt.JournalDir)); d != "" {
		t.Fatalf("the second Runtime changed the journal directory: %s", d)
	}
	if first.Exited() {
		t.Fatalf("the first Runtime died:\n%s", first.Output())
	}
}
