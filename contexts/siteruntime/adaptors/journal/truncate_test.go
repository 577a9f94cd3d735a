package journal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// crashImageWithIndex is crashImage with delivery.sqlite's -shm kept: the
// directory as a crash leaves it.
func crashImageWithIndex(t *testing.T, write func(j *journal.Journal)) string {
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
	return image
}

func twoCommands(t *testing.T) func(j *journal.Journal) {
	return func(j *journal.Journal) {
		deliver(t, j, 1)
		savePendingAndResult(t, j, 2, nil)
	}
}

func cutShort(t *testing.T, wal string, by int64) {
	t.Helper()
	st, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wal, st.Size()-by); err != nil {
		t.Fatal(err)
	}
}

// A log cut short (truncated, or copied while it was written) while its
// index (-shm) records the lost frames as committed is refused naming the
// log, and the directory is left as it was: those commits had returned
// (docs/site-runtime.md#a-discarded-last-commit).
func TestALogCutShortIsRefusedWhileItsIndexRecordsTheLostFrames(t *testing.T) {
	for name, by := range map[string]int64{"inside its last frame": 100, "at a frame boundary": 4096 + 24} {
		t.Run(name, func(t *testing.T) {
			dir := crashImageWithIndex(t, twoCommands(t))
			cutShort(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), by)
			before := snapshot(t, dir)
			_, err := journal.Open(context.Background(), dir, journal.Options{})
			if !errors.Is(err, application.ErrJournalIntegrity) || !strings.Contains(err.Error(), "delivery.sqlite-wal") ||
				!strings.Contains(err.Error(), "index (-shm) records") {
				t.Fatalf("want a refusal naming delivery.sqlite-wal and its index, got %v", err)
			}
			sameSnapshot(t, before, snapshot(t, dir))
		})
	}
}

// A log that is gone while its index records committed frames is refused
// naming it; the directory is left as it was.
func TestAMissingLogIsRefusedWhileItsIndexRecordsCommittedFrames(t *testing.T) {
	dir := crashImageWithIndex(t, twoCommands(t))
	if err := os.Remove(filepath.Join(dir, domain.DeliveryFile+"-wal")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	_, err := journal.Open(context.Background(), dir, journal.Options{})
	if !errors.Is(err, application.ErrJournalIntegrity) || !strings.Contains(err.Error(), "delivery.sqlite-wal") ||
		!strings.Contains(err.Error(), "the log is missing") {
		t.Fatalf("want a refusal naming the missing delivery.sqlite-wal, got %v", err)
	}
	sameSnapshot(t, before, snapshot(t, dir))
}

// A last frame cut short without the index (a torn write of the last
// commit) is a discarded last commit: reported, naming the log, and the
// journal reads as it was before that commit.
func TestALastFrameCutShortWithoutTheIndexIsReportedAsADiscardedLastCommit(t *testing.T) {
	dir := crashImage(t, twoCommands(t))
	cutShort(t, filepath.Join(dir, domain.DeliveryFile+"-wal"), 100)
	j := open(t, dir)
	got := j.Discarded()
	if len(got) != 1 || got[0].File != domain.DeliveryFile+"-wal" || !got[0].Commit || !strings.Contains(got[0].String(), "cut short") {
		t.Fatalf("discarded %+v; want delivery.sqlite-wal's torn last commit", got)
	}
	cp, err := j.Restore(context.Background())
	if err != nil || cp.Acknowledged != 1 || cp.Pending == nil || cp.Pending.Sequence != 2 || cp.Pending.HasResult() {
		t.Fatalf("restored %+v, %v; want command 2 pending without its result", cp, err)
	}
}
