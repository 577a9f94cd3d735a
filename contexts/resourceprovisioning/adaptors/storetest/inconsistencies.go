package storetest

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// inconsistencyTests are the suite's cases of the inconsistencies read
// (docs/resource-provisioning.md#the-inconsistencies-read); Exercise runs
// them with the others.
var inconsistencyTests = []testCase{
	{"InconsistenciesListChangingMissingAndStaleAllocationsButNoReadyOne", testInconsistentAllocations},
	{"InconsistenciesPageLikeTheSnapshot", testInconsistencyPaging},
	{"InconsistenciesListAmbiguousResourcesAndBindingConflicts", testInconsistentProjects},
}

// inconsistencies reads every page of the inconsistencies read, keyed by
// provider resource, and returns the first page's Project lists.
func (e *env) inconsistencies(t *testing.T, limit int) (map[string]application.AllocationInconsistency, application.InconsistencyPage, int) {
	t.Helper()
	out := map[string]application.AllocationInconsistency{}
	var first application.InconsistencyPage
	after, pages := "", 0
	for {
		p, err := e.svc.Inconsistencies(e.ctx, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if pages++; pages == 1 {
			first = p
			if !p.First {
				t.Fatal("the first page does not say so")
			}
		} else if p.First || p.AmbiguousResources != nil || p.BindingConflicts != nil {
			t.Fatalf("page %d carries the first page's lists: %+v", pages, p)
		}
		for _, ai := range p.Allocations {
			if _, dup := out[ai.Allocation.ProviderResourceID]; dup {
				t.Fatalf("%s listed twice", ai.Allocation.ProviderResourceID)
			}
			out[ai.Allocation.ProviderResourceID] = ai
		}
		if p.After == "" {
			return out, first, pages
		}
		after = p.After
	}
}

func testInconsistentAllocations(t *testing.T, e *env) {
	e.event(t, ProjectEvent("ev1", ProjectA, 1, Instance, "pp1", "pp2", "pp3", "pp4", "pp5", "pp6"))
	ready := Report("ready", "pp1", 0)
	changing := Report("changing", "pp2", 0)
	changing.Limits = domain.Limits{"cpu": 64000, "memory": 256 << 30}
	changing.AppliedLimits = domain.Limits{"cpu": 32000, "memory": 128 << 30}
	missing := Report("missing", "pp3", 0)
	missing.AppliedLimits = nil
	partial := Report("partial", "pp4", 0)
	delete(partial.AppliedLimits, "gpu.nvidia")
	suspended := Report("suspended", "pp5", 0)
	suspended.Paused = true
	suspended.AppliedLimits = domain.Limits{"cpu": 0, "memory": 0}
	retired := Report("retired", "pp6", 0)
	retired.State = domain.WaldurTerminated
	retired.AppliedLimits = nil
	e.submit(t, ready, changing, missing, partial, suspended, retired)

	got, _, _ := e.inconsistencies(t, 0)
	if v := e.one(t, "changing"); v.Lifecycle != domain.LifecycleChanging {
		t.Fatalf("the changing report reads %s", v.Lifecycle)
	}
	want := map[string][]string{
		"changing": {application.InconsistencyLimitsDiffer},
		"missing":  {application.InconsistencyLimitsNotApplied},
		"partial":  {application.InconsistencyLimitsDiffer, application.InconsistencyLimitsNotApplied},
	}
	if !maps.EqualFunc(kindsOf(got), want, slices.Equal[[]string]) {
		t.Fatalf("inconsistencies %v, want %v (a ready, a suspended and a retired allocation are never listed)", kindsOf(got), want)
	}
	c := got["changing"].Allocation
	if !domain.Limits(c.ConfiguredLimits).Equal(changing.Limits) || !domain.Limits(c.AppliedLimits).Equal(changing.AppliedLimits) {
		t.Fatalf("a changing allocation must carry both limit sets: configured %v applied %v", c.ConfiguredLimits, c.AppliedLimits)
	}
	if m := got["missing"].Allocation; m.AppliedLimits != nil || len(m.ConfiguredLimits) != 4 {
		t.Fatalf("missing applied limits: %+v", m)
	}

	// Past the freshness bound every allocation that can go stale is
	// listed, the ready one too; a renewal takes it off again.
	e.clock.Advance(15*time.Minute + time.Microsecond)
	got, _, _ = e.inconsistencies(t, 0)
	want = map[string][]string{
		"ready":    {application.InconsistencyStale},
		"changing": {application.InconsistencyLimitsDiffer, application.InconsistencyStale},
		"missing":  {application.InconsistencyLimitsNotApplied, application.InconsistencyStale},
		"partial":  {application.InconsistencyLimitsDiffer, application.InconsistencyLimitsNotApplied, application.InconsistencyStale},
	}
	if !maps.EqualFunc(kindsOf(got), want, slices.Equal[[]string]) {
		t.Fatalf("stale inconsistencies %v, want %v", kindsOf(got), want)
	}
	if v := got["ready"].Allocation; v.Fresh || v.Lifecycle != domain.LifecyclePending {
		t.Fatalf("a stale ready allocation reads %+v", v)
	}
	ready.ObservedAt = ready.ObservedAt.Add(16 * time.Minute)
	changing.ObservedAt = ready.ObservedAt
	changing.AppliedLimits = changing.Limits.Clone() // the Site applied the change
	e.submit(t, ready, changing)
	got, _, _ = e.inconsistencies(t, 0)
	if _, ok := got["ready"]; ok {
		t.Fatalf("a renewed ready allocation is still listed: %+v", got["ready"])
	}
	if _, ok := got["changing"]; ok {
		t.Fatalf("an allocation whose change was applied is still listed: %+v", got["changing"])
	}
}

func testInconsistencyPaging(t *testing.T, e *env) {
	var reports []domain.Report
	for i := range 7 {
		r := Report("r"+string(rune('a'+i)), "pp1", 0)
		if i%3 != 0 {
			r.AppliedLimits = nil // 4 of 7 lack applied limits
		}
		reports = append(reports, r)
	}
	e.submit(t, reports...)
	got, _, pages := e.inconsistencies(t, 3)
	if len(got) != 4 || pages != 2 {
		t.Fatalf("%d inconsistencies in %d pages of 3, want 4 in 2", len(got), pages)
	}
	// A full last page has no next cursor.
	if got, _, pages := e.inconsistencies(t, 2); len(got) != 4 || pages != 2 {
		t.Fatalf("%d inconsistencies in %d pages of 2, want 4 in 2", len(got), pages)
	}
	if _, err := e.svc.Inconsistencies(e.ctx, "not-an-id", 0); err == nil || !errorsIsUnknownCursor(err) {
		t.Fatalf("a forged cursor: %v", err)
	}
	if _, err := e.svc.Inconsistencies(e.ctx, "", application.MaxPageLimit+1); err == nil {
		t.Fatal("a limit beyond the maximum is accepted")
	}
}

func testInconsistentProjects(t *testing.T, e *env) {
	e.event(t, ProjectEvent("ev1", ProjectA, 1, Instance, "pp1", "pp2"))
	e.event(t, ProjectEvent("ev2", ProjectB, 1, Instance, "pp3"))
	e.event(t, ProjectEvent("ev3", ProjectX, 1, Instance, "pp3"))
	gone := Report("r3", "pp1", 0)
	gone.State = domain.WaldurTerminated
	e.submit(t, Report("r1", "pp1", 0), Report("r2", "pp2", 0), gone, Report("r4", "pp3", 0))
	got, first, _ := e.inconsistencies(t, 0)
	if len(got) != 0 {
		t.Fatalf("ready allocations listed: %v", kindsOf(got))
	}
	wantIDs := []string{domain.AllocationID(Site, "r1"), domain.AllocationID(Site, "r2")}
	slices.Sort(wantIDs)
	if len(first.AmbiguousResources) != 1 || first.AmbiguousResources[0].ProjectID != ProjectA || first.AmbiguousResources[0].Site != Site ||
		!slices.Equal(first.AmbiguousResources[0].AllocationIDs, wantIDs) {
		t.Fatalf("ambiguous resources %+v, want Project A at %s with %v (the retired allocation left out)", first.AmbiguousResources, Site, wantIDs)
	}
	if len(first.BindingConflicts) != 1 || first.BindingConflicts[0].ProviderProjectID != "pp3" ||
		!slices.Equal(first.BindingConflicts[0].ProjectIDs, []string{ProjectB, ProjectX}) {
		t.Fatalf("binding conflicts %+v", first.BindingConflicts)
	}
	// Retiring one of the two leaves Project A unambiguous.
	gone2 := Report("r2", "pp2", time.Minute)
	gone2.State = domain.WaldurTerminated
	e.submit(t, gone2)
	if _, first, _ := e.inconsistencies(t, 0); len(first.AmbiguousResources) != 0 {
		t.Fatalf("after a retirement: %+v", first.AmbiguousResources)
	}
}

func kindsOf(m map[string]application.AllocationInconsistency) map[string][]string {
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = v.Kinds
	}
	return out
}

func errorsIsUnknownCursor(err error) bool { return errors.Is(err, application.ErrUnknownCursor) }
