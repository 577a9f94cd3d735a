// Package storetest is the one conformance suite every Resource Provisioning
// store adaptor passes (SQLite in t.TempDir and real PostgreSQL): the report
// rules through the application service (material change, renewal,
// duplicate, stale, conflict, retirement, all-or-nothing batches), the Beto
// views, the reads (snapshot paging, change feed, freshness), concurrency
// without lost updates, a change feed that never skips a late commit, and
// ErrUnavailable when the database is gone.
//
// Rule source: docs/resource-provisioning.md.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
)

// Subject is one freshly migrated, empty store under test.
type Subject struct {
	Store application.Store
	// Receipts counts the stored receipts of an allocation.
	Receipts func(ctx context.Context, allocationID string) (int64, error)
	// LockWaits reports how many store transactions are waiting, or have
	// waited since the subject was made, for a lock another transaction
	// holds (PostgreSQL: backends of this database waiting on a lock;
	// SQLite: requests queued for the single write connection).
	LockWaits func(ctx context.Context) (int, error)
	// Break makes the database unreachable (closes it).
	Break func()
}

// Instance is the configured Waldur instance of the suite.
const Instance = "https://waldur.example.org"

// Site is the reporting Site of the suite.
const Site = "alpha"

// Canonical IDs of the suite (lower-case UUIDs, as Beto issues them).
const (
	ProjectA  = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	ProjectB  = "8b2f5d3c-2e4a-4b6c-8d9e-1f2a3b4c5d6e"
	ProjectX  = "9c3a6e4d-3f5b-4c7d-9eaf-2a3b4c5d6e7f"
	BindingID = "e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	PartyID   = "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"
)

// Exercise runs the conformance suite; newSubject makes a fresh store per
// subtest.
func Exercise(t *testing.T, newSubject func(t *testing.T) Subject) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"FirstReportCreatesRevisionOneWithReceiptAndChange", testCreate},
		{"MaterialChangeAddsRevisionReceiptAndChangeTogether", testMaterialChange},
		{"NewerUnchangedReportRenewsOnlyLastSeen", testRenewal},
		{"DuplicateReportMovesNothing", testDuplicate},
		{"OlderReportIsStaleAndChangesNothing", testStale},
		{"SameObservedAtWithOtherContentIsRefused", testSameObservedAtConflict},
		{"RetiredAllocationRefusesLaterNonRetiringReports", testRetired},
		{"BatchIsAppliedAllOrNothing", testBatchAllOrNothing},
		{"UnboundProjectResolvesOnlyByALaterReport", testProjectUnboundThenResolved},
		{"ProjectRebindingMovesTheProviderProject", testRebinding},
		{"TwoProjectsClaimingOneProviderProjectStayAVisibleConflict", testBindingConflict},
		{"ProjectOfAnotherWaldurInstanceIsIgnored", testOtherInstance},
		{"BetoEventReceiptsDeduplicateRefuseConflictsAndIgnoreOldRevisions", testEventReceipts},
		{"PartyBindingEventsFollowRevision", testPartyBindings},
		{"SnapshotPagesAreStableCompleteAndStartAtAChangesCursor", testSnapshot},
		{"ChangeFeedNeverSkipsAChangeThatCommitsLate", testFeedLateCommit},
		{"ConcurrentReportsForOneAllocationLoseNoUpdate", testConcurrentReports},
		{"ConcurrentFirstReportsOfOneResourceCreateOneAllocation", testConcurrentFirstReports},
		{"FreshnessIsComputedAtReadTime", testFreshness},
		{"ObservedAtIsStoredAndComparedToTheMicrosecond", testMicroseconds},
		{"ObservedAtBeyondTheClockSkewIsRefusedAndLocksNothing", testClockSkew},
		{"UnreachableDatabaseIsUnavailable", testUnavailable},
	}
	tests = append(tests, memberTests...)
	tests = append(tests, inconsistencyTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newEnv(t, newSubject(t)))
		})
	}
}

// T0 is the suite's start time.
var T0 = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)

type env struct {
	sub   Subject
	svc   *application.Service
	clock *clock.Manual
	reg   *prometheus.Registry
	ctx   context.Context
}

func newEnv(t *testing.T, sub Subject) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	tel, err := telemetry.New(zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(T0.Add(time.Minute))
	svc, err := application.NewService(sub.Store, clk, tel, application.Config{WaldurInstance: Instance, Freshness: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sub: sub, svc: svc, clock: clk, reg: reg, ctx: t.Context()}
}

// Report returns a ready report (OK, limits applied as configured) of
// resource in provider Project pp, observed at T0+offset.
func Report(resource, pp string, offset time.Duration) domain.Report {
	l := domain.Limits{"cpu": 32000, "memory": 128 << 30, "storage": 500 << 30, "gpu.nvidia": 2}
	return domain.Report{
		ProviderResourceID: resource, OfferingID: "offering-1", ProviderProjectID: pp, State: domain.WaldurOK,
		Limits: l, AppliedLimits: l.Clone(), NativeScope: "ns-" + resource, ObservedAt: T0.Add(offset),
	}
}

// ProjectEvent returns a ProjectChanged binding project to the Waldur
// Projects pps at instance.
func ProjectEvent(eventID, project string, revision int64, instance string, pps ...string) domain.BetoEvent {
	p := &domain.ProjectChanged{ID: project, Revision: revision, State: "active"}
	for _, pp := range pps {
		p.ProviderBindings = append(p.ProviderBindings, domain.ProviderBinding{Provider: domain.ProviderWaldur, Instance: instance, ExternalID: pp})
	}
	return domain.BetoEvent{EventID: eventID, Type: domain.EventProjectChanged, OccurredAt: T0, Project: p}
}

func (e *env) submit(t *testing.T, reports ...domain.Report) []application.ReportResult {
	t.Helper()
	res, err := e.svc.SubmitReports(e.ctx, Site, reports)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res
}

// refused submits reports, expects a conflict with reason and returns its
// refusals.
func (e *env) refused(t *testing.T, reason string, reports ...domain.Report) []domain.Refusal {
	t.Helper()
	_, err := e.svc.SubmitReports(e.ctx, Site, reports)
	var ce *domain.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("submit: got %v, want a conflict %s", err, reason)
	}
	if ce.Reason() != reason {
		t.Fatalf("reason %q, want %q (%v)", ce.Reason(), reason, ce)
	}
	return ce.Refusals
}

func (e *env) event(t *testing.T, ev domain.BetoEvent) string {
	t.Helper()
	res, err := e.svc.ReceiveBetoEvent(e.ctx, ev)
	if err != nil {
		t.Fatalf("event %s: %v", ev.EventID, err)
	}
	return res.Outcome
}

// all returns every allocation through the snapshot.
func (e *env) all(t *testing.T) map[string]application.AllocationView {
	t.Helper()
	out := map[string]application.AllocationView{}
	after := ""
	for {
		p, err := e.svc.Allocations(e.ctx, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range p.Allocations {
			out[v.ProviderResourceID] = v
		}
		if p.After == "" {
			return out
		}
		after = p.After
	}
}

func (e *env) one(t *testing.T, resource string) application.AllocationView {
	t.Helper()
	v, ok := e.all(t)[resource]
	if !ok {
		t.Fatalf("no allocation for %s", resource)
	}
	return v
}

func (e *env) changes(t *testing.T) []domain.Change {
	t.Helper()
	p, err := e.svc.Changes(e.ctx, 0, application.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return p.Changes
}

func (e *env) receipts(t *testing.T, allocationID string) int64 {
	t.Helper()
	n, err := e.sub.Receipts(e.ctx, allocationID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sameStorage asserts the stored state did not move: every allocation
// view, the feed and the receipts of the given allocations.
func (e *env) snapshot(t *testing.T) string {
	t.Helper()
	all := e.all(t)
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s := ""
	for _, k := range keys {
		v := all[k]
		s += fmt.Sprintf("%+v receipts=%d\n", v, e.receipts(t, v.ID))
	}
	return s + fmt.Sprintf("changes=%+v", e.changes(t))
}

func testCreate(t *testing.T, e *env) {
	res := e.submit(t, Report("r1", "pp1", 0))
	want := domain.AllocationID(Site, "r1")
	if res[0].Outcome != domain.OutcomeCreated || res[0].Revision != 1 || res[0].AllocationID != want {
		t.Fatalf("result %+v", res[0])
	}
	v := e.one(t, "r1")
	if v.ID != want || v.Revision != 1 || v.Site != Site || v.LastSeenAt != e.clock.Now() || !v.ObservedAt.Equal(T0) {
		t.Fatalf("view %+v", v)
	}
	if v.Lifecycle != domain.LifecyclePending || !slices.Equal(v.Reasons, []string{domain.PendingProjectUnbound}) {
		t.Fatalf("an unbound Project must read pending/project_unbound, got %s %v", v.Lifecycle, v.Reasons)
	}
	if n := e.receipts(t, want); n != 1 {
		t.Fatalf("receipts %d, want 1", n)
	}
	cs := e.changes(t)
	if len(cs) != 1 || cs[0].Position != 1 || cs[0].Event.AllocationID != want || cs[0].Event.Revision != 1 {
		t.Fatalf("changes %+v", cs)
	}
}

func testMaterialChange(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	r := Report("r1", "pp1", time.Second)
	r.Limits = domain.Limits{"cpu": 64000, "memory": 256 << 30, "storage": 500 << 30, "gpu.nvidia": 2}
	e.clock.Advance(time.Second)
	res := e.submit(t, r)
	if res[0].Outcome != domain.OutcomeChanged || res[0].Revision != 2 || res[0].Lifecycle != domain.LifecyclePending {
		t.Fatalf("result %+v", res[0])
	}
	v := e.one(t, "r1")
	if v.ConfiguredLimits["cpu"] != 64000 || v.AppliedLimits["cpu"] != 32000 {
		t.Fatalf("limits %v / %v", v.ConfiguredLimits, v.AppliedLimits)
	}
	if n := e.receipts(t, v.ID); n != 2 {
		t.Fatalf("receipts %d, want 2", n)
	}
	cs := e.changes(t)
	if len(cs) != 2 || cs[1].Event.Revision != 2 || cs[1].Event.ConfiguredLimits["cpu"] != 64000 {
		t.Fatalf("changes %+v", cs)
	}
}

func testRenewal(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	before := e.one(t, "r1")
	e.clock.Advance(5 * time.Minute)
	res := e.submit(t, Report("r1", "pp1", 5*time.Minute))
	if res[0].Outcome != domain.OutcomeRenewed || res[0].Revision != 1 {
		t.Fatalf("result %+v", res[0])
	}
	after := e.one(t, "r1")
	if !after.LastSeenAt.Equal(e.clock.Now()) || after.LastSeenAt.Equal(before.LastSeenAt) {
		t.Fatalf("last_seen_at %s, want the receipt time %s", after.LastSeenAt, e.clock.Now())
	}
	after.LastSeenAt, after.ObservedAt = before.LastSeenAt, before.ObservedAt
	if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", before) {
		t.Fatalf("a renewal moved facts:\n%+v\n%+v", before, after)
	}
	if n := e.receipts(t, before.ID); n != 1 {
		t.Fatalf("receipts %d, want 1 (a renewal writes none)", n)
	}
	if cs := e.changes(t); len(cs) != 1 {
		t.Fatalf("changes %d, want 1 (a renewal writes none)", len(cs))
	}
}

func testDuplicate(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	e.clock.Advance(time.Minute)
	e.submit(t, Report("r1", "pp1", time.Minute))
	before := e.snapshot(t)
	e.clock.Advance(time.Minute)
	res := e.submit(t, Report("r1", "pp1", time.Minute))
	if res[0].Outcome != domain.OutcomeDuplicate || res[0].Revision != 1 {
		t.Fatalf("result %+v", res[0])
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a duplicate moved state:\n%s\n%s", before, after)
	}
}

func testStale(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", time.Minute))
	before := e.snapshot(t)
	e.clock.Advance(time.Minute)
	r := Report("r1", "pp1", 0)
	r.Paused = true
	if refusals := e.refused(t, domain.ReasonStaleReport, r); refusals[0].Location != "body.reports[0]" {
		t.Fatalf("location %q", refusals[0].Location)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a stale report moved state:\n%s\n%s", before, after)
	}
}

func testSameObservedAtConflict(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	before := e.snapshot(t)
	r := Report("r1", "pp1", 0)
	r.NativeScope = "another"
	e.refused(t, domain.ReasonReportConflict, r)
	if after := e.snapshot(t); after != before {
		t.Fatalf("a conflicting report moved state")
	}
}

func testRetired(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", 0))
	gone := Report("r1", "pp1", time.Minute)
	gone.State = domain.WaldurTerminated
	gone.AppliedLimits = nil
	res := e.submit(t, gone)
	if res[0].Outcome != domain.OutcomeChanged || res[0].Lifecycle != domain.LifecycleRetired {
		t.Fatalf("result %+v", res[0])
	}
	before := e.snapshot(t)
	e.refused(t, domain.ReasonAllocationRetired, Report("r1", "pp1", 2*time.Minute))
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused report moved a tombstone")
	}
	again := gone
	again.ObservedAt = T0.Add(3 * time.Minute)
	if res := e.submit(t, again); res[0].Outcome != domain.OutcomeRenewed || res[0].Lifecycle != domain.LifecycleRetired {
		t.Fatalf("a later Terminated report must renew the tombstone: %+v", res[0])
	}
}

func testBatchAllOrNothing(t *testing.T, e *env) {
	e.submit(t, Report("r1", "pp1", time.Minute))
	before := e.snapshot(t)
	refusals := e.refused(t, domain.ReasonStaleReport, Report("r2", "pp1", 0), Report("r3", "pp1", 0), Report("r1", "pp1", 0))
	if len(refusals) != 1 || refusals[0].Location != "body.reports[2]" {
		t.Fatalf("refusals %+v", refusals)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused batch stored part of itself:\n%s\n%s", before, after)
	}
	res := e.submit(t, Report("r2", "pp1", 0), Report("r3", "pp1", 0), Report("r2", "pp1", time.Second))
	if res[0].Outcome != domain.OutcomeCreated || res[1].Outcome != domain.OutcomeCreated || res[2].Outcome != domain.OutcomeRenewed {
		t.Fatalf("results %+v", res)
	}
	if cs := e.changes(t); len(cs) != 3 {
		t.Fatalf("changes %d, want 3", len(cs))
	}
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

// invalid submits reports, expects a validation error with a problem at
// location and returns it.
func (e *env) invalid(t *testing.T, location string, reports ...domain.Report) domain.Problem {
	t.Helper()
	_, err := e.svc.SubmitReports(e.ctx, Site, reports)
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("submit: got %v, want a validation error at %s", err, location)
	}
	for _, p := range ve.Problems {
		if p.Location == location {
			return p
		}
	}
	t.Fatalf("no problem at %s: %v", location, ve)
	return domain.Problem{}
}

// testMicroseconds: both engines keep observed_at and last_seen_at to the
// microsecond, so reports one microsecond apart are ordered, an equal one
// is a duplicate, and a finer time is refused rather than rounded into a
// false duplicate or conflict.
func testMicroseconds(t *testing.T, e *env) {
	e.clock.Advance(1500 * time.Nanosecond) // a server clock finer than storage
	e.submit(t, Report("r1", "pp1", time.Microsecond))
	v := e.one(t, "r1")
	if !v.ObservedAt.Equal(T0.Add(time.Microsecond)) || !v.LastSeenAt.Equal(e.clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("stored observed_at %s last_seen_at %s, want %s and %s", v.ObservedAt.Format(time.RFC3339Nano),
			v.LastSeenAt.Format(time.RFC3339Nano), T0.Add(time.Microsecond).Format(time.RFC3339Nano), e.clock.Now().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	}
	before := e.snapshot(t)
	fine := Report("r1", "pp1", 2*time.Microsecond+500*time.Nanosecond)
	if p := e.invalid(t, "body.reports[0].observed_at", fine); !strings.Contains(p.Message, "microsecond") {
		t.Fatalf("problem %+v", p)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused report moved state:\n%s\n%s", before, after)
	}
	if res := e.submit(t, Report("r1", "pp1", time.Microsecond)); res[0].Outcome != domain.OutcomeDuplicate {
		t.Fatalf("the same observed_at read back must be a duplicate: %+v", res[0])
	}
	e.clock.Advance(time.Microsecond)
	if res := e.submit(t, Report("r1", "pp1", 2*time.Microsecond)); res[0].Outcome != domain.OutcomeRenewed {
		t.Fatalf("a report one microsecond newer must renew: %+v", res[0])
	}
	if v := e.one(t, "r1"); !v.ObservedAt.Equal(T0.Add(2 * time.Microsecond)) {
		t.Fatalf("observed_at %s after the renewal", v.ObservedAt.Format(time.RFC3339Nano))
	}
	e.refused(t, domain.ReasonStaleReport, Report("r1", "pp1", time.Microsecond))
	other := Report("r1", "pp1", 2*time.Microsecond)
	other.Paused = true
	e.refused(t, domain.ReasonReportConflict, other)
}

// testClockSkew: an observed_at further than the skew (default 5 minutes)
// beyond the server clock is refused, so a later correct report is still
// accepted; exactly at the bound is accepted.
func testClockSkew(t *testing.T, e *env) {
	now := e.clock.Now()
	future := Report("r1", "pp1", now.Sub(T0)+application.DefaultClockSkew+time.Microsecond)
	if p := e.invalid(t, "body.reports[1].observed_at", Report("r2", "pp1", 0), future); !strings.Contains(p.Message, "clock skew") {
		t.Fatalf("problem %+v", p)
	}
	if all := e.all(t); len(all) != 0 {
		t.Fatalf("a refused batch stored %d allocations", len(all))
	}
	if res := e.submit(t, Report("r1", "pp1", 0)); res[0].Outcome != domain.OutcomeCreated {
		t.Fatalf("a correct report after the refused one: %+v", res[0])
	}
	edge := Report("r1", "pp1", now.Sub(T0)+application.DefaultClockSkew)
	if res := e.submit(t, edge); res[0].Outcome != domain.OutcomeRenewed {
		t.Fatalf("a report exactly at the skew bound: %+v", res[0])
	}
}
