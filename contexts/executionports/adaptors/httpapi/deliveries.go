package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The binding deliveries read (docs/execution-ports.md#delivery-of-member-bindings):
// per member binding of an environment, the desired revision (the owner's,
// read live) and the delivered and applied revisions.

// DeliveryBody is one binding's delivery state.
type DeliveryBody struct {
	BindingID string `json:"binding_id" doc:"The member binding (account_ref.binding_id of commands on the stream)."`
	PartyID   string `json:"party_id,omitempty" doc:"The member, while the owner lists the binding."`
	ProjectID string `json:"project_id,omitempty" doc:"The Project, while the owner lists the binding."`
	// DesiredRevision is 0 for a binding the owner no longer lists.
	DesiredRevision int64  `json:"desired_revision" doc:"The binding's revision at its owner resource_provisioning, read now (0: no longer listed)."`
	DesiredState    string `json:"desired_state,omitempty" enum:"ready,pending,retired" doc:"The binding's state at its owner: only ready (with an account UID) and retired bindings are delivered."`
	// The newest delivery, absent until one is planned.
	DeliveredRevision int64      `json:"delivered_revision,omitempty" doc:"The newest revision planned for delivery (its command's bytes are stored before it is appended)."`
	Operation         string     `json:"operation,omitempty" enum:"bind-member,retire-member" doc:"The delivered command's operation."`
	CommandID         string     `json:"command_id,omitempty" doc:"The delivered command's ID: the UUIDv5 of <environment>/<binding>/<revision>."`
	Sequence          int64      `json:"sequence,omitempty" doc:"The stream sequence it was appended at (absent until appended)."`
	Outcome           string     `json:"outcome,omitempty" enum:"succeeded,failed,refused" doc:"The Runtime's result, once acknowledged."`
	Reason            string     `json:"reason,omitempty" doc:"The result's reason, once acknowledged."`
	AppliedRevision   int64      `json:"applied_revision,omitempty" doc:"The revision the Runtime's result acknowledges as applied (detail.applied_revision of a succeeded result)."`
	AcknowledgedAt    *time.Time `json:"acknowledged_at,omitempty" doc:"When the result was recorded."`
}

// DeliveriesBody answers the read.
type DeliveriesBody struct {
	Environment string         `json:"environment"`
	Bindings    []DeliveryBody `json:"bindings" doc:"Every binding the owner lists or that was delivered, in binding ID order." nullable:"false"`
}

type deliveriesOutput struct {
	Body DeliveriesBody
}

func (h *Handlers) getBindingDeliveriesOperation() huma.Operation {
	return h.serviceOperation(huma.Operation{
		OperationID: "get-binding-deliveries", Method: http.MethodGet, Path: "/execution/v1/streams/{environment}/bindings",
		Summary:     "Read the delivery of member bindings",
		Description: "Per member binding of the environment, the desired revision (read live from resource_provisioning) and the newest delivered revision, its command, its sequence and the revision the Runtime's result acknowledges as applied. 503 when the owner or the store cannot be read.",
	}, map[int][]string{
		404: {siteprotocol.ProblemUnknownEnvironment}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	})
}

// getBindingDeliveries answers, per member binding of an environment, the
// desired, delivered and applied revisions
// (docs/execution-ports.md#delivery-of-member-bindings).
func (h *Handlers) getBindingDeliveries(ctx context.Context, in *EnvironmentPath) (*deliveriesOutput, error) {
	states, err := h.Deliverer.DeliveryStates(ctx, in.Environment)
	if err != nil {
		return nil, h.problem(ctx, err, "", httpserver.Unavailable{
			Err: application.ErrResourceLookupUnavailable, Detail: UnavailableDetail, Log: "binding deliveries: the binding owner " + application.ResourcesOwner + " cannot be read",
		})
	}
	body := DeliveriesBody{Environment: in.Environment, Bindings: make([]DeliveryBody, 0, len(states))}
	for _, s := range states {
		b := DeliveryBody{BindingID: s.BindingID, PartyID: s.PartyID, ProjectID: s.ProjectID, DesiredRevision: s.DesiredRevision, DesiredState: s.DesiredState}
		if d := s.Delivered; d != nil {
			b.DeliveredRevision, b.Operation, b.CommandID, b.Sequence = d.Revision, string(d.Operation), d.CommandID, d.Sequence
			b.Outcome, b.Reason, b.AppliedRevision = d.Outcome, d.Reason, d.AppliedRevision
			if !d.AcknowledgedAt.IsZero() {
				at := d.AcknowledgedAt
				b.AcknowledgedAt = &at
			}
		}
		body.Bindings = append(body.Bindings, b)
	}
	return &deliveriesOutput{Body: body}, nil
}
