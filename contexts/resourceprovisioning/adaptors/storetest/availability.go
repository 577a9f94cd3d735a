package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// availabilityTests are freshness computed at read time and a database that is gone.
var availabilityTests = []testCase{
	{"FreshnessIsComputedAtReadTime", testFreshness},
	{"UnreachableDatabaseIsUnavailable", testUnavailable},
}

func testFreshness(t *testing.T, e *env) {
	e.event(t, ProjectEvent("ev1", ProjectA, 1, Instance, "pp1"))
	gone := Report("r2", "pp1", 0)
	gone.State = domain.WaldurTerminated
	e.submit(t, Report("r1", "pp1", 0), gone)
	e.clock.Advance(15 * time.Minute)
	byResource := func() map[string]application.AllocationView {
		got, err := e.svc.ProjectAllocations(e.ctx, ProjectA, "")
		if err != nil || len(got) != 2 {
			t.Fatalf("project allocations %+v, %v", got, err)
		}
		return map[string]application.AllocationView{got[0].ProviderResourceID: got[0], got[1].ProviderResourceID: got[1]}
	}
	if v := byResource()["r1"]; !v.Fresh || v.Lifecycle != domain.LifecycleReady {
		t.Fatalf("at exactly the bound an allocation is fresh: %+v", v)
	}
	e.clock.Advance(time.Microsecond)
	byID := byResource()
	if v := byID["r1"]; v.Fresh || v.Lifecycle != domain.LifecyclePending || !slices.Equal(v.Reasons, []string{domain.PendingStale}) {
		t.Fatalf("a stale ready allocation must read pending/stale: %+v", v)
	}
	if v := byID["r2"]; v.Fresh || v.Lifecycle != domain.LifecycleRetired {
		t.Fatalf("a stale tombstone stays retired: %+v", v)
	}
	e.submit(t, Report("r1", "pp1", 16*time.Minute))
	if v := e.one(t, "r1"); !v.Fresh || v.Lifecycle != domain.LifecycleReady || v.Revision != 1 {
		t.Fatalf("a renewal makes it fresh again without a revision: %+v", v)
	}
}

func testUnavailable(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	e.sub.Break()
	if _, err := e.svc.ProjectAllocations(e.ctx, ProjectA, ""); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("read: %v, want ErrUnavailable", err)
	}
	if _, err := e.svc.SubmitReports(e.ctx, Site, []domain.Report{Report("r1", "pp1", time.Minute)}); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("write: %v, want ErrUnavailable", err)
	}
	if err := e.svc.Ping(e.ctx); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("ping: %v, want ErrUnavailable", err)
	}
}
