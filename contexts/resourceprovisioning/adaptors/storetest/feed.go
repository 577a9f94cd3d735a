package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// feedTests are the snapshot and the change feed read by cursor.
var feedTests = []testCase{
	{"SnapshotPagesAreStableCompleteAndStartAtAChangesCursor", testSnapshot},
	{"ChangeFeedNeverSkipsAChangeThatCommitsLate", testFeedLateCommit},
}

func testSnapshot(t *testing.T, e *env) {
	for i := range 7 {
		e.submit(t, Report(fmt.Sprintf("r%d", i), "pp1", 0))
	}
	first, err := e.svc.Allocations(e.ctx, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !first.First || first.ChangesHead != 7 || len(first.Allocations) != 3 || first.After == "" {
		t.Fatalf("first page %+v", first)
	}
	// A report during paging: the subscriber gets it from the feed after
	// the changes cursor even when the snapshot has passed its ID.
	e.clock.Advance(time.Minute)
	e.submit(t, Report("late", "pp1", 0))
	seen := map[string]int{}
	for _, v := range first.Allocations {
		seen[v.ID]++
	}
	after, pages := first.After, 1
	for after != "" {
		p, err := e.svc.Allocations(e.ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if p.First || p.ChangesHead != 0 {
			t.Fatalf("only the first page carries the changes cursor: %+v", p)
		}
		for i, v := range p.Allocations {
			seen[v.ID]++
			if i > 0 && v.ID <= p.Allocations[i-1].ID {
				t.Fatal("page not in ID order")
			}
		}
		after = p.After
		pages++
	}
	feed, err := e.svc.Changes(e.ctx, first.ChangesHead, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(feed.Changes) != 1 || feed.Changes[0].Event.ProviderResourceID != "late" {
		t.Fatalf("feed after the changes cursor: %+v", feed.Changes)
	}
	seen[feed.Changes[0].Event.AllocationID]++
	for i := range 7 {
		if n := seen[domain.AllocationID(Site, fmt.Sprintf("r%d", i))]; n != 1 {
			t.Fatalf("r%d seen %d times", i, n)
		}
	}
	if _, err := e.svc.Allocations(e.ctx, "", application.MaxPageLimit+1); err == nil {
		t.Fatal("oversized page accepted")
	}
}

func testFeedLateCommit(t *testing.T, e *env) {
	ctx := e.ctx
	held, release, doneA := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	now := e.clock.Now()
	go func() {
		doneA <- e.sub.Store.InReportTx(ctx, func(ctx context.Context, tx application.ReportTx) error {
			r := Report("held", "pp1", 0).Normalize()
			d, _ := domain.Decide(nil, Site, r, "", now)
			if _, err := tx.InsertAllocation(ctx, d.Next); err != nil {
				return err
			}
			if err := tx.InsertReceipt(ctx, domain.NewReceipt(d.Next, r)); err != nil {
				return err
			}
			if err := tx.AppendChanges(ctx, []domain.AllocationChanged{domain.NewAllocationChanged(d.Next)}, now); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-doneA:
		t.Fatalf("held transaction ended early: %v", err)
	}
	var committed atomic.Int32
	later := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := e.svc.SubmitReports(ctx, Site, []domain.Report{Report(fmt.Sprintf("later-%d", i), "pp1", 0)})
			if err == nil {
				committed.Add(1)
			}
			later <- err
		}()
	}
	// Each later transaction has either committed or is waiting behind the
	// held one.
	waitFor(t, "later transactions committed or blocked", func() bool {
		n, err := e.sub.LockWaits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int(committed.Load())+n >= 2
	})
	first, err := e.svc.Changes(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("while one transaction was held open, %d later transactions committed; the feed then held %d changes", committed.Load(), len(first.Changes))
	close(release)
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-later; err != nil {
			t.Fatal(err)
		}
	}
	rest, err := e.svc.Changes(ctx, first.Next, 100)
	if err != nil {
		t.Fatal(err)
	}
	all := append(first.Changes, rest.Changes...)
	got := map[string]int{}
	for _, c := range all {
		got[c.Event.ProviderResourceID]++
	}
	for _, r := range []string{"held", "later-0", "later-1"} {
		if got[r] != 1 {
			t.Fatalf("a subscriber reading the feed while one transaction was open, then after cursor %d, saw %s %d times: a late commit was skipped",
				first.Next, r, got[r])
		}
	}
	for i, c := range all {
		if c.Position != int64(i+1) {
			t.Fatalf("position %d at index %d: positions must be 1..n in commit order", c.Position, i)
		}
	}
}

// waitFor polls cond until it holds, failing after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
