package domain

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Lifecycle is an allocation's lifecycle as its owner, Resource
// Provisioning, derives it (docs/resource-provisioning.md#lifecycle-and-states).
type Lifecycle string

// Lifecycles.
const (
	LifecyclePending   Lifecycle = "pending"
	LifecycleReady     Lifecycle = "ready"
	LifecycleChanging  Lifecycle = "changing"
	LifecycleSuspended Lifecycle = "suspended"
	LifecycleRetired   Lifecycle = "retired"
)

// ReasonStale is the lifecycle reason planning adds to a ready or changing
// allocation that its owner reads as not fresh (not observed within the
// freshness bound, 15 minutes by default): stale evidence is not ready,
// never a cached success (docs/resource-provisioning.md#freshness).
const ReasonStale = "stale"

// ReasonLimitsNotApplied is the lifecycle reason for limits the Site has not
// confirmed (docs/resource-provisioning.md#lifecycle-and-states).
const ReasonLimitsNotApplied = "limits_not_applied"

// Allocation is the part of a Project's allocation at a Site that planning
// reads, as the owner answers it at read time. Limits are in canonical
// units: "cpu" millicores, "memory" and "storage" bytes, "gpu.<vendor>"
// devices.
type Allocation struct {
	ID        string
	Site      string
	ProjectID string
	Lifecycle Lifecycle
	// Reasons are the lifecycle reasons (snake_case, e.g. "provisioning",
	// "limits_not_applied").
	Reasons []string
	// AppliedLimits are the limits the Site enforces; for a changing
	// allocation the previous limits still in force. Nil when none are
	// confirmed.
	AppliedLimits map[string]int64
	// ConfiguredLimits are the limits ordered at the provider.
	ConfiguredLimits map[string]int64
	// LastSeenAt is the owner's receipt time of the newest accepted report.
	LastSeenAt time.Time
	// Fresh is the owner's freshness judgement made at read time.
	Fresh bool
}

// PlanAnswer is the outcome of capacity planning
// (docs/execution-ports.md#capacity-planning).
type PlanAnswer string

// Plan answers.
const (
	// PlanAdmissible: the demand fits inside the whole allocation's applied
	// limits (it may still wait at the Site; the Site's quota decides).
	PlanAdmissible PlanAnswer = "admissible"
	// PlanRefused: see the RefusalReason.
	PlanRefused PlanAnswer = "refused"
	// PlanUnavailable: the owner could not be read.
	PlanUnavailable PlanAnswer = "unavailable"
)

// RefusalReason says why a plan is refused (snake_case, like the lifecycle
// reasons of docs/resource-provisioning.md#lifecycle-and-states).
type RefusalReason string

// Refusal reasons.
const (
	RefusedTooLarge          RefusalReason = "too_large"
	RefusedResourceSuspended RefusalReason = "resource_suspended"
	RefusedNotReady          RefusalReason = "not_ready"
	RefusedNoAllocation      RefusalReason = "no_allocation"
	RefusedResourceAmbiguous RefusalReason = "resource_ambiguous"
)

// Units in which planning compares a resource.
const (
	UnitCores   = "cores"
	UnitBytes   = "bytes"
	UnitDevices = "devices"
	// UnitMillicores is cpu's canonical unit (a demand or limit as given).
	UnitMillicores = "millicores"
)

// Excess is one resource of a too_large demand: the demand and the limit in
// the unit planning compared them in (CPU in whole cores: the demand
// rounded up, the limit rounded down; others exactly).
type Excess struct {
	Resource string
	Unit     string
	Demand   int64
	Limit    int64
	// CanonicalUnit, CanonicalDemand and CanonicalLimit are the demand and
	// the limit as given, in the resource's canonical unit ("millicores"
	// for cpu; otherwise the same as Unit, Demand and Limit), so a CPU
	// excess such as 32001 millicores against 32000 (compared as 33 cores
	// against 32) reads unambiguously.
	CanonicalUnit   string
	CanonicalDemand int64
	CanonicalLimit  int64
}

// Plan is the answer to a planning request.
type Plan struct {
	Answer PlanAnswer
	// Reason is set when Answer is PlanRefused.
	Reason RefusalReason
	// AllocationID is the allocation planned against, or the one the
	// refusal concerns when there is exactly one.
	AllocationID string
	// Candidates lists the allocations that made the plan ambiguous (or
	// that are not ready / suspended), sorted.
	Candidates []string
	// LifecycleReasons lists the lifecycle reasons of a not_ready refusal,
	// sorted and distinct.
	LifecycleReasons []string
	// TooLarge lists every resource whose demand exceeds its limit, sorted
	// by resource.
	TooLarge []Excess
	// Limits are the applied limits planned against (admissible and
	// too_large).
	Limits map[string]int64
}

// PlanCapacity plans demand (canonical units; every value ≥ 0) against a
// Project's allocations at one Site, read live from the owner
// (docs/execution-ports.md#the-capacity-rule):
//   - retired allocations are tombstones and are ignored;
//   - a ready or changing allocation that is fresh is usable; several usable
//     allocations are resource_ambiguous; exactly one is planned against
//     with its applied limits (for changing: the previous limits in force);
//   - with none usable: not_ready when any is pending or stale (with the
//     lifecycle reasons), else resource_suspended when any is suspended,
//     else no_allocation.
//
// The arithmetic (Fits) rounds CPU limits down and CPU demands up to whole
// cores and compares every other key exactly; a demanded key with no limit
// has limit 0.
func PlanCapacity(allocations []Allocation, demand map[string]int64) Plan {
	var usable, notReady, suspended []Allocation
	for _, a := range allocations {
		switch {
		case a.Lifecycle == LifecycleRetired:
		case a.Lifecycle == LifecycleSuspended:
			suspended = append(suspended, a)
		case (a.Lifecycle == LifecycleReady || a.Lifecycle == LifecycleChanging) && a.Fresh && a.AppliedLimits != nil:
			usable = append(usable, a)
		default:
			notReady = append(notReady, a)
		}
	}
	switch {
	case len(usable) > 1:
		return Plan{Answer: PlanRefused, Reason: RefusedResourceAmbiguous, Candidates: ids(usable)}
	case len(usable) == 1:
		a := usable[0]
		excess := Fits(a.AppliedLimits, demand)
		p := Plan{AllocationID: a.ID, Limits: a.AppliedLimits}
		if len(excess) == 0 {
			p.Answer = PlanAdmissible
			return p
		}
		p.Answer, p.Reason, p.TooLarge = PlanRefused, RefusedTooLarge, excess
		return p
	case len(notReady) > 0:
		p := Plan{Answer: PlanRefused, Reason: RefusedNotReady, Candidates: ids(notReady), LifecycleReasons: notReadyReasons(notReady)}
		if len(notReady) == 1 {
			p.AllocationID = notReady[0].ID
		}
		return p
	case len(suspended) > 0:
		p := Plan{Answer: PlanRefused, Reason: RefusedResourceSuspended, Candidates: ids(suspended)}
		if len(suspended) == 1 {
			p.AllocationID = suspended[0].ID
		}
		return p
	}
	return Plan{Answer: PlanRefused, Reason: RefusedNoAllocation}
}

// Fits compares demand with limits and returns every resource whose demand
// exceeds its limit (nil when the demand fits). CPU ("cpu", millicores)
// compares whole cores: the limit rounds down, the demand rounds up. Every
// other key compares exactly. A demanded key missing from limits has limit
// 0, so a GPU demand against an allocation without GPUs does not fit.
func Fits(limits, demand map[string]int64) []Excess {
	var out []Excess
	for resource, d := range demand {
		l := limits[resource]
		e := Excess{Resource: resource, Demand: d, Limit: l, Unit: unitOf(resource), CanonicalUnit: unitOf(resource), CanonicalDemand: d, CanonicalLimit: l}
		if resource == "cpu" {
			e.Demand, e.Limit, e.CanonicalUnit = ceilDiv(d, 1000), l/1000, UnitMillicores
		}
		if e.Demand > e.Limit {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

func unitOf(resource string) string {
	switch {
	case resource == "cpu":
		return UnitCores
	case strings.HasPrefix(resource, "gpu."):
		return UnitDevices
	}
	return UnitBytes
}

// ceilDiv is ⌈n/d⌉ for n ≥ 0 without overflow.
func ceilDiv(n, d int64) int64 {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}

func ids(as []Allocation) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.ID)
	}
	sort.Strings(out)
	return out
}

func notReadyReasons(as []Allocation) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Reasons...)
		if !a.Fresh && (a.Lifecycle == LifecycleReady || a.Lifecycle == LifecycleChanging) {
			out = append(out, ReasonStale)
		}
		if a.AppliedLimits == nil && (a.Lifecycle == LifecycleReady || a.Lifecycle == LifecycleChanging) {
			out = append(out, ReasonLimitsNotApplied)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
