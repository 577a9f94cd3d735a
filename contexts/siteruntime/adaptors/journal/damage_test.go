package journal_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// populated returns a journal directory with two delivered commands and a
// third pending with its saved result "saved result bytes 3". clean closes
// it (the WAL is checkpointed away); otherwise the directory is a crash
// image: a copy taken while the journal was open, -wal and -shm included.
func populated(t *testing.T, clean bool) string {
	t.Helper()
	dir := install(t)
	j, err := journal.Open(context.Background(), dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, j, 1)
	deliver(t, j, 2)
	p := pulled(t, 3, 3)
	if err := j.SavePending(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	b, d := result(t, p, "saved result bytes 3")
	if err := j.SaveResult(context.Background(), 3, b, d); err != nil {
		t.Fatal(err)
	}
	if err := j.Batch().SaveRecord(context.Background(), domain.NativeRecord{AttemptID: "a", Kind: "Job", Name: "attempt-a", Spec: []byte(`{"spec":1}`)}); err != nil {
		t.Fatal(err)
	}
	if clean {
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	image := filepath.Join(t.TempDir(), "image")
	if err := os.Mkdir(image, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(image, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	_ = j.Close()
	if _, err := os.Stat(filepath.Join(image, domain.DeliveryFile+"-wal")); err != nil {
		t.Fatal("the crash image has no WAL")
	}
	return image
}

// flipIn flips one byte inside the last occurrence of marker in file.
func flipIn(t *testing.T, path string, marker string) { flip(t, path, marker, bytes.LastIndex) }

// flipFirstIn flips one byte inside the first occurrence of marker.
func flipFirstIn(t *testing.T, path string, marker string) { flip(t, path, marker, bytes.Index) }

func flip(t *testing.T, path, marker string, find func(b, sep []byte) int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := find(b, []byte(marker))
	if i < 0 {
		t.Fatalf("%s does not hold %q", path, marker)
	}
	b[i+len(marker)-1] ^= 0x01
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func setVersion(t *testing.T, path string, version int) {
	t.Helper()
	execIn(t, path, fmt.Sprintf("UPDATE journal_meta SET schema_version = %d", version))
}

// execIn runs stmt in the journal file at path, as a tool outside the
// Runtime would.
func execIn(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedJournalsRefuseToStartNamingTheCauseAndStayByteIdentical(t *testing.T) {
	cases := []struct {
		name   string
		clean  bool
		damage func(t *testing.T, dir string)
		want   []string
	}{
		{"truncated delivery.sqlite", true, func(t *testing.T, dir string) {
			p := filepath.Join(dir, domain.DeliveryFile)
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, []string{"delivery.sqlite"}},
		{"one flipped byte in the saved result", true, func(t *testing.T, dir string) {
			flipIn(t, filepath.Join(dir, domain.DeliveryFile), "saved result bytes 3")
		}, []string{"delivery.sqlite", "pending (sequence 3)"}},
		{"one flipped byte in the saved result, in the WAL of a crash image", false, func(t *testing.T, dir string) {
			flipIn(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), "saved result bytes 3")
		}, []string{"delivery.sqlite-wal", "fails its checksum"}},
		{"one flipped byte in a saved specification", true, func(t *testing.T, dir string) {
			flipIn(t, filepath.Join(dir, domain.JobsFile), `{"spec":1}`)
		}, []string{"jobs.sqlite", "native_records (attempt a, Job attempt-a)"}},
		{"a saved command's start changed", true, func(t *testing.T, dir string) {
			execIn(t, filepath.Join(dir, domain.DeliveryFile), "UPDATE pending SET started_at = '2026-12-04T09:30:00Z'")
		}, []string{"delivery.sqlite", "pending (sequence 3)", "digest mismatch"}},
		{"a saved command's start that is no time", true, func(t *testing.T, dir string) {
			execIn(t, filepath.Join(dir, domain.DeliveryFile), "UPDATE pending SET started_at = 'yesterday'")
		}, []string{"delivery.sqlite", "pending (sequence 3)", "started_at"}},
		{"unknown schema version", true, func(t *testing.T, dir string) {
			setVersion(t, filepath.Join(dir, domain.ServicesFile), 99)
		}, []string{"services.sqlite", "unknown schema version 99"}},
		{"missing jobs.sqlite after installation", true, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, domain.JobsFile)); err != nil {
				t.Fatal(err)
			}
		}, []string{"jobs.sqlite", "missing"}},
		{"missing jobs.sqlite from a crash image", false, func(t *testing.T, dir string) {
			for _, s := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(filepath.Join(dir, domain.JobsFile+s))
			}
			flipIn(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), "saved result bytes 3")
		}, []string{"jobs.sqlite", "missing"}},
		{"a WAL without its index, damaged before a later commit", false, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, domain.DeliveryFile+"-shm")); err != nil {
				t.Fatal(err)
			}
			flipFirstIn(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), "result message 1")
		}, []string{"delivery.sqlite-wal", "committed frame"}},
		{"a WAL without its index, another file damaged", false, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, domain.DeliveryFile+"-shm")); err != nil {
				t.Fatal(err)
			}
			setVersionInCopy(t, dir)
		}, []string{"jobs.sqlite", "unknown schema version 7"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := populated(t, c.clean)
			c.damage(t, dir)
			before := snapshot(t, dir)
			_, err := journal.Open(context.Background(), dir, journal.Options{})
			if err == nil {
				t.Fatal("a damaged journal set opened")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not name %q", err, w)
				}
			}
			if !errors.Is(err, application.ErrJournalIntegrity) {
				t.Fatalf("error is not an integrity failure: %v", err)
			}
			sameSnapshot(t, before, snapshot(t, dir))
		})
	}
}

// setVersionInCopy gives jobs.sqlite an unknown version by writing a
// rebuilt file: the crash image keeps its delivery WAL without -shm.
func setVersionInCopy(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, domain.JobsFile)
	for _, s := range []string{"-wal", "-shm"} {
		_ = os.Remove(p + s)
	}
	work := filepath.Join(t.TempDir(), domain.JobsFile)
	b, _ := os.ReadFile(p)
	_ = os.WriteFile(work, b, 0o640)
	setVersion(t, work, 7)
	b, _ = os.ReadFile(work)
	_ = os.WriteFile(p, b, 0o640)
}

func TestAnUndamagedCrashImageRestoresItsSavedResultWithOrWithoutItsIndex(t *testing.T) {
	for _, dropIndex := range []bool{false, true} {
		dir := populated(t, false)
		if dropIndex {
			_ = os.Remove(filepath.Join(dir, domain.DeliveryFile+"-shm"))
		}
		before := snapshot(t, dir)
		set, err := journal.OpenSet(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := set.Binding(context.Background())
		_ = set.Close()
		if err != nil || b != bound {
			t.Fatalf("binding %+v, %v", b, err)
		}
		sameSnapshot(t, before, snapshot(t, dir)) // the read-only check wrote nothing
		j, err := journal.Open(context.Background(), dir, journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := j.Restore(context.Background())
		if err != nil || cp.Pending == nil || cp.Pending.Result == nil || cp.Acknowledged != 2 {
			t.Fatalf("restored %+v, %v", cp, err)
		}
		_ = j.Close()
	}
}

func TestATornUncommittedWALTailIsIgnoredAsSQLiteIgnoresIt(t *testing.T) {
	dir := populated(t, false)
	_ = os.Remove(filepath.Join(dir, domain.DeliveryFile+"-shm"))
	// The last commit's final frame is torn: nothing committed follows.
	flipIn(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), "saved result bytes 3")
	j, err := journal.Open(context.Background(), dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	cp, err := j.Restore(context.Background())
	if err != nil || cp.Acknowledged != 2 || cp.Pending == nil || cp.Pending.Result != nil {
		t.Fatalf("want command 3 pending without its torn result: %+v, %v", cp, err)
	}
}

func TestASecondRuntimeOnTheSameDirectoryFailsFastNamingTheLock(t *testing.T) {
	dir := populated(t, true)
	first := open(t, dir)
	before := snapshot(t, dir)
	_, err := journal.Open(context.Background(), dir, journal.Options{})
	if !errors.Is(err, journal.ErrLocked) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "flock") {
		t.Fatalf("want ErrLocked naming %s, got %v", dir, err)
	}
	if _, err := journal.OpenSet(dir); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("the install hook ran beside a Runtime: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, dir))
	_ = first.Close()
	second := open(t, dir) // released with the first
	_ = second.Close()
}
