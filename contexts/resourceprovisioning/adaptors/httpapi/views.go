package httpapi

import (
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// The bodies several reads answer: an allocation, a member binding and a
// binding conflict as readers see them.

// AllocationBody is an allocation as readers see it (the JSON form of
// application.AllocationView).
type AllocationBody struct {
	ID                 string            `json:"id" doc:"UUIDv5 of <site>/<provider resource ID>." example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
	Site               string            `json:"site" example:"alpha"`
	ProjectID          string            `json:"project_id" doc:"Canonical Project; empty while project_unbound." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	ProviderResourceID string            `json:"provider_resource_id" example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
	OfferingID         string            `json:"offering_id" example:"9b8e7d6c5b4a43219f8e7d6c5b4a3210"`
	ProviderProjectID  string            `json:"provider_project_id" example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	NativeScope        string            `json:"native_scope" example:"waldur-alpha-gpu-ns"`
	Lifecycle          string            `json:"lifecycle" enum:"pending,ready,changing,suspended,retired" example:"ready"`
	Reasons            []string          `json:"reasons" doc:"Reasons of a pending lifecycle: provisioning, provider_error, terminating, limits_not_applied, project_unbound, stale." example:"[]"`
	ConfiguredLimits   map[string]int64  `json:"configured_limits" doc:"cpu millicores, memory and storage bytes, gpu.<vendor> devices." example:"{\"cpu\":32000,\"memory\":137438953472}"`
	AppliedLimits      *map[string]int64 `json:"applied_limits,omitempty" doc:"What the Site enforces; absent until confirmed. For a changing allocation, the limits still in force." example:"{\"cpu\":32000,\"memory\":137438953472}"`
	WaldurState        string            `json:"waldur_state" example:"OK"`
	Paused             bool              `json:"paused"`
	Revision           int64             `json:"revision" doc:"Counts material changes." example:"1"`
	ObservedAt         time.Time         `json:"observed_at" doc:"The agent's observation time of the newest accepted report."`
	LastSeenAt         time.Time         `json:"last_seen_at" doc:"The server's receipt time of the newest accepted report."`
	Fresh              bool              `json:"fresh" doc:"false when last_seen_at is older than the freshness bound at read time." example:"true"`
}

func allocationBody(v application.AllocationView) AllocationBody {
	b := AllocationBody{
		ID: v.ID, Site: v.Site, ProjectID: v.ProjectID, ProviderResourceID: v.ProviderResourceID,
		OfferingID: v.OfferingID, ProviderProjectID: v.ProviderProjectID, NativeScope: v.NativeScope,
		Lifecycle: v.Lifecycle, Reasons: v.Reasons, ConfiguredLimits: v.ConfiguredLimits,
		WaldurState: v.WaldurState, Paused: v.Paused, Revision: v.Revision,
		ObservedAt: v.ObservedAt, LastSeenAt: v.LastSeenAt, Fresh: v.Fresh,
	}
	if v.AppliedLimits != nil {
		applied := v.AppliedLimits
		b.AppliedLimits = &applied
	}
	return b
}

func allocationBodies(vs []application.AllocationView) []AllocationBody {
	out := make([]AllocationBody, 0, len(vs))
	for _, v := range vs {
		out = append(out, allocationBody(v))
	}
	return out
}

// MemberBindingBody is a Runtime member binding at a revision: the desired
// binding Site Runtime is to apply (bind-member / retire-member), as the
// desired-binding read and the change feed's MemberBindingChanged carry it.
type MemberBindingBody struct {
	BindingID             string    `json:"binding_id" doc:"UUIDv5 of <party>/<project>/<environment>: account_ref.binding_id of the Site protocol." example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
	PartyID               string    `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	ProjectID             string    `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Environment           string    `json:"environment" example:"alpha-k8s"`
	Account               string    `json:"account" doc:"The native account: member-<party_id> at a kubernetes environment, the Party's site username at a slurm one." example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Generation            int64     `json:"generation" doc:"From 1; + 1 when the member comes back or the site binding is replaced; kept on retirement." example:"1"`
	Revision              int64     `json:"revision" doc:"Counts material changes (generation, retirement, the ready account's UID or readiness)." example:"2"`
	State                 string    `json:"state" enum:"ready,pending,retired" example:"ready"`
	Reasons               []string  `json:"reasons" doc:"pending: account_missing, account_incomplete, account_ambiguous; retired: member_removed, site_binding_retired." example:"[]"`
	AccountUID            string    `json:"account_uid" doc:"The ready account's UID; empty unless ready." example:"3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41"`
	AllocationID          string    `json:"allocation_id" doc:"The allocation the ready account was reported in; empty unless ready."`
	Namespace             string    `json:"namespace" doc:"That allocation's native scope; empty unless ready." example:"waldur-alpha-gpu-ns"`
	SiteBindingID         string    `json:"site_binding_id" doc:"Beto's site binding the generation rests on (evidence)."`
	SiteUsername          string    `json:"site_username" doc:"Its Site username (evidence)." example:"alice"`
	SiteBindingGeneration int64     `json:"site_binding_generation" doc:"Beto's own generation of it (evidence, not the binding's)."`
	ChangedAt             time.Time `json:"changed_at" doc:"Server time of the revision."`
}

func memberBindingBody(e domain.MemberBindingChanged) MemberBindingBody {
	b := MemberBindingBody{
		BindingID: e.BindingID, PartyID: e.PartyID, ProjectID: e.ProjectID, Environment: e.Environment, Account: e.Account,
		Generation: e.Generation, Revision: e.Revision, State: e.State, Reasons: e.Reasons, AccountUID: e.AccountUID,
		AllocationID: e.AllocationID, Namespace: e.Namespace, SiteBindingID: e.SiteBindingID, SiteUsername: e.SiteUsername,
		SiteBindingGeneration: e.SiteBindingGeneration, ChangedAt: e.ChangedAt,
	}
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	return b
}

// BindingConflictBody is a provider Project claimed by several Projects.
type BindingConflictBody struct {
	Instance          string   `json:"instance" example:"https://waldur.example.org"`
	ProviderProjectID string   `json:"provider_project_id" example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	ProjectIDs        []string `json:"project_ids" doc:"The canonical Projects claiming it."`
}
