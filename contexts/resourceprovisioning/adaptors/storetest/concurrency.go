package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// concurrencyTests race agents reporting the same allocation or resource.
var concurrencyTests = []testCase{
	{"ConcurrentReportsForOneAllocationLoseNoUpdate", testConcurrentReports},
	{"ConcurrentFirstReportsOfOneResourceCreateOneAllocation", testConcurrentFirstReports},
}

func testConcurrentReports(t *testing.T, e *env) {
	const agents, steps = 16, 6
	var (
		mu       sync.Mutex
		material int64
		wg       sync.WaitGroup
		failures []error
	)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range steps {
				n := s*agents + a
				r := Report("shared", "pp1", time.Duration(n)*time.Millisecond)
				r.AppliedLimits["cpu"] = int64(n%3) * 1000
				res, err := e.svc.SubmitReports(e.ctx, Site, []domain.Report{r})
				var ce *domain.ConflictError
				mu.Lock()
				switch {
				case err == nil && (res[0].Outcome == domain.OutcomeCreated || res[0].Outcome == domain.OutcomeChanged):
					material++
				case err == nil, errors.As(err, &ce) && ce.Reason() == domain.ReasonStaleReport:
				default:
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("unexpected errors: %v", failures)
	}
	v := e.one(t, "shared")
	if v.Revision != material {
		t.Fatalf("revision %d, but %d reports were answered created/changed: a lost update", v.Revision, material)
	}
	if n := e.receipts(t, v.ID); n != material {
		t.Fatalf("receipts %d, want %d", n, material)
	}
	var revs []int64
	for _, c := range e.changes(t) {
		revs = append(revs, c.Event.Revision)
	}
	for i, r := range revs {
		if r != int64(i+1) {
			t.Fatalf("feed revisions %v are not 1..%d in order", revs, material)
		}
	}
	if int64(len(revs)) != material {
		t.Fatalf("feed has %d changes, want %d", len(revs), material)
	}
}

// FirstReportPairs is how many pairs of concurrent first reports
// testConcurrentFirstReports races.
const FirstReportPairs = 200

// testConcurrentFirstReports races pairs of first reports of one new
// resource (two agents reporting it at the same moment): the same report,
// the same observed_at with other content, or a later one. Neither may
// fail: one creates the allocation, the other is decided against it by
// the usual rules (duplicate, report_conflict, changed or stale_report),
// and each resource has exactly one allocation with one receipt per
// material change (docs/resource-provisioning.md#report-intake).
func testConcurrentFirstReports(t *testing.T, e *env) {
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		failures []string
	)
	for i := range FirstReportPairs {
		resource := fmt.Sprintf("race-%d", i)
		pair := [2]domain.Report{Report(resource, "pp1", 0), Report(resource, "pp1", 0)}
		switch i % 3 {
		case 1:
			pair[1].AppliedLimits["cpu"] = 1000
		case 2:
			pair[1] = Report(resource, "pp1", time.Second)
			pair[1].AppliedLimits["cpu"] = 1000
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for a := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := e.svc.SubmitReports(e.ctx, Site, []domain.Report{pair[a]})
				var ce *domain.ConflictError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					outcomes[res[0].Outcome]++
				case errors.As(err, &ce):
					outcomes[ce.Reason()]++
				default:
					failures = append(failures, fmt.Sprintf("pair %d agent %d: %v", i, a, err))
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d concurrent first reports failed (each must get an outcome or a refusal): %s", len(failures), 2*FirstReportPairs, strings.Join(failures, "; "))
	}
	if outcomes[domain.OutcomeCreated] != FirstReportPairs {
		t.Fatalf("outcomes %v: want exactly one created per resource (%d)", outcomes, FirstReportPairs)
	}
	all := e.all(t)
	if len(all) != FirstReportPairs {
		t.Fatalf("%d allocations, want %d", len(all), FirstReportPairs)
	}
	material := int64(0)
	for _, v := range all {
		material += v.Revision
		if n := e.receipts(t, v.ID); n != v.Revision {
			t.Fatalf("allocation %s at revision %d has %d receipts", v.ProviderResourceID, v.Revision, n)
		}
	}
	if got := int64(len(e.changes(t))); got != material {
		t.Fatalf("feed has %d changes, want %d (one per revision)", got, material)
	}
	t.Logf("%d pairs of concurrent first reports: %v", FirstReportPairs, outcomes)
}
