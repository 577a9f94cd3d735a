package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

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

func (h *Handlers) receiveBetoEventOperation(reg huma.Registry) huma.Operation {
	return betoOperation(huma.Operation{
		OperationID: "receive-beto-event",
		Method:      http.MethodPost,
		Path:        "/resource-provisioning/events/beto",
		Summary:     "Receive one encoded Beto event",
		Description: "`project.ProjectChanged` builds the Project view (a canonical Project's Waldur provider " +
			"Projects); `party.PartyProviderBindingChanged` the Party binding view. A receipt per event_id: an " +
			"identical duplicate answers `duplicate`, the same event_id with other content is 409 `event_conflict`. " +
			"An event whose revision is not newer than the view's is recorded and answers `ignored`. Events never " +
			"rewrite allocations: the next report of an allocation resolves its Project. Canonical IDs " +
			"(`project.id`, `memberships[].party_id`, `binding.id`, `binding.party_id`) are lower-case UUIDs; " +
			"`occurred_at` has at most microsecond precision. " + bodyRules + " Only `service:beto` may post (any other " +
			"key is 403 `forbidden` before the body is read).",
		MaxBodyBytes: MaxIntakeBodyBytes + 1, // guardJSONBody reads at most MaxIntakeBodyBytes
		Middlewares:  huma.Middlewares{guardJSONBody(reg, h.betoEventBody)}}, intakeReasons(domain.ReasonEventConflict))
}

// receiveBetoEvent applies one Beto event to the Project or Party binding view.
func (h *Handlers) receiveBetoEvent(ctx context.Context, in *betoEventInput) (*betoEventOutput, error) {
	res, err := h.Service.ReceiveBetoEvent(ctx, betoEventOf(in))
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &betoEventOutput{}
	out.Body.EventID, out.Body.Outcome = res.EventID, res.Outcome
	return out, nil
}

func (b ProviderBindingBody) toDomain() domain.ProviderBinding {
	return domain.ProviderBinding{Provider: b.Provider, Instance: b.Instance, ExternalID: b.ExternalID}
}
