// Package domain holds Resource Provisioning's facts and rules: allocations
// reported by a Site's agent, their lifecycle derived from the Waldur state,
// the paused flag, the applied limits and the Project view, the rules that
// decide whether a report is a material change, a renewal, a duplicate or is
// refused, the Beto events that build the Project and Party binding views,
// and native member accounts: the agents' account reports and the Runtime
// member bindings with their generations (members.go, accounts.go). It
// imports only the standard library and the Site protocol's ID checks.
//
// Rule source: docs/resource-provisioning.md.
package domain

import (
	"crypto/sha1" //nolint:gosec // UUIDv5 is defined over SHA-1 (RFC 9562 §5.5); not used for security.
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Lifecycle values of an allocation (docs/resource-provisioning.md#lifecycle-and-states).
const (
	LifecyclePending   = "pending"
	LifecycleReady     = "ready"
	LifecycleChanging  = "changing"
	LifecycleSuspended = "suspended"
	LifecycleRetired   = "retired"
)

// Reasons of a pending allocation, in the order they are listed.
const (
	// PendingProvisioning: Waldur state Creating.
	PendingProvisioning = "provisioning"
	// PendingProviderError: Waldur state Erred.
	PendingProviderError = "provider_error"
	// PendingTerminating: Waldur state Terminating.
	PendingTerminating = "terminating"
	// PendingLimitsNotApplied: a configured limit key has no applied value
	// (applied limits absent, or missing that key).
	PendingLimitsNotApplied = "limits_not_applied"
	// PendingProjectUnbound: the provider Project is not (or not uniquely)
	// bound to a canonical Project in the Project view.
	PendingProjectUnbound = "project_unbound"
	// PendingStale: added at read time when the allocation was not seen
	// within the freshness bound (stale evidence is pending, never a cached
	// success).
	PendingStale = "stale"
)

// Waldur marketplace resource states a report may carry.
const (
	WaldurCreating    = "Creating"
	WaldurOK          = "OK"
	WaldurErred       = "Erred"
	WaldurUpdating    = "Updating"
	WaldurTerminating = "Terminating"
	WaldurTerminated  = "Terminated"
)

// WaldurStates lists the accepted Waldur states.
var waldurStates = []string{WaldurCreating, WaldurOK, WaldurErred, WaldurUpdating, WaldurTerminating, WaldurTerminated}

// MaxReportsPerBatch bounds one report request (docs/resource-provisioning.md#report-intake).
const MaxReportsPerBatch = 100

// maxIDLength bounds opaque identifiers.
const maxIDLength = 256

// AllocationNamespace is the fixed namespace UUID under which allocation IDs
// are derived: ID = UUIDv5(AllocationNamespace, "<site>/<provider resource
// ID>"). Changing it would change every allocation ID.
const AllocationNamespace = "d5dc47a8-ccc6-46e7-91e2-fb736ff501df"

// namespaceBytes is AllocationNamespace as 16 bytes.
var namespaceBytes = [16]byte{0xd5, 0xdc, 0x47, 0xa8, 0xcc, 0xc6, 0x46, 0xe7, 0x91, 0xe2, 0xfb, 0x73, 0x6f, 0xf5, 0x01, 0xdf}

// AllocationID returns the allocation ID of a provider resource at a Site:
// the UUIDv5 (RFC 9562) of "<site>/<providerResourceID>" under
// AllocationNamespace, in canonical lower-case form. A Site ID cannot hold
// "/", so the name is unambiguous.
func AllocationID(site, providerResourceID string) string {
	return uuidV5(namespaceBytes, site+"/"+providerResourceID)
}

// uuidV5 returns the UUIDv5 (RFC 9562 §5.5) of name under the namespace ns,
// in canonical lower-case form.
func uuidV5(ns [16]byte, name string) string {
	h := sha1.New() //nolint:gosec // see import
	h.Write(ns[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	b := hex.EncodeToString(u[:])
	return b[0:8] + "-" + b[8:12] + "-" + b[12:16] + "-" + b[16:20] + "-" + b[20:32]
}

// Report is one resource report of a Site's agent, in the agent's Waldur
// vocabulary (docs/resource-provisioning.md#report-intake). Limits are in canonical units.
type Report struct {
	// ProviderResourceID is the Waldur marketplace resource UUID.
	ProviderResourceID string `json:"provider_resource_id"`
	// OfferingID is the Waldur offering UUID.
	OfferingID string `json:"offering_id"`
	// ProviderProjectID is the Waldur Project UUID.
	ProviderProjectID string `json:"provider_project_id"`
	// State is the Waldur resource state (Creating, OK, Erred, Updating,
	// Terminating, Terminated).
	State string `json:"state"`
	// Paused is Waldur's paused flag.
	Paused bool `json:"paused"`
	// Limits are the configured limits.
	Limits Limits `json:"limits"`
	// AppliedLimits are what the Site enforces (the namespace quota read
	// back); nil until confirmed.
	AppliedLimits Limits `json:"applied_limits"`
	// NativeScope is the namespace; empty until the Site created it.
	NativeScope string `json:"native_scope"`
	// ObservedAt is when the agent read these facts (agent's clock; it
	// orders reports of one allocation). At most microsecond precision (the
	// precision both engines store; finer is refused, see CheckTime).
	ObservedAt time.Time `json:"-"`
}

// Normalize returns r with ObservedAt in UTC truncated to microseconds (the
// precision both storage engines keep; a valid report has no finer part, so
// this only drops the zone) and limits copied.
func (r Report) Normalize() Report {
	r.ObservedAt = r.ObservedAt.UTC().Truncate(time.Microsecond)
	r.Limits = r.Limits.Clone()
	r.AppliedLimits = r.AppliedLimits.Clone()
	if r.Limits == nil {
		r.Limits = Limits{}
	}
	return r
}

// Validate returns the problems of r located under loc
// ("body.reports[0]"): missing or over-long identifiers, an unknown Waldur
// state, unknown limit keys, negative amounts, a missing observed_at or one
// finer than a microsecond (CheckTime). Whether observed_at lies too far in
// the future is the service's check: it needs the server clock.
func (r Report) Validate(loc string) []Problem {
	var out []Problem
	out = append(out, CheckText(loc+".provider_resource_id", r.ProviderResourceID, true)...)
	out = append(out, CheckText(loc+".offering_id", r.OfferingID, true)...)
	out = append(out, CheckText(loc+".provider_project_id", r.ProviderProjectID, true)...)
	out = append(out, CheckText(loc+".native_scope", r.NativeScope, false)...)
	if !slices.Contains(waldurStates, r.State) {
		out = append(out, Problem{Location: loc + ".state", Message: fmt.Sprintf("unknown Waldur state %q: want one of %v", r.State, waldurStates), Value: r.State})
	}
	out = append(out, r.Limits.Validate(loc+".limits")...)
	out = append(out, r.AppliedLimits.Validate(loc+".applied_limits")...)
	return append(out, CheckTime(loc+".observed_at", r.ObservedAt)...)
}

// ContentDigest returns the hex SHA-256 of the report's content without
// observed_at (JSON with sorted map keys): two reports with equal digests
// carry the same facts.
func (r Report) ContentDigest() string {
	b, err := json.Marshal(r)
	if err != nil {
		// A Report holds only strings, a bool and int64 maps: it always
		// encodes.
		panic(fmt.Sprintf("encode report: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Retiring reports whether the report says the resource is gone (Waldur
// state Terminated).
func (r Report) Retiring() bool { return r.State == WaldurTerminated }

// Facts are the derived facts of an allocation; any difference between two
// Facts is a material change (docs/resource-provisioning.md#revisions-and-material-change).
type Facts struct {
	// ProjectID is the canonical Project; empty while project_unbound.
	ProjectID          string
	ProviderResourceID string
	OfferingID         string
	ProviderProjectID  string
	NativeScope        string
	Lifecycle          string
	// Reasons of a pending lifecycle, empty otherwise.
	Reasons []string
	// Configured limits (canonical units).
	Configured Limits
	// Applied limits; nil when absent. For a changing allocation they are
	// the limits still in force.
	Applied     Limits
	WaldurState string
	Paused      bool
}

// Equal reports whether f and o are the same facts.
func (f Facts) Equal(o Facts) bool {
	return f.ProjectID == o.ProjectID &&
		f.ProviderResourceID == o.ProviderResourceID &&
		f.OfferingID == o.OfferingID &&
		f.ProviderProjectID == o.ProviderProjectID &&
		f.NativeScope == o.NativeScope &&
		f.Lifecycle == o.Lifecycle &&
		slices.Equal(f.Reasons, o.Reasons) &&
		f.Configured.Equal(o.Configured) &&
		f.Applied.Equal(o.Applied) &&
		f.WaldurState == o.WaldurState &&
		f.Paused == o.Paused
}

// Derive computes the facts of a report whose provider Project resolved to
// projectID ("" when unbound or claimed by several Projects). Lifecycle
// precedence: retired > suspended > pending > changing > ready
// (docs/resource-provisioning.md#the-lifecycle-precedence):
//   - retired: Waldur Terminated;
//   - suspended: paused;
//   - pending with reasons, in this order: provisioning (Creating),
//     provider_error (Erred), terminating (Terminating), limits_not_applied (a
//     configured key without an applied value), project_unbound;
//   - changing: applied limits differ from the configured ones (the applied
//     ones stay in force);
//   - ready otherwise.
//
// Reasons are empty unless the lifecycle is pending.
func Derive(r Report, projectID string) Facts {
	f := Facts{
		ProjectID:          projectID,
		ProviderResourceID: r.ProviderResourceID,
		OfferingID:         r.OfferingID,
		ProviderProjectID:  r.ProviderProjectID,
		NativeScope:        r.NativeScope,
		Configured:         r.Limits.Clone(),
		Applied:            r.AppliedLimits.Clone(),
		WaldurState:        r.State,
		Paused:             r.Paused,
		Reasons:            []string{},
	}
	if f.Configured == nil {
		f.Configured = Limits{}
	}
	var pending []string
	switch r.State {
	case WaldurCreating:
		pending = append(pending, PendingProvisioning)
	case WaldurErred:
		pending = append(pending, PendingProviderError)
	case WaldurTerminating:
		pending = append(pending, PendingTerminating)
	}
	if len(f.Configured.MissingFrom(f.Applied)) > 0 {
		pending = append(pending, PendingLimitsNotApplied)
	}
	if projectID == "" {
		pending = append(pending, PendingProjectUnbound)
	}
	switch {
	case r.State == WaldurTerminated:
		f.Lifecycle = LifecycleRetired
	case r.Paused:
		f.Lifecycle = LifecycleSuspended
	case len(pending) > 0:
		f.Lifecycle = LifecyclePending
		f.Reasons = pending
	case !f.Configured.Equal(f.Applied):
		f.Lifecycle = LifecycleChanging
	default:
		f.Lifecycle = LifecycleReady
	}
	return f
}

// Allocation is the stored state of one provider resource at a Site.
type Allocation struct {
	// ID is AllocationID(Site, ProviderResourceID).
	ID   string
	Site string
	Facts
	// Revision counts material changes, starting at 1.
	Revision int64
	// ContentDigest is the newest accepted report's ContentDigest.
	ContentDigest string
	// ObservedAt is the newest accepted report's observed_at (agent clock;
	// orders reports).
	ObservedAt time.Time
	// LastSeenAt is the server's receipt time of the newest accepted report.
	LastSeenAt time.Time
}

// Outcomes of an accepted report (docs/resource-provisioning.md#report-intake).
const (
	OutcomeCreated   = "created"
	OutcomeChanged   = "changed"
	OutcomeRenewed   = "renewed"
	OutcomeDuplicate = "duplicate"
)

// Decision is what to do with one report.
type Decision struct {
	// Outcome is created, changed, renewed or duplicate.
	Outcome string
	// Next is the allocation after the report (equal to the current one
	// for a duplicate; only ObservedAt and LastSeenAt moved for a renewal).
	Next Allocation
}

// Material reports whether the decision is a material change (a new
// revision with a receipt and an AllocationChanged).
func (d Decision) Material() bool {
	return d.Outcome == OutcomeCreated || d.Outcome == OutcomeChanged
}

// Decide applies a normalised, valid report r for site to the current
// allocation (nil when none exists), with the report's provider Project
// resolved to projectID and the server's receipt time now. Rules
// (docs/resource-provisioning.md#report-intake, #revisions-and-material-change):
//   - no allocation: created, revision 1;
//   - observed_at older than the saved one: refused, stale_report;
//   - same observed_at: duplicate when the content is the same (nothing
//     moves), refused report_conflict otherwise;
//   - newer observed_at on a retired allocation: refused allocation_retired
//     unless the report is itself retiring (Terminated);
//   - newer observed_at whose derived facts equal the saved ones: renewed
//     (only last_seen_at and the observed_at watermark move; last_seen_at
//     never moves backwards);
//   - otherwise changed, revision + 1.
//
// It returns a *Refusal (without Location) when the report is refused.
func Decide(cur *Allocation, site string, r Report, projectID string, now time.Time) (Decision, *Refusal) {
	facts := Derive(r, projectID)
	digest := r.ContentDigest()
	if cur == nil {
		return Decision{Outcome: OutcomeCreated, Next: Allocation{
			ID: AllocationID(site, r.ProviderResourceID), Site: site, Facts: facts, Revision: 1,
			ContentDigest: digest, ObservedAt: r.ObservedAt, LastSeenAt: now,
		}}, nil
	}
	switch {
	case r.ObservedAt.Before(cur.ObservedAt):
		return Decision{}, &Refusal{Reason: ReasonStaleReport, Detail: fmt.Sprintf("observed_at %s is older than the saved %s", r.ObservedAt.Format(time.RFC3339Nano), cur.ObservedAt.Format(time.RFC3339Nano))}
	case r.ObservedAt.Equal(cur.ObservedAt):
		if digest == cur.ContentDigest {
			return Decision{Outcome: OutcomeDuplicate, Next: *cur}, nil
		}
		return Decision{}, &Refusal{Reason: ReasonReportConflict, Detail: "a report with the same observed_at but other content was accepted before"}
	case cur.Lifecycle == LifecycleRetired && !r.Retiring():
		return Decision{}, &Refusal{Reason: ReasonAllocationRetired, Detail: fmt.Sprintf("allocation %s is retired; only a Terminated report is accepted", cur.ID)}
	}
	next := *cur
	next.ObservedAt = r.ObservedAt
	// A report received earlier but applied after a concurrent one (it
	// waited for the row) never moves last_seen_at backwards.
	next.LastSeenAt = maxTime(now, cur.LastSeenAt)
	next.ContentDigest = digest
	if facts.Equal(cur.Facts) {
		return Decision{Outcome: OutcomeRenewed, Next: next}, nil
	}
	next.Facts = facts
	next.Revision = cur.Revision + 1
	return Decision{Outcome: OutcomeChanged, Next: next}, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// Receipt is the evidence of one material change: the report that made
// revision Revision, when the agent observed it and when it was received.
type Receipt struct {
	AllocationID  string
	Revision      int64
	ObservedAt    time.Time
	ReceivedAt    time.Time
	ContentDigest string
	// Report is the report's content as JSON.
	Report []byte
}

// NewReceipt returns the receipt of a material decision for r.
func NewReceipt(next Allocation, r Report) Receipt {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encode report: %v", err)) // always encodes, see ContentDigest
	}
	return Receipt{AllocationID: next.ID, Revision: next.Revision, ObservedAt: r.ObservedAt, ReceivedAt: next.LastSeenAt, ContentDigest: next.ContentDigest, Report: b}
}
