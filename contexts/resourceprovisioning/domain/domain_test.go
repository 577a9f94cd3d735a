package domain_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

var t0 = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)

func report(mod func(*domain.Report)) domain.Report {
	l := domain.Limits{"cpu": 8000, "memory": 16 << 30}
	r := domain.Report{
		ProviderResourceID: "res", OfferingID: "off", ProviderProjectID: "pp", State: domain.WaldurOK,
		Limits: l, AppliedLimits: l.Clone(), NativeScope: "ns", ObservedAt: t0,
	}
	if mod != nil {
		mod(&r)
	}
	return r
}

func TestAllocationIDIsUUIDv5OfSiteAndResourceUnderTheFixedNamespace(t *testing.T) {
	ns := uuid.MustParse(domain.AllocationNamespace)
	for _, c := range [][2]string{{"alpha", "3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"}, {"beta", "x"}, {"a", "b/c"}} {
		want := uuid.NewSHA1(ns, []byte(c[0]+"/"+c[1])).String()
		if got := domain.AllocationID(c[0], c[1]); got != want {
			t.Errorf("AllocationID(%q, %q) = %s, want %s", c[0], c[1], got, want)
		}
	}
	if domain.AllocationID("alpha", "r") == domain.AllocationID("beta", "r") {
		t.Error("the Site is part of the ID")
	}
}

func TestLifecycleFollowsWaldurStateAndPrecedence(t *testing.T) {
	tests := []struct {
		name      string
		mod       func(*domain.Report)
		project   string
		lifecycle string
		reasons   []string
	}{
		{"ok and applied is ready", nil, "p", domain.LifecycleReady, nil},
		{"updating with applied equal is ready", func(r *domain.Report) { r.State = domain.WaldurUpdating }, "p", domain.LifecycleReady, nil},
		{"creating is pending provisioning", func(r *domain.Report) { r.State = domain.WaldurCreating }, "p", domain.LifecyclePending, []string{"provisioning"}},
		{"erred is pending provider_error", func(r *domain.Report) { r.State = domain.WaldurErred }, "p", domain.LifecyclePending, []string{"provider_error"}},
		{"terminating is pending terminating", func(r *domain.Report) { r.State = domain.WaldurTerminating }, "p", domain.LifecyclePending, []string{"terminating"}},
		{"terminated is retired", func(r *domain.Report) { r.State = domain.WaldurTerminated }, "p", domain.LifecycleRetired, nil},
		{"paused is suspended", func(r *domain.Report) { r.Paused = true }, "p", domain.LifecycleSuspended, nil},
		{"no applied limits is limits_not_applied", func(r *domain.Report) { r.AppliedLimits = nil }, "p", domain.LifecyclePending, []string{"limits_not_applied"}},
		{"a configured key missing from applied is limits_not_applied", func(r *domain.Report) { delete(r.AppliedLimits, "memory") }, "p", domain.LifecyclePending, []string{"limits_not_applied"}},
		{"unresolved project is project_unbound", nil, "", domain.LifecyclePending, []string{"project_unbound"}},
		{"configured differs from applied is changing", func(r *domain.Report) { r.Limits = domain.Limits{"cpu": 16000, "memory": 16 << 30} }, "p", domain.LifecycleChanging, nil},
		{"an applied key not configured is changing", func(r *domain.Report) { r.AppliedLimits["gpu.nvidia"] = 1 }, "p", domain.LifecycleChanging, nil},
		{"creating without quota lists both reasons in order", func(r *domain.Report) { r.State = domain.WaldurCreating; r.AppliedLimits = nil }, "", domain.LifecyclePending, []string{"provisioning", "limits_not_applied", "project_unbound"}},
		{"retired beats suspended", func(r *domain.Report) { r.State = domain.WaldurTerminated; r.Paused = true }, "p", domain.LifecycleRetired, nil},
		{"suspended beats pending", func(r *domain.Report) { r.Paused = true; r.State = domain.WaldurErred }, "", domain.LifecycleSuspended, nil},
		{"pending beats changing", func(r *domain.Report) { r.Limits = domain.Limits{"cpu": 16000, "memory": 16 << 30} }, "", domain.LifecyclePending, []string{"project_unbound"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := domain.Derive(report(tc.mod), tc.project)
			if f.Lifecycle != tc.lifecycle || !slices.Equal(f.Reasons, append([]string{}, tc.reasons...)) {
				t.Fatalf("got %s %v, want %s %v", f.Lifecycle, f.Reasons, tc.lifecycle, tc.reasons)
			}
		})
	}
}

func TestChangingKeepsThePreviousAppliedLimitsInForce(t *testing.T) {
	r := report(func(r *domain.Report) { r.Limits = domain.Limits{"cpu": 64000, "memory": 16 << 30} })
	f := domain.Derive(r, "p")
	if f.Lifecycle != domain.LifecycleChanging || f.Applied["cpu"] != 8000 || f.Configured["cpu"] != 64000 {
		t.Fatalf("%+v", f)
	}
}

func TestLimitKeysAreExactlyCanonicalAndNonNegative(t *testing.T) {
	ok := domain.Limits{"cpu": 0, "memory": 1, "storage": 2, "gpu.nvidia": 1, "gpu.amd": 2, "gpu.intel-gaudi": 3}
	if p := ok.Validate("l"); len(p) != 0 {
		t.Fatalf("valid keys refused: %+v", p)
	}
	for _, key := range []string{"ram", "cpu_cores", "CPU", "gpu", "gpu.", "gpu.NVIDIA", "nvidia.com/gpu", "memory.bytes", "gpu.nvidia.a100", ""} {
		p := domain.Limits{key: 1}.Validate("body.reports[0].limits")
		if len(p) != 1 || p[0].Location != "body.reports[0].limits."+key || !strings.Contains(p[0].Message, "unknown limit key") {
			t.Errorf("key %q: %+v", key, p)
		}
	}
	p := domain.Limits{"cpu": -1}.Validate("l")
	if len(p) != 1 || !strings.Contains(p[0].Message, "negative") || p[0].Location != "l.cpu" {
		t.Errorf("negative: %+v", p)
	}
}

func TestReportValidationNamesEveryLocation(t *testing.T) {
	r := domain.Report{State: "Running", Limits: domain.Limits{"ram": 1}, AppliedLimits: domain.Limits{"cpu": -5}}
	var locs []string
	for _, p := range r.Validate("body.reports[1]") {
		locs = append(locs, p.Location)
	}
	want := []string{
		"body.reports[1].provider_resource_id", "body.reports[1].offering_id", "body.reports[1].provider_project_id",
		"body.reports[1].state", "body.reports[1].limits.ram", "body.reports[1].applied_limits.cpu", "body.reports[1].observed_at",
	}
	if !slices.Equal(locs, want) {
		t.Fatalf("locations %v, want %v", locs, want)
	}
}

func TestIdentifiersRefuseControlCharactersAndInvalidUTF8(t *testing.T) {
	for _, id := range []string{"a\x00b", "tab\there", "\xff\xfe", strings.Repeat("x", 257)} {
		r := report(func(r *domain.Report) { r.ProviderResourceID = id })
		if p := r.Validate("r"); len(p) != 1 || p[0].Location != "r.provider_resource_id" {
			t.Errorf("%q: %+v", id, p)
		}
	}
}

func TestDecideRules(t *testing.T) {
	now := t0.Add(time.Hour)
	created, ref := domain.Decide(nil, "alpha", report(nil), "p", now)
	if ref != nil || created.Outcome != domain.OutcomeCreated || created.Next.Revision != 1 || !created.Next.LastSeenAt.Equal(now) {
		t.Fatalf("create: %+v %v", created, ref)
	}
	cur := created.Next
	tests := []struct {
		name     string
		r        domain.Report
		project  string
		outcome  string
		reason   string
		revision int64
	}{
		{"older observed_at is stale", report(func(r *domain.Report) { r.ObservedAt = t0.Add(-time.Second) }), "p", "", domain.ReasonStaleReport, 0},
		{"same observed_at same content is a duplicate", report(nil), "p", domain.OutcomeDuplicate, "", 1},
		{"same observed_at other content is a conflict", report(func(r *domain.Report) { r.NativeScope = "other" }), "p", "", domain.ReasonReportConflict, 0},
		{"same observed_at same content but now resolvable is still a duplicate", report(nil), "q", domain.OutcomeDuplicate, "", 1},
		{"newer unchanged is a renewal", report(func(r *domain.Report) { r.ObservedAt = t0.Add(time.Minute) }), "p", domain.OutcomeRenewed, "", 1},
		{"newer changed is a change", report(func(r *domain.Report) { r.ObservedAt = t0.Add(time.Minute); r.Paused = true }), "p", domain.OutcomeChanged, "", 2},
		{"newer with a newly resolved project is a change", report(func(r *domain.Report) { r.ObservedAt = t0.Add(time.Minute) }), "q", domain.OutcomeChanged, "", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ref := domain.Decide(&cur, "alpha", tc.r, tc.project, now.Add(time.Minute))
			if tc.reason != "" {
				if ref == nil || ref.Reason != tc.reason {
					t.Fatalf("refusal %+v, want %s", ref, tc.reason)
				}
				return
			}
			if ref != nil || d.Outcome != tc.outcome || d.Next.Revision != tc.revision {
				t.Fatalf("decision %s rev %d (%v), want %s rev %d", d.Outcome, d.Next.Revision, ref, tc.outcome, tc.revision)
			}
			if d.Outcome == domain.OutcomeDuplicate && !d.Next.LastSeenAt.Equal(cur.LastSeenAt) {
				t.Fatal("a duplicate moved last_seen_at")
			}
			if d.Outcome == domain.OutcomeRenewed && (!d.Next.Equal(cur.Facts) || !d.Next.LastSeenAt.Equal(now.Add(time.Minute))) {
				t.Fatal("a renewal must move only last_seen_at (and the observed_at watermark)")
			}
		})
	}
}

func TestLastSeenAtNeverMovesBackwards(t *testing.T) {
	d, _ := domain.Decide(nil, "alpha", report(nil), "p", t0.Add(time.Hour))
	cur := d.Next
	// Received before the saved report's receipt, applied after it.
	late, _ := domain.Decide(&cur, "alpha", report(func(r *domain.Report) { r.ObservedAt = t0.Add(time.Minute) }), "p", t0.Add(time.Hour-time.Second))
	if late.Outcome != domain.OutcomeRenewed || !late.Next.LastSeenAt.Equal(cur.LastSeenAt) {
		t.Fatalf("%+v", late)
	}
}

func TestRetiredIsATombstone(t *testing.T) {
	gone := report(func(r *domain.Report) { r.State = domain.WaldurTerminated })
	d, _ := domain.Decide(nil, "alpha", gone, "p", t0)
	cur := d.Next
	if _, ref := domain.Decide(&cur, "alpha", report(func(r *domain.Report) { r.ObservedAt = t0.Add(time.Hour) }), "p", t0); ref == nil || ref.Reason != domain.ReasonAllocationRetired {
		t.Fatalf("a later OK report after retirement: %+v", ref)
	}
	later := gone
	later.ObservedAt = t0.Add(time.Hour)
	if d, ref := domain.Decide(&cur, "alpha", later, "p", t0); ref != nil || d.Outcome != domain.OutcomeRenewed {
		t.Fatalf("a later Terminated report renews: %+v %+v", d, ref)
	}
}

func TestNormalizeTruncatesObservedAtToMicroseconds(t *testing.T) {
	r := report(func(r *domain.Report) { r.ObservedAt = t0.Add(1500 * time.Nanosecond).In(time.FixedZone("x", 3600)) })
	n := r.Normalize()
	if !n.ObservedAt.Equal(t0.Add(time.Microsecond)) || n.ObservedAt.Location() != time.UTC {
		t.Fatalf("%s", n.ObservedAt)
	}
	if r.ContentDigest() != n.ContentDigest() {
		t.Fatal("observed_at is not part of the content")
	}
}

func TestBetoEventValidation(t *testing.T) {
	unknown := domain.BetoEvent{EventID: "e", Type: "project.ProjectDeleted", OccurredAt: t0}
	p := unknown.Validate("body")
	if len(p) != 1 || p[0].Location != "body.type" || !strings.Contains(p[0].Message, "project.ProjectDeleted") {
		t.Fatalf("unknown type: %+v", p)
	}
	missing := domain.BetoEvent{EventID: "e", Type: domain.EventProjectChanged, OccurredAt: t0}
	if p := missing.Validate("body"); len(p) != 1 || p[0].Location != "body.project" {
		t.Fatalf("missing project: %+v", p)
	}
	bad := domain.BetoEvent{EventID: "", Type: domain.EventPartyProviderBindingChanged, Binding: &domain.PartyProviderBinding{Revision: -1}}
	if p := bad.Validate("body"); len(p) != 8 || p[1].Location != "body.occurred_at" {
		t.Fatalf("binding problems: %+v", p)
	}
}

// TestCanonicalIDsAreLowerCaseUUIDs: Beto's canonical IDs are accepted
// only in their canonical form, so one Project never has two spellings.
func TestCanonicalIDsAreLowerCaseUUIDs(t *testing.T) {
	const id = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	for _, v := range []string{"project-a", strings.ToUpper(id), "7a1e4c2b1d3f4a5b9c8d0e1f2a3b4c5d", "{" + id + "}", id + " ", "urn:uuid:" + id} {
		ev := domain.BetoEvent{EventID: "e", Type: domain.EventProjectChanged, OccurredAt: t0,
			Project: &domain.ProjectChanged{ID: v, Revision: 1, Memberships: []domain.Membership{{PartyID: v}}}}
		p := ev.Validate("body")
		if len(p) != 2 || p[0].Location != "body.project.id" || p[1].Location != "body.project.memberships[0].party_id" || !strings.Contains(p[0].Message, "lower-case UUID") {
			t.Errorf("%q: %+v", v, p)
		}
	}
	ok := domain.BetoEvent{EventID: "e", Type: domain.EventProjectChanged, OccurredAt: t0, Project: &domain.ProjectChanged{ID: id, Revision: 1}}
	if p := ok.Validate("body"); len(p) != 0 {
		t.Fatalf("a canonical ID: %+v", p)
	}
}

func TestTimesFinerThanAMicrosecondAreRefused(t *testing.T) {
	if p := domain.CheckTime("x", t0.Add(time.Microsecond)); len(p) != 0 {
		t.Fatalf("%+v", p)
	}
	if p := domain.CheckTime("x", t0.Add(time.Nanosecond)); len(p) != 1 || p[0].Location != "x" {
		t.Fatalf("%+v", p)
	}
	if p := domain.CheckTime("x", time.Time{}); len(p) != 1 || p[0].Message != "required" {
		t.Fatalf("%+v", p)
	}
	r := report(func(r *domain.Report) { r.ObservedAt = t0.Add(999 * time.Nanosecond) })
	if p := r.Validate("body.reports[0]"); len(p) != 1 || p[0].Location != "body.reports[0].observed_at" {
		t.Fatalf("%+v", p)
	}
}

func TestWaldurBindingsKeepOnlyDistinctWaldurBindings(t *testing.T) {
	p := domain.ProjectChanged{ProviderBindings: []domain.ProviderBinding{
		{Provider: "waldur", Instance: "b", ExternalID: "2"},
		{Provider: "slurm", Instance: "a", ExternalID: "1"},
		{Provider: "waldur", Instance: "a", ExternalID: "9"},
		{Provider: "waldur", Instance: "b", ExternalID: "2"},
	}}
	got := p.WaldurBindings()
	want := []domain.ProviderBinding{{Provider: "waldur", Instance: "a", ExternalID: "9"}, {Provider: "waldur", Instance: "b", ExternalID: "2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("%+v", got)
	}
}
