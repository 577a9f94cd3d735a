package domain

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Beto event types this context accepts (docs/resource-provisioning.md#the-project-view), and the
// provider name of Waldur bindings.
const (
	EventProjectChanged              = "project.ProjectChanged"
	EventPartyProviderBindingChanged = "party.PartyProviderBindingChanged"
	ProviderWaldur                   = "waldur"
)

// Bounds on one event's lists.
const (
	maxBindingsPerProject    = 1000
	maxMembershipsPerProject = 100000
)

// Outcomes of a received Beto event.
const (
	// EventApplied: the event moved the view (a newer revision).
	EventApplied = "applied"
	// EventIgnored: received and recorded, but its revision is not newer
	// than the view's, so the view did not move.
	EventIgnored = "ignored"
	// EventDuplicate: the same event_id with identical content was received
	// before; nothing moved.
	EventDuplicate = "duplicate"
)

// BetoEvent is one encoded Beto event (at-least-once; order within one
// Project or binding follows its revision). Exactly one of Project and
// Binding is set, matching Type.
type BetoEvent struct {
	EventID    string                `json:"event_id"`
	Type       string                `json:"type"`
	OccurredAt time.Time             `json:"occurred_at"`
	Project    *ProjectChanged       `json:"project,omitempty"`
	Binding    *PartyProviderBinding `json:"binding,omitempty"`
}

// ProjectChanged is a canonical Project's state at Revision.
type ProjectChanged struct {
	ID               string            `json:"id"`
	Revision         int64             `json:"revision"`
	State            string            `json:"state"`
	ProviderBindings []ProviderBinding `json:"provider_bindings"`
	Memberships      []Membership      `json:"memberships"`
}

// ProviderBinding binds a canonical object to a provider's object: for a
// Project, provider "waldur", the Waldur instance URL and the Waldur
// Project UUID as ExternalID.
type ProviderBinding struct {
	Provider   string `json:"provider"`
	Instance   string `json:"instance"`
	ExternalID string `json:"external_id"`
}

// Membership is a Party's role in a Project (carried, not used yet).
type Membership struct {
	PartyID         string           `json:"party_id"`
	Role            string           `json:"role"`
	ProviderBinding *ProviderBinding `json:"provider_binding,omitempty"`
}

// PartyProviderBinding is a Party's binding to a provider account at
// Revision (for provider "site": instance = the Site's environment,
// external ID = the Site username).
type PartyProviderBinding struct {
	ID         string `json:"id"`
	PartyID    string `json:"party_id"`
	Revision   int64  `json:"revision"`
	Provider   string `json:"provider"`
	Instance   string `json:"instance"`
	ExternalID string `json:"external_id"`
	State      string `json:"state"`
	Generation int64  `json:"generation"`
}

// Normalize returns ev with OccurredAt in UTC truncated to microseconds (a
// valid event has no finer part, so this only drops the zone).
func (ev BetoEvent) Normalize() BetoEvent {
	ev.OccurredAt = ev.OccurredAt.UTC().Truncate(time.Microsecond)
	return ev
}

// Validate returns the problems of ev located under loc ("body"): a
// missing event_id, a missing occurred_at or one finer than a microsecond,
// an unknown type (refused by name), a payload that does not match the
// type, missing identifiers, canonical IDs that are not lower-case UUIDs
// (project.id, memberships[].party_id, binding.id, binding.party_id: Beto's
// canonical IDs), negative revisions.
func (ev BetoEvent) Validate(loc string) []Problem {
	var out []Problem
	req := func(field, v string) { out = append(out, CheckText(loc+"."+field, v, true)...) }
	opt := func(field, v string) { out = append(out, CheckText(loc+"."+field, v, false)...) }
	canonical := func(field, v string) { out = append(out, CheckCanonicalID(loc+"."+field, v, true)...) }
	nonNegative := func(field string, v int64) {
		if v < 0 {
			out = append(out, Problem{Location: loc + "." + field, Message: field + " must not be negative", Value: v})
		}
	}
	req("event_id", ev.EventID)
	out = append(out, CheckTime(loc+".occurred_at", ev.OccurredAt)...)
	switch ev.Type {
	case EventProjectChanged:
		if ev.Binding != nil {
			out = append(out, Problem{Location: loc + ".binding", Message: "binding is not part of a " + EventProjectChanged})
		}
		p := ev.Project
		if p == nil {
			return append(out, Problem{Location: loc + ".project", Message: "project is required for " + EventProjectChanged})
		}
		canonical("project.id", p.ID)
		opt("project.state", p.State)
		nonNegative("project.revision", p.Revision)
		if len(p.ProviderBindings) > maxBindingsPerProject {
			out = append(out, Problem{Location: loc + ".project.provider_bindings", Message: fmt.Sprintf("at most %d provider bindings", maxBindingsPerProject)})
		}
		if len(p.Memberships) > maxMembershipsPerProject {
			out = append(out, Problem{Location: loc + ".project.memberships", Message: fmt.Sprintf("at most %d memberships", maxMembershipsPerProject)})
		}
		for i, b := range p.ProviderBindings {
			at := fmt.Sprintf("project.provider_bindings[%d]", i)
			req(at+".provider", b.Provider)
			req(at+".instance", b.Instance)
			req(at+".external_id", b.ExternalID)
		}
		for i, m := range p.Memberships {
			at := fmt.Sprintf("project.memberships[%d]", i)
			canonical(at+".party_id", m.PartyID)
			opt(at+".role", m.Role)
			if b := m.ProviderBinding; b != nil {
				opt(at+".provider_binding.provider", b.Provider)
				opt(at+".provider_binding.instance", b.Instance)
				opt(at+".provider_binding.external_id", b.ExternalID)
			}
		}
	case EventPartyProviderBindingChanged:
		if ev.Project != nil {
			out = append(out, Problem{Location: loc + ".project", Message: "project is not part of a " + EventPartyProviderBindingChanged})
		}
		b := ev.Binding
		if b == nil {
			return append(out, Problem{Location: loc + ".binding", Message: "binding is required for " + EventPartyProviderBindingChanged})
		}
		canonical("binding.id", b.ID)
		canonical("binding.party_id", b.PartyID)
		req("binding.provider", b.Provider)
		req("binding.instance", b.Instance)
		req("binding.external_id", b.ExternalID)
		opt("binding.state", b.State)
		nonNegative("binding.revision", b.Revision)
		nonNegative("binding.generation", b.Generation)
	default:
		out = append(out, Problem{Location: loc + ".type", Message: fmt.Sprintf("unknown event type %q: want %s or %s", ev.Type, EventProjectChanged, EventPartyProviderBindingChanged), Value: ev.Type})
	}
	return out
}

// ContentDigest returns the hex SHA-256 of the normalised event's JSON: an
// event received twice under one event_id must have the same digest.
func (ev BetoEvent) ContentDigest() string {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("encode event: %v", err)) // strings, ints and times always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WaldurBindings returns the Project's distinct Waldur provider bindings
// (all instances), sorted by instance then external ID. Only these take part
// in allocation resolution.
func (p ProjectChanged) WaldurBindings() []ProviderBinding {
	var out []ProviderBinding
	for _, b := range p.ProviderBindings {
		if b.Provider == ProviderWaldur && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b ProviderBinding) int {
		return cmp.Or(cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.ExternalID, b.ExternalID))
	})
	return out
}

// EventReceipt records one received event_id.
type EventReceipt struct {
	EventID       string
	Type          string
	ContentDigest string
	// Outcome is EventApplied or EventIgnored.
	Outcome    string
	OccurredAt time.Time
	ReceivedAt time.Time
}

// ProjectView is the view's row of a canonical Project.
type ProjectView struct {
	ProjectID string
	Revision  int64
	State     string
	UpdatedAt time.Time
}

// BindingConflict is a provider Project claimed by several canonical
// Projects. It stays visible and is never resolved by guessing: allocations
// of that provider Project stay project_unbound.
type BindingConflict struct {
	Instance          string
	ProviderProjectID string
	ProjectIDs        []string
}

// AmbiguousResource is a canonical Project with several non-retired
// allocations at one Site: planning cannot pick one of them
// (docs/resource-provisioning.md#the-inconsistencies-read).
type AmbiguousResource struct {
	ProjectID     string
	Site          string
	AllocationIDs []string
}
