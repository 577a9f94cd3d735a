package domain

import (
	"reflect"
	"testing"
)

const gib = int64(1) << 30

func ready(id string, limits map[string]int64) Allocation {
	return Allocation{ID: id, Lifecycle: LifecycleReady, AppliedLimits: limits, Fresh: true}
}

func TestCPUComparesWholeCoresLimitDownDemandUp(t *testing.T) {
	limits := map[string]int64{"cpu": 32500, "memory": 128 * gib}
	for _, tc := range []struct {
		cpu  int64
		fits bool
	}{
		{32000, true},  // 32 cores against floor(32.5) = 32
		{31001, true},  // rounds up to 32
		{32001, false}, // rounds up to 33
		{32500, false}, // 33 cores: the half core of the limit is not planned
	} {
		got := Fits(limits, map[string]int64{"cpu": tc.cpu})
		if (len(got) == 0) != tc.fits {
			t.Errorf("cpu %d millicores against 32500: excess %+v, want fits=%v", tc.cpu, got, tc.fits)
		}
	}
	ex := Fits(limits, map[string]int64{"cpu": 32001})
	if want := []Excess{{Resource: "cpu", Unit: UnitCores, Demand: 33, Limit: 32, CanonicalUnit: UnitMillicores, CanonicalDemand: 32001, CanonicalLimit: 32500}}; !reflect.DeepEqual(ex, want) {
		t.Fatalf("excess %+v, want %+v", ex, want)
	}
}

func TestMemoryStorageAndDevicesCompareExactlyAndAMissingLimitIsZero(t *testing.T) {
	limits := map[string]int64{"cpu": 8000, "memory": 16 * gib, "storage": 100 * gib}
	if ex := Fits(limits, map[string]int64{"memory": 16 * gib, "storage": 100 * gib}); ex != nil {
		t.Fatalf("exact fit refused: %+v", ex)
	}
	ex := Fits(limits, map[string]int64{"memory": 16*gib + 1, "gpu.nvidia": 1})
	want := []Excess{
		{Resource: "gpu.nvidia", Unit: UnitDevices, Demand: 1, Limit: 0, CanonicalUnit: UnitDevices, CanonicalDemand: 1},
		{Resource: "memory", Unit: UnitBytes, Demand: 16*gib + 1, Limit: 16 * gib, CanonicalUnit: UnitBytes, CanonicalDemand: 16*gib + 1, CanonicalLimit: 16 * gib},
	}
	if !reflect.DeepEqual(ex, want) {
		t.Fatalf("excess %+v, want %+v", ex, want)
	}
	if ex := Fits(limits, map[string]int64{"gpu.nvidia": 0}); ex != nil {
		t.Fatalf("a zero demand without a limit: %+v", ex)
	}
}

func TestPlanChoosesTheSingleUsableAllocation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		allocs []Allocation
		demand map[string]int64
		want   Plan
	}{
		{
			name:   "nothing at the Site",
			allocs: nil, demand: map[string]int64{"cpu": 1000},
			want: Plan{Answer: PlanRefused, Reason: RefusedNoAllocation},
		},
		{
			name:   "only a retired tombstone",
			allocs: []Allocation{{ID: "r", Lifecycle: LifecycleRetired}}, demand: map[string]int64{"cpu": 1000},
			want: Plan{Answer: PlanRefused, Reason: RefusedNoAllocation},
		},
		{
			name:   "two ready allocations are ambiguous",
			allocs: []Allocation{ready("b", map[string]int64{"cpu": 4000}), ready("a", map[string]int64{"cpu": 4000})},
			demand: map[string]int64{"cpu": 1000},
			want:   Plan{Answer: PlanRefused, Reason: RefusedResourceAmbiguous, Candidates: []string{"a", "b"}},
		},
		{
			name:   "a ready and a pending allocation plan against the ready one",
			allocs: []Allocation{ready("a", map[string]int64{"cpu": 4000}), {ID: "p", Lifecycle: LifecyclePending, Reasons: []string{"provisioning"}, Fresh: true}},
			demand: map[string]int64{"cpu": 1000},
			want:   Plan{Answer: PlanAdmissible, AllocationID: "a", Limits: map[string]int64{"cpu": 4000}},
		},
		{
			name:   "changing plans against the limits in force",
			allocs: []Allocation{{ID: "g", Lifecycle: LifecycleChanging, AppliedLimits: map[string]int64{"cpu": 32000}, ConfiguredLimits: map[string]int64{"cpu": 64000}, Fresh: true}},
			demand: map[string]int64{"cpu": 33000},
			want:   Plan{Answer: PlanRefused, Reason: RefusedTooLarge, AllocationID: "g", Limits: map[string]int64{"cpu": 32000}, TooLarge: []Excess{{Resource: "cpu", Unit: UnitCores, Demand: 33, Limit: 32, CanonicalUnit: UnitMillicores, CanonicalDemand: 33000, CanonicalLimit: 32000}}},
		},
		{
			name:   "a stale ready allocation is not ready",
			allocs: []Allocation{{ID: "s", Lifecycle: LifecycleReady, AppliedLimits: map[string]int64{"cpu": 4000}, Fresh: false}},
			demand: map[string]int64{"cpu": 1000},
			want:   Plan{Answer: PlanRefused, Reason: RefusedNotReady, AllocationID: "s", Candidates: []string{"s"}, LifecycleReasons: []string{ReasonStale}},
		},
		{
			name:   "pending reasons are reported",
			allocs: []Allocation{{ID: "b", Lifecycle: LifecyclePending, Reasons: []string{"provisioning", "limits_not_applied"}, Fresh: true}},
			demand: map[string]int64{"cpu": 1000},
			want:   Plan{Answer: PlanRefused, Reason: RefusedNotReady, AllocationID: "b", Candidates: []string{"b"}, LifecycleReasons: []string{"limits_not_applied", "provisioning"}},
		},
		{
			name:   "suspended refuses",
			allocs: []Allocation{{ID: "d", Lifecycle: LifecycleSuspended, AppliedLimits: map[string]int64{"cpu": 0}, Fresh: true}},
			demand: map[string]int64{"cpu": 1000},
			want:   Plan{Answer: PlanRefused, Reason: RefusedResourceSuspended, AllocationID: "d", Candidates: []string{"d"}},
		},
		{
			name:   "a ready allocation without applied limits is never unlimited",
			allocs: []Allocation{{ID: "x", Lifecycle: LifecycleReady, Fresh: true}},
			demand: map[string]int64{"cpu": 1000},
			want:   Plan{Answer: PlanRefused, Reason: RefusedNotReady, AllocationID: "x", Candidates: []string{"x"}, LifecycleReasons: []string{ReasonLimitsNotApplied}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlanCapacity(tc.allocs, tc.demand); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
