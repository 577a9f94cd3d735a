package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// reportTests are the report intake lifecycle: revisions, receipts, changes and refusals (docs/resource-provisioning.md#report-intake).
var reportTests = []testCase{
	{"FirstReportCreatesRevisionOneWithReceiptAndChange", testCreate},
	{"MaterialChangeAddsRevisionReceiptAndChangeTogether", testMaterialChange},
	{"NewerUnchangedReportRenewsOnlyLastSeen", testRenewal},
	{"DuplicateReportMovesNothing", testDuplicate},
	{"OlderReportIsStaleAndChangesNothing", testStale},
	{"SameObservedAtWithOtherContentIsRefused", testSameObservedAtConflict},
	{"RetiredAllocationRefusesLaterNonRetiringReports", testRetired},
	{"BatchIsAppliedAllOrNothing", testBatchAllOrNothing},
	{"ObservedAtIsStoredAndComparedToTheMicrosecond", testMicroseconds},
	{"ObservedAtBeyondTheClockSkewIsRefusedAndLocksNothing", testClockSkew},
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
