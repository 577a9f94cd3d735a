package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// projectTests are Beto's events: project and party bindings, their conflicts and the event receipts.
var projectTests = []testCase{
	{"UnboundProjectResolvesOnlyByALaterReport", testProjectUnboundThenResolved},
	{"ProjectRebindingMovesTheProviderProject", testRebinding},
	{"TwoProjectsClaimingOneProviderProjectStayAVisibleConflict", testBindingConflict},
	{"ProjectOfAnotherWaldurInstanceIsIgnored", testOtherInstance},
	{"BetoEventReceiptsDeduplicateRefuseConflictsAndIgnoreOldRevisions", testEventReceipts},
	{"PartyBindingEventsFollowRevision", testPartyBindings},
}

func testProjectUnboundThenResolved(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	if e.event(t, ProjectEvent("ev1", ProjectA, 1, Instance, "pp1")) != domain.EventApplied {
		t.Fatal("event not applied")
	}
	v := e.one(t, "r1")
	if v.ProjectID != "" || v.Lifecycle != domain.LifecyclePending || v.Revision != 1 {
		t.Fatalf("an event must not rewrite allocations: %+v", v)
	}
	if got, _ := e.svc.ProjectAllocations(e.ctx, ProjectA, Site); len(got) != 0 {
		t.Fatalf("project-a has %d allocations before a report resolves it", len(got))
	}
	e.clock.Advance(time.Minute)
	res := e.submit(t, Report("r1", "pp1", time.Minute))
	if res[0].Outcome != domain.OutcomeChanged || res[0].Revision != 2 || res[0].Lifecycle != domain.LifecycleReady {
		t.Fatalf("unchanged content that resolves the Project is material: %+v", res[0])
	}
	got, err := e.svc.ProjectAllocations(e.ctx, ProjectA, Site)
	if err != nil || len(got) != 1 || got[0].ProjectID != ProjectA || got[0].Lifecycle != domain.LifecycleReady || !got[0].Fresh {
		t.Fatalf("project allocations %+v, %v", got, err)
	}
	if other, _ := e.svc.ProjectAllocations(e.ctx, ProjectA, "beta"); len(other) != 0 {
		t.Fatalf("site filter ignored: %+v", other)
	}
}

func testRebinding(t *testing.T, e *env) {
	e.event(t, ProjectEvent("ev1", ProjectA, 1, Instance, "pp1"))
	e.submit(t, Report("r1", "pp1", 0), Report("r2", "pp2", 0))
	e.event(t, ProjectEvent("ev2", ProjectA, 2, Instance, "pp2"))
	e.submit(t, Report("r1", "pp1", time.Minute), Report("r2", "pp2", time.Minute))
	all := e.all(t)
	if all["r1"].ProjectID != "" || all["r2"].ProjectID != ProjectA {
		t.Fatalf("after rebinding pp1→pp2: r1 %q, r2 %q", all["r1"].ProjectID, all["r2"].ProjectID)
	}
}

func testBindingConflict(t *testing.T, e *env) {
	e.event(t, ProjectEvent("ev1", ProjectA, 1, Instance, "pp1"))
	e.event(t, ProjectEvent("ev2", ProjectB, 1, Instance, "pp1"))
	cs, err := e.svc.BindingConflicts(e.ctx)
	if err != nil || len(cs) != 1 || cs[0].ProviderProjectID != "pp1" || !slices.Equal(cs[0].ProjectIDs, []string{ProjectA, ProjectB}) {
		t.Fatalf("conflicts %+v, %v", cs, err)
	}
	if n := metric(t, e.reg, telemetry.BindingConflictsMetric); n != 1 {
		t.Fatalf("binding conflict counter %v, want 1", n)
	}
	e.submit(t, Report("r1", "pp1", 0))
	if v := e.one(t, "r1"); v.ProjectID != "" || !slices.Contains(v.Reasons, domain.PendingProjectUnbound) {
		t.Fatalf("a conflicted provider Project must stay project_unbound: %+v", v)
	}
	e.event(t, ProjectEvent("ev3", ProjectB, 2, Instance, "pp9"))
	if cs, _ := e.svc.BindingConflicts(e.ctx); len(cs) != 0 {
		t.Fatalf("conflict not cleared after rebinding: %+v", cs)
	}
	e.submit(t, Report("r1", "pp1", time.Minute))
	if v := e.one(t, "r1"); v.ProjectID != ProjectA {
		t.Fatalf("after the conflict cleared a later report resolves: %+v", v)
	}
}

func testOtherInstance(t *testing.T, e *env) {
	e.event(t, ProjectEvent("ev1", ProjectX, 1, "https://waldur.other.example", "pp1"))
	e.submit(t, Report("r1", "pp1", 0))
	if v := e.one(t, "r1"); v.ProjectID != "" {
		t.Fatalf("a binding of another instance resolved: %+v", v)
	}
	e.event(t, ProjectEvent("ev2", ProjectA, 1, Instance, "pp1"))
	e.submit(t, Report("r1", "pp1", time.Minute))
	if v := e.one(t, "r1"); v.ProjectID != ProjectA {
		t.Fatalf("the configured instance's binding must resolve alone: %+v", v)
	}
	if cs, _ := e.svc.BindingConflicts(e.ctx); len(cs) != 0 {
		t.Fatalf("bindings at different instances are not a conflict: %+v", cs)
	}
}

func testEventReceipts(t *testing.T, e *env) {
	ev := ProjectEvent("ev1", ProjectA, 3, Instance, "pp1")
	if got := e.event(t, ev); got != domain.EventApplied {
		t.Fatalf("first %s", got)
	}
	if got := e.event(t, ev); got != domain.EventDuplicate {
		t.Fatalf("identical duplicate %s", got)
	}
	other := ProjectEvent("ev1", ProjectA, 3, Instance, "pp2")
	_, err := e.svc.ReceiveBetoEvent(e.ctx, other)
	var ce *domain.ConflictError
	if !errors.As(err, &ce) || ce.Reason() != domain.ReasonEventConflict {
		t.Fatalf("same id other content: %v", err)
	}
	if n := metric(t, e.reg, telemetry.EventConflictsMetric); n != 1 {
		t.Fatalf("event conflict counter %v, want 1", n)
	}
	for _, old := range []domain.BetoEvent{
		ProjectEvent("ev0", ProjectA, 2, Instance, "pp7"),
		ProjectEvent("ev2", ProjectA, 3, Instance, "pp8"),
	} {
		if got := e.event(t, old); got != domain.EventIgnored {
			t.Fatalf("older/equal revision %s: %s", old.EventID, got)
		}
		if got := e.event(t, old); got != domain.EventDuplicate {
			t.Fatalf("an ignored event is still recorded as received: %s", got)
		}
	}
	e.submit(t, Report("r1", "pp1", 0), Report("r7", "pp7", 0))
	all := e.all(t)
	if all["r1"].ProjectID != ProjectA || all["r7"].ProjectID != "" {
		t.Fatalf("older revisions must not move the view: r1 %q r7 %q", all["r1"].ProjectID, all["r7"].ProjectID)
	}
}

func testPartyBindings(t *testing.T, e *env) {
	ev := func(id string, rev int64, ext string) domain.BetoEvent {
		return domain.BetoEvent{EventID: id, Type: domain.EventPartyProviderBindingChanged, OccurredAt: T0, Binding: &domain.PartyProviderBinding{
			ID: BindingID, PartyID: PartyID, Revision: rev, Provider: "site", Instance: "alpha-k8s", ExternalID: ext, State: "verified", Generation: 1,
		}}
	}
	for _, step := range []struct {
		ev   domain.BetoEvent
		want string
	}{
		{ev("p1", 2, "alice"), domain.EventApplied},
		{ev("p1", 2, "alice"), domain.EventDuplicate},
		{ev("p0", 1, "old-name"), domain.EventIgnored},
		{ev("p2", 3, "alice2"), domain.EventApplied},
	} {
		if got := e.event(t, step.ev); got != step.want {
			t.Fatalf("%s: %s, want %s", step.ev.EventID, got, step.want)
		}
	}
	if _, err := e.svc.ReceiveBetoEvent(e.ctx, ev("p2", 3, "bob")); err == nil {
		t.Fatal("same event_id, other content: accepted")
	}
}

// metric returns the value of the counter name in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
