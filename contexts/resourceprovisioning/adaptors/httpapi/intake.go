package httpapi

import (
	"context"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// ReportBody is one resource report, in the agent's Waldur vocabulary.
type ReportBody struct {
	ProviderResourceID string           `json:"provider_resource_id" minLength:"1" maxLength:"256" doc:"Waldur marketplace resource UUID." example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
	OfferingID         string           `json:"offering_id" minLength:"1" maxLength:"256" doc:"Waldur offering UUID." example:"9b8e7d6c5b4a43219f8e7d6c5b4a3210"`
	ProviderProjectID  string           `json:"provider_project_id" minLength:"1" maxLength:"256" doc:"Waldur Project UUID; resolved to a canonical Project through the Project view." example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	State              string           `json:"state" enum:"Creating,OK,Erred,Updating,Terminating,Terminated" doc:"Waldur resource state." example:"OK"`
	Paused             bool             `json:"paused" doc:"Waldur's paused flag (a paused allocation is suspended)."`
	Limits             map[string]int64 `json:"limits" doc:"Configured limits in canonical units: cpu (millicores), memory and storage (bytes), gpu.<vendor> (devices)." example:"{\"cpu\":32000,\"memory\":137438953472,\"storage\":536870912000,\"gpu.nvidia\":2}"`
	AppliedLimits      map[string]int64 `json:"applied_limits,omitempty" doc:"What the Site enforces (the namespace quota read back), same units; omit until confirmed." example:"{\"cpu\":32000,\"memory\":137438953472,\"storage\":536870912000,\"gpu.nvidia\":2}"`
	NativeScope        string           `json:"native_scope,omitempty" maxLength:"256" doc:"The namespace at the Site; empty until created." example:"waldur-alpha-gpu-ns"`
	ObservedAt         time.Time        `json:"observed_at" doc:"When the agent read these facts (orders the reports of one allocation; microsecond precision)." example:"2026-08-20T10:15:02.123456Z"`
}

// ToDomain converts the wire report.
func (b ReportBody) ToDomain() domain.Report {
	return domain.Report{
		ProviderResourceID: b.ProviderResourceID, OfferingID: b.OfferingID, ProviderProjectID: b.ProviderProjectID,
		State: b.State, Paused: b.Paused, Limits: b.Limits, AppliedLimits: b.AppliedLimits,
		NativeScope: b.NativeScope, ObservedAt: b.ObservedAt,
	}
}

type submitReportsInput struct {
	Site string `path:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site; must match the caller's site:<id> key." example:"alpha"`
	Body struct {
		Reports []ReportBody `json:"reports" minItems:"1" maxItems:"100" doc:"1 to 100 reports, applied all or nothing."`
	}
}

// ReportResultBody is the outcome of one accepted report.
type ReportResultBody struct {
	ProviderResourceID string `json:"provider_resource_id" example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
	AllocationID       string `json:"allocation_id" doc:"UUIDv5 of <site>/<provider resource ID>." example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
	Outcome            string `json:"outcome" enum:"created,changed,renewed,duplicate" example:"created"`
	Revision           int64  `json:"revision" doc:"The allocation's revision after this report." example:"1"`
	Lifecycle          string `json:"lifecycle" enum:"pending,ready,changing,suspended,retired" example:"ready"`
}

type submitReportsOutput struct {
	Body struct {
		Results []ReportResultBody `json:"results" doc:"One result per report, in request order."`
	}
}

func (a *API) submitReports(ctx context.Context, in *submitReportsInput) (*submitReportsOutput, error) {
	if err := requireSite(ctx, in.Site); err != nil {
		return nil, err
	}
	res, err := a.svc.SubmitReports(ctx, in.Site, reportsOf(in))
	if err != nil {
		return nil, a.problem("submit reports", err)
	}
	out := &submitReportsOutput{}
	out.Body.Results = make([]ReportResultBody, len(res))
	for i, r := range res {
		out.Body.Results[i] = ReportResultBody{ProviderResourceID: r.ProviderResourceID, AllocationID: r.AllocationID, Outcome: r.Outcome, Revision: r.Revision, Lifecycle: r.Lifecycle}
	}
	return out, nil
}

// ProviderBindingBody binds a canonical object to a provider's object.
type ProviderBindingBody struct {
	Provider   string `json:"provider" doc:"Provider name; only \"waldur\" bindings resolve allocations." example:"waldur"`
	Instance   string `json:"instance" doc:"Provider instance; Waldur bindings count only for the configured --waldur-instance." example:"https://waldur.example.org"`
	ExternalID string `json:"external_id" doc:"The provider's ID (for Waldur: the Project UUID)." example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
}

// MembershipBody is a Party's role in a Project (received, not used yet).
type MembershipBody struct {
	PartyID         string               `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Role            string               `json:"role" example:"member"`
	ProviderBinding *ProviderBindingBody `json:"provider_binding,omitempty"`
}

// ProjectBody is a project.ProjectChanged payload.
type ProjectBody struct {
	ID               string                `json:"id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Revision         int64                 `json:"revision" minimum:"0" doc:"The Project's revision; the view keeps the highest." example:"3"`
	State            string                `json:"state" example:"active"`
	ProviderBindings []ProviderBindingBody `json:"provider_bindings"`
	Memberships      []MembershipBody      `json:"memberships,omitempty"`
}

// PartyBindingBody is a party.PartyProviderBindingChanged payload.
type PartyBindingBody struct {
	ID         string `json:"id" example:"e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"`
	PartyID    string `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Revision   int64  `json:"revision" minimum:"0" example:"2"`
	Provider   string `json:"provider" example:"site"`
	Instance   string `json:"instance" doc:"For provider site: the Site's environment." example:"alpha-k8s"`
	ExternalID string `json:"external_id" doc:"For provider site: the Site username." example:"alice"`
	State      string `json:"state" example:"verified"`
	Generation int64  `json:"generation" minimum:"0" example:"1"`
}

type betoEventInput struct {
	Body struct {
		EventID    string            `json:"event_id" minLength:"1" maxLength:"256" example:"2b6f0c1d-2e3f-4a5b-8c9d-0e1f2a3b4c5d"`
		Type       string            `json:"type" doc:"project.ProjectChanged or party.PartyProviderBindingChanged; anything else is 422." example:"project.ProjectChanged"`
		OccurredAt time.Time         `json:"occurred_at" example:"2026-08-20T10:00:00Z"`
		Project    *ProjectBody      `json:"project,omitempty" doc:"Set for project.ProjectChanged."`
		Binding    *PartyBindingBody `json:"binding,omitempty" doc:"Set for party.PartyProviderBindingChanged."`
	}
}

type betoEventOutput struct {
	Body struct {
		EventID string `json:"event_id" example:"2b6f0c1d-2e3f-4a5b-8c9d-0e1f2a3b4c5d"`
		Outcome string `json:"outcome" enum:"applied,ignored,duplicate" doc:"applied: the view moved; ignored: recorded, revision not newer; duplicate: received before with identical content." example:"applied"`
	}
}

func (a *API) receiveBetoEvent(ctx context.Context, in *betoEventInput) (*betoEventOutput, error) {
	if err := requirePrincipal(ctx, betoPrincipal()); err != nil {
		return nil, err
	}
	res, err := a.svc.ReceiveBetoEvent(ctx, betoEventOf(in))
	if err != nil {
		return nil, a.problem("receive beto event", err)
	}
	out := &betoEventOutput{}
	out.Body.EventID, out.Body.Outcome = res.EventID, res.Outcome
	return out, nil
}

func (b ProviderBindingBody) toDomain() domain.ProviderBinding {
	return domain.ProviderBinding{Provider: b.Provider, Instance: b.Instance, ExternalID: b.ExternalID}
}
