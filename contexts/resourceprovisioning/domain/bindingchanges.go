package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// MemberBindingChangedType is the outbox event type of a binding's material
// change.
const MemberBindingChangedType = "MemberBindingChanged"

// MemberBindingChanged is the outbox event written in the same transaction
// as each material change of a Runtime member binding, beside
// AllocationChanged in one feed (docs/resource-provisioning.md#the-change-feed):
// the binding's facts at Revision. Its JSON form is the stored payload.
type MemberBindingChanged struct {
	BindingID   string `json:"binding_id"`
	PartyID     string `json:"party_id"`
	ProjectID   string `json:"project_id"`
	Environment string `json:"environment"`
	// Account is member-<party>.
	Account    string   `json:"account"`
	Generation int64    `json:"generation"`
	Revision   int64    `json:"revision"`
	State      string   `json:"state"`
	Reasons    []string `json:"reasons"`
	// AccountUID, AllocationID and Namespace are the ready account's; empty
	// unless State is ready.
	AccountUID   string `json:"account_uid"`
	AllocationID string `json:"allocation_id"`
	Namespace    string `json:"namespace"`
	// SiteBindingID, SiteUsername and SiteBindingGeneration are the site
	// binding the generation rests on (evidence).
	SiteBindingID         string `json:"site_binding_id"`
	SiteUsername          string `json:"site_username"`
	SiteBindingGeneration int64  `json:"site_binding_generation"`
	// ChangedAt is the server time of the change.
	ChangedAt time.Time `json:"changed_at"`
}

// NewMemberBindingChanged returns the event of binding b at its revision.
func NewMemberBindingChanged(b MemberBinding) MemberBindingChanged {
	b = b.Normalize()
	return MemberBindingChanged{
		BindingID: b.ID, PartyID: b.PartyID, ProjectID: b.ProjectID, Environment: b.Environment,
		Account: b.AccountName(), Generation: b.Generation, Revision: b.Revision, State: b.State,
		Reasons: append([]string{}, b.Reasons...), AccountUID: b.Account.UID, AllocationID: b.Account.AllocationID,
		Namespace: b.Account.Namespace, SiteBindingID: b.Site.ID, SiteUsername: b.Site.Username,
		SiteBindingGeneration: b.Site.Generation, ChangedAt: b.ChangedAt,
	}
}

// Payload returns the event's JSON.
func (e MemberBindingChanged) Payload() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("encode MemberBindingChanged: %v", err)) // strings, ints and times always encode
	}
	return b
}

// ParseChange decodes a stored outbox payload of eventType at position.
func ParseChange(position int64, eventType string, payload []byte) (Change, error) {
	c := Change{Position: position, Type: eventType}
	switch eventType {
	case AllocationChangedType:
		ev, err := ParseAllocationChanged(payload)
		if err != nil {
			return Change{}, err
		}
		c.Event = ev
	case MemberBindingChangedType:
		var ev MemberBindingChanged
		if err := json.Unmarshal(payload, &ev); err != nil {
			return Change{}, fmt.Errorf("decode MemberBindingChanged payload: %w", err)
		}
		c.Binding = ev
	default:
		return Change{}, fmt.Errorf("unknown change type %q", eventType)
	}
	return c, nil
}
