package journal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/journaltest"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// crashImage installs a journal set, runs write on it and returns a copy of
// the directory taken while the journal is still open (-wal and -shm
// included, as a crash leaves it), with delivery.sqlite's -shm removed (a
// copy or a backup tool that skips it).
func crashImage(t *testing.T, write func(j *journal.Journal)) string {
	t.Helper()
	dir := install(t)
	j, err := journal.Open(context.Background(), dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(j)
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
	if err := os.Remove(filepath.Join(image, domain.DeliveryFile+"-shm")); err != nil {
		t.Fatal(err)
	}
	return image
}

func commandID(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000001", n) }

// savePendingAndResult runs commits #1 and #2 of command seq.
func savePendingAndResult(t *testing.T, j *journal.Journal, seq int64, prior *domain.Acknowledgement) domain.Acknowledgement {
	t.Helper()
	p := pulled(t, seq, int(seq))
	if err := j.SavePending(context.Background(), p, prior); err != nil {
		t.Fatal(err)
	}
	b, d := result(t, p, fmt.Sprintf("saved result bytes %d", seq))
	if err := j.SaveResult(context.Background(), seq, b, d); err != nil {
		t.Fatal(err)
	}
	return domain.Acknowledgement{Sequence: seq, ResultDigest: d}
}

// A byte flipped in the frame that ends the log's last commit, without the
// -shm index: SQLite discards that commit, Open reports it (naming the log,
// the frames and the commit) and the journal reads as it was before the
// commit, in both shapes the last commit of delivery.sqlite can have
// (docs/site-runtime.md#a-discarded-last-commit).
func TestADamagedLastCommitIsDiscardedReportedAndTheJournalReadsAsBeforeIt(t *testing.T) {
	cases := []struct {
		name   string
		write  func(t *testing.T, j *journal.Journal)
		damage func(wal string) error
		// want: the checkpoint and the pending command as restored.
		acked       int64
		pending     int64
		pendingHasR bool
	}{
		{"the result's commit (commit #2), a byte of the result", func(t *testing.T, j *journal.Journal) {
			deliver(t, j, 1)
			savePendingAndResult(t, j, 2, nil)
		}, func(wal string) error { return journaltest.FlipInLastFrame(wal, "saved result bytes 2") }, 1, 2, false},
		{"the result's commit (commit #2), its frame's salt", func(t *testing.T, j *journal.Journal) {
			deliver(t, j, 1)
			savePendingAndResult(t, j, 2, nil)
		}, journaltest.FlipSaltOfLastFrame, 1, 2, false},
		{"the pending command's commit (commit #1)", func(t *testing.T, j *journal.Journal) {
			deliver(t, j, 1)
			if err := j.SavePending(context.Background(), pulled(t, 2, 2), nil); err != nil {
				t.Fatal(err)
			}
		}, func(wal string) error { return journaltest.FlipInLastFrame(wal, commandID(2)) }, 1, 0, false},
		{"the folded clear and commit #1", func(t *testing.T, j *journal.Journal) {
			deliver(t, j, 1)
			ack := savePendingAndResult(t, j, 2, nil)
			if err := j.SavePending(context.Background(), pulled(t, 3, 3), &ack); err != nil {
				t.Fatal(err)
			}
		}, func(wal string) error { return journaltest.FlipInLastFrame(wal, "") }, 1, 2, true},
		{"the log's only commit, its header", func(t *testing.T, j *journal.Journal) {
			if err := j.SavePending(context.Background(), pulled(t, 1, 1), nil); err != nil {
				t.Fatal(err)
			}
		}, journaltest.FlipInHeader, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := crashImage(t, func(j *journal.Journal) { c.write(t, j) })
			wal := filepath.Join(dir, domain.DeliveryFile+"-wal")
			_, frames, err := journaltest.ReadFrames(wal)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.damage(wal); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			set, err := journal.OpenSet(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := set.Binding(context.Background()); err != nil {
				t.Fatalf("the read-only check refused a discarded last commit: %v", err)
			}
			_ = set.Close()
			sameSnapshot(t, before, snapshot(t, dir))

			j, err := journal.Open(context.Background(), dir, journal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			got := j.Discarded()
			if len(got) != 1 {
				t.Fatalf("discarded %+v; want delivery.sqlite-wal's last commit", got)
			}
			d := got[0]
			if d.File != domain.DeliveryFile+"-wal" || !d.Commit || d.Last != len(frames.Offsets) || d.First != d.Kept+1 || d.Kept >= d.Last {
				t.Fatalf("discarded %+v of %d frames", d, len(frames.Offsets))
			}
			if c.name == "the log's only commit, its header" {
				if d.Damaged != 0 || d.Kept != 0 || !strings.Contains(d.String(), "header") {
					t.Fatalf("discarded %+v (%s)", d, d)
				}
			} else if d.Damaged != d.Last {
				t.Fatalf("damaged frame %d; want the last, %d", d.Damaged, d.Last)
			}
			if s := d.String(); !strings.Contains(s, "delivery.sqlite-wal") || !strings.Contains(s, "commit") {
				t.Fatalf("the description does not name the log and the commit: %s", s)
			}
			cp, err := j.Restore(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var pending int64
			hasResult := false
			if cp.Pending != nil {
				pending, hasResult = cp.Pending.Sequence, cp.Pending.HasResult()
			}
			if cp.Acknowledged != c.acked || pending != c.pending || hasResult != c.pendingHasR {
				t.Fatalf("restored checkpoint %d, pending %d (result %v); want %d, %d (result %v)", cp.Acknowledged, pending, hasResult, c.acked, c.pending, c.pendingHasR)
			}
			// The journal goes on from there: the lost commit is redone.
			switch {
			case c.pending != 0 && !c.pendingHasR:
				savePendingAndResult(t, j, c.pending, nil)
			case c.pending == 0:
				savePendingAndResult(t, j, c.acked+1, nil)
			}
		})
	}
}

// What is not a discarded last commit: an undamaged crash image, and a log
// whose last commit never completed (intact frames without a commit frame,
// as a kill in the middle of a commit leaves them) report nothing.
func TestIntactLogsReportNoDiscard(t *testing.T) {
	t.Run("an undamaged crash image without its index", func(t *testing.T) {
		dir := crashImage(t, func(j *journal.Journal) { savePendingAndResult(t, j, 1, nil) })
		j := open(t, dir)
		if d := j.Discarded(); len(d) != 0 {
			t.Fatalf("discarded %+v", d)
		}
	})
	t.Run("intact frames after the last commit frame", func(t *testing.T) {
		dir := crashImage(t, func(j *journal.Journal) {
			deliver(t, j, 1)
			ack := savePendingAndResult(t, j, 2, nil)
			if err := j.SavePending(context.Background(), pulled(t, 3, 3), &ack); err != nil {
				t.Fatal(err)
			}
		})
		wal := filepath.Join(dir, domain.DeliveryFile+"-wal")
		b, frames, err := journaltest.ReadFrames(wal)
		if err != nil {
			t.Fatal(err)
		}
		n := len(frames.Offsets)
		if n < 2 || !frames.IsCommit(b, n-1) || frames.IsCommit(b, n-2) {
			t.Fatalf("the folded commit is not two frames, a page and the commit frame (%d frames)", n)
		}
		// Drop the last commit's commit frame: its other frames stay intact.
		if err := os.Truncate(wal, int64(frames.Offsets[len(frames.Offsets)-1])); err != nil {
			t.Fatal(err)
		}
		j := open(t, dir)
		if d := j.Discarded(); len(d) != 0 {
			t.Fatalf("discarded %+v", d)
		}
		cp, err := j.Restore(context.Background())
		if err != nil || cp.Acknowledged != 1 || cp.Pending == nil || cp.Pending.Sequence != 2 {
			t.Fatalf("restored %+v, %v", cp, err)
		}
	})
}

// Damage a later commit follows is refused, the directory unchanged: a
// flipped salt in an earlier frame (its checksum still continues the
// chain), a damaged frame of the last commit that is not its commit frame
// (its own header, which may have marked an earlier commit's end, cannot be
// trusted), and a damaged header when more than the generation's first
// commit follows it.
func TestDamageALaterCommitFollowsIsRefused(t *testing.T) {
	flipFrame := func(i func(n int) int, at int) func(string) error {
		return func(wal string) error {
			b, f, err := journaltest.ReadFrames(wal)
			if err != nil {
				return err
			}
			b[f.Offsets[i(len(f.Offsets))]+at] ^= 0x01
			return os.WriteFile(wal, b, 0o640)
		}
	}
	cases := []struct {
		name   string
		damage func(wal string) error
		want   string
	}{
		{"the salt of the first frame", flipFrame(func(int) int { return 0 }, 12), "frame 1 carries a salt other than the log's and committed frame"},
		{"the page of the last commit's first frame (the folded commit's checkpoint)", flipFrame(func(n int) int { return n - 2 }, 24+100), "committed frame"},
		{"the header", journaltest.FlipInHeader, "the log's header fails its checksum and frame"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := crashImage(t, func(j *journal.Journal) {
				deliver(t, j, 1)
				ack := savePendingAndResult(t, j, 2, nil)
				if err := j.SavePending(context.Background(), pulled(t, 3, 3), &ack); err != nil {
					t.Fatal(err)
				}
			})
			wal := filepath.Join(dir, domain.DeliveryFile+"-wal")
			if err := c.damage(wal); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			_, err := journal.Open(context.Background(), dir, journal.Options{})
			if err == nil || !errors.Is(err, application.ErrJournalIntegrity) || !strings.Contains(err.Error(), "delivery.sqlite-wal") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a refusal naming delivery.sqlite-wal and %q, got %v", c.want, err)
			}
			sameSnapshot(t, before, snapshot(t, dir))
		})
	}
}

// A damaged last commit of jobs.sqlite is discarded only while
// delivery.sqlite holds the executing command (pending, no result saved):
// the record can then be that command's, which Recover redoes. Once the
// command's result is saved, the record's commit had returned before it:
// the start is refused naming jobs.sqlite-wal, the directory unchanged.
func TestADamagedLastCommitOfJobsIsDiscardedOnlyWhileItsCommandExecutes(t *testing.T) {
	record := domain.NativeRecord{AttemptID: "a", Kind: "Job", Name: "attempt-a", Spec: []byte(`{"spec":1}`)}
	for _, resultSaved := range []bool{false, true} {
		t.Run(fmt.Sprintf("result saved %v", resultSaved), func(t *testing.T) {
			dir := crashImage(t, func(j *journal.Journal) {
				deliver(t, j, 1)
				p := pulled(t, 2, 2)
				if err := j.SavePending(context.Background(), p, nil); err != nil {
					t.Fatal(err)
				}
				if err := j.Batch().SaveRecord(context.Background(), record); err != nil {
					t.Fatal(err)
				}
				if resultSaved {
					b, d := result(t, p, "saved result bytes 2")
					if err := j.SaveResult(context.Background(), 2, b, d); err != nil {
						t.Fatal(err)
					}
				}
			})
			jobs := filepath.Join(dir, domain.JobsFile)
			if err := os.Remove(jobs + "-shm"); err != nil {
				t.Fatal(err)
			}
			if err := journaltest.FlipInLastFrame(jobs+"-wal", ""); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			j, err := journal.Open(context.Background(), dir, journal.Options{})
			if resultSaved {
				if err == nil || !errors.Is(err, application.ErrJournalIntegrity) || !strings.Contains(err.Error(), "jobs.sqlite-wal") ||
					!strings.Contains(err.Error(), "command 2's result is saved") {
					t.Fatalf("want a refusal naming jobs.sqlite-wal and the saved result, got %v", err)
				}
				sameSnapshot(t, before, snapshot(t, dir))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if d := j.Discarded(); len(d) != 1 || d[0].File != domain.JobsFile+"-wal" {
				t.Fatalf("discarded %+v; want jobs.sqlite-wal's last commit", d)
			}
			if recs, err := j.Batch().Records(context.Background(), "a"); err != nil || len(recs) != 0 {
				t.Fatalf("records %+v, %v; want the discarded one gone", recs, err)
			}
		})
	}
}
