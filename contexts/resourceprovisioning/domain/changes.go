package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// AllocationChangedType is the outbox event type of a material change.
const AllocationChangedType = "AllocationChanged"

// AllocationChanged is the outbox event written in the same transaction as
// each material change (docs/resource-provisioning.md#the-change-feed): the allocation's
// facts at Revision. Its JSON form is the stored payload.
type AllocationChanged struct {
	AllocationID       string    `json:"allocation_id"`
	Site               string    `json:"site"`
	Revision           int64     `json:"revision"`
	ProjectID          string    `json:"project_id"`
	ProviderResourceID string    `json:"provider_resource_id"`
	OfferingID         string    `json:"offering_id"`
	ProviderProjectID  string    `json:"provider_project_id"`
	NativeScope        string    `json:"native_scope"`
	Lifecycle          string    `json:"lifecycle"`
	Reasons            []string  `json:"reasons"`
	ConfiguredLimits   Limits    `json:"configured_limits"`
	AppliedLimits      Limits    `json:"applied_limits,omitempty"`
	WaldurState        string    `json:"waldur_state"`
	Paused             bool      `json:"paused"`
	ObservedAt         time.Time `json:"observed_at"`
	// ChangedAt is the server's receipt time of the report that made the
	// change.
	ChangedAt time.Time `json:"changed_at"`
}

// NewAllocationChanged returns the event of allocation a at its revision.
func NewAllocationChanged(a Allocation) AllocationChanged {
	return AllocationChanged{
		AllocationID: a.ID, Site: a.Site, Revision: a.Revision, ProjectID: a.ProjectID,
		ProviderResourceID: a.ProviderResourceID, OfferingID: a.OfferingID, ProviderProjectID: a.ProviderProjectID,
		NativeScope: a.NativeScope, Lifecycle: a.Lifecycle, Reasons: append([]string{}, a.Reasons...),
		ConfiguredLimits: a.Configured.Clone(), AppliedLimits: a.Applied.Clone(), WaldurState: a.WaldurState,
		Paused: a.Paused, ObservedAt: a.ObservedAt, ChangedAt: a.LastSeenAt,
	}
}

// Payload returns the event's JSON.
func (e AllocationChanged) Payload() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("encode AllocationChanged: %v", err)) // strings, ints, maps and times always encode
	}
	return b
}

// ParseAllocationChanged decodes a stored payload.
func ParseAllocationChanged(b []byte) (AllocationChanged, error) {
	var e AllocationChanged
	if err := json.Unmarshal(b, &e); err != nil {
		return AllocationChanged{}, fmt.Errorf("decode AllocationChanged payload: %w", err)
	}
	return e, nil
}

// Change is one entry of the change feed at its position: an
// AllocationChanged (Type AllocationChangedType, in Event) or a
// MemberBindingChanged (Type MemberBindingChangedType, in Binding).
// Positions start at 1 and follow commit order: a change that commits later
// never gets a smaller position than one already readable.
type Change struct {
	Position int64
	Type     string
	// Event is the AllocationChanged of an allocation change (zero
	// otherwise).
	Event AllocationChanged
	// Binding is the MemberBindingChanged of a binding change (zero
	// otherwise).
	Binding MemberBindingChanged
}
