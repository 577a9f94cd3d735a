package journal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// A transaction whose body fails is rolled back: nothing it wrote stays,
// it counts no commit, and the next transaction on the same connection
// commits.
func TestAFailedTransactionIsRolledBackAndTheNextCommits(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	failed := errors.New("body failed")
	before := j.Commits()
	if err := journal.ExecInTx(ctx, j, domain.DeliveryFile, "UPDATE checkpoint SET acknowledged_sequence = 99", failed); !errors.Is(err, failed) {
		t.Fatalf("failed body: %v", err)
	}
	if j.Commits() != before {
		t.Fatal("a rolled-back transaction counted as a commit")
	}
	if cp, err := j.Restore(ctx); err != nil || cp.Acknowledged != 0 {
		t.Fatalf("after rollback: %+v %v", cp, err)
	}
	deliver(t, j, 1)
	if cp, err := j.Restore(ctx); err != nil || cp.Acknowledged != 1 || cp.Pending != nil {
		t.Fatalf("after the next commits: %+v %v", cp, err)
	}
}

// A discarded connection (what a failed rollback leaves, possibly with
// its transaction still open) is closed and replaced on the next use, with
// its statements prepared again, for delivery.sqlite and for a record file
// alike.
func TestAfterADiscardedConnectionTheNextUseOpensAFreshOne(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	p := pulled(t, 1, 1)
	if err := j.SavePending(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if err := journal.DiscardConnection(ctx, j, domain.DeliveryFile); err != nil {
		t.Fatal(err)
	}
	b, d := result(t, p, "after a fresh connection")
	if err := j.SaveResult(ctx, 1, b, d); err != nil {
		t.Fatal(err)
	}
	if err := j.Acknowledge(ctx, domain.Acknowledgement{Sequence: 1, ResultDigest: d}); err != nil {
		t.Fatal(err)
	}
	if err := journal.DiscardConnection(ctx, j, domain.JobsFile); err != nil {
		t.Fatal(err)
	}
	rec := domain.NativeRecord{AttemptID: "a", Kind: "Job", Namespace: "project-q", Name: "attempt-a", Spec: []byte(`{}`)}
	if err := j.Batch().SaveRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := journal.DiscardConnection(ctx, j, domain.JobsFile); err != nil {
		t.Fatal(err)
	}
	if recs, err := j.Batch().Records(ctx, "a"); err != nil || len(recs) != 1 {
		t.Fatalf("records %+v %v", recs, err)
	}
	_ = j.Close()
	j = open(t, dir)
	if cp, err := j.Restore(ctx); err != nil || cp.Acknowledged != 1 || cp.Pending != nil {
		t.Fatalf("restored %+v %v", cp, err)
	}
}

// A caller whose context is already done starts no transaction; one that
// started runs to its end (statements run without the caller's
// cancellation, see journal.file).
func TestACancelledCallerStartsNoTransaction(t *testing.T) {
	dir := install(t)
	j := open(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := j.Commits()
	if err := j.SavePending(ctx, pulled(t, 1, 1), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("save under a cancelled context: %v", err)
	}
	if _, err := j.Restore(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("read under a cancelled context: %v", err)
	}
	if cp, err := j.Restore(context.Background()); err != nil || cp.Pending != nil || j.Commits() != before {
		t.Fatalf("a cancelled save wrote: %+v %v", cp, err)
	}
}

// A read waits for another caller's open transaction instead of running
// inside it: it never sees what that transaction wrote and rolled back.
func TestAReadNeverRunsInsideAnotherCallersTransaction(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	b := domain.MemberBinding{BindingID: "e41f0000-0000-4000-8000-000000000001", Generation: 1, Revision: 1, PartyID: "p", ProjectID: "q", Namespace: "project-q", Account: "member-p", AppliedBy: "c"}
	if err := j.Save(ctx, []domain.MemberBinding{b}); err != nil {
		t.Fatal(err)
	}
	started, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	failed := errors.New("rolled back")
	go func() {
		held <- journal.HoldTx(ctx, j, domain.DeliveryFile, "DELETE FROM member_bindings", started, release, failed)
	}()
	<-started
	type read struct {
		n   int
		err error
	}
	got := make(chan read, 1)
	go func() {
		rows, err := j.Generations(ctx, b.BindingID)
		got <- read{len(rows), err}
	}()
	select {
	case r := <-got:
		t.Fatalf("a read ran while another caller's transaction was open: %d rows, %v", r.n, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-held:
		if !errors.Is(err, failed) {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held transaction did not end after its release")
	}
	select {
	case r := <-got:
		if r.err != nil || r.n != 1 {
			t.Fatalf("after the rollback the read found %d rows, %v", r.n, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read did not end after the transaction did")
	}
}

// A caller cancelled while it waits for another caller's transaction gives
// up at once and writes nothing.
func TestACallerCancelledWhileWaitingForItsTurnWritesNothing(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	started, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- journal.HoldTx(ctx, j, domain.DeliveryFile, "SELECT 1", started, release, nil)
	}()
	<-started
	before := j.Commits()
	waiting, cancel := context.WithCancel(ctx)
	saved := make(chan error, 1)
	b := domain.MemberBinding{BindingID: "e41f0000-0000-4000-8000-000000000001", Generation: 1, Revision: 1, PartyID: "p", ProjectID: "q", Namespace: "project-q", Account: "member-p", AppliedBy: "c"}
	go func() { saved <- j.Save(waiting, []domain.MemberBinding{b}) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-saved:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled save: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled caller kept waiting for its turn")
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if rows, err := j.Generations(ctx, b.BindingID); err != nil || len(rows) != 0 || j.Commits() != before+1 {
		t.Fatalf("after a cancelled save: %d rows, %v, %d commits", len(rows), err, j.Commits()-before)
	}
}

// Open under a context that expires at any point either opens or fails
// leaving the directory byte for byte as it was (no -wal or -shm left by
// half-prepared statements).
func TestOpenUnderAnExpiringContextLeavesTheDirectoryUnchanged(t *testing.T) {
	dir := install(t)
	j := open(t, dir)
	deliver(t, j, 1)
	_ = j.Close()
	before := snapshot(t, dir)
	for d := time.Duration(0); d < 60*time.Millisecond; d += 100 * time.Microsecond {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		j, err := journal.Open(ctx, dir, journal.Options{})
		cancel()
		if err == nil {
			_ = j.Close()
		}
		after := snapshot(t, dir)
		if len(after) != len(before) {
			t.Fatalf("open with %v to go (%v) changed the directory: %d files, was %d", d, err, len(after), len(before))
		}
		for name, sum := range before {
			if after[name] != sum {
				t.Fatalf("open with %v to go (%v) changed %s", d, err, name)
			}
		}
	}
}
