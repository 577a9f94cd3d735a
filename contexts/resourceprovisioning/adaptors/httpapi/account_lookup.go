package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

type accountLookupInput struct {
	Site            string `path:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site; must match the caller's site:<id> key." example:"alpha"`
	Username        string `query:"username" maxLength:"256" doc:"The Waldur offering username of the resource user (the Site username; required; at most 256 bytes of text)." example:"alice"`
	ProviderProject string `query:"provider_project" maxLength:"256" doc:"The Waldur Project UUID of the resource (required; at most 256 bytes of text)." example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	Environment     string `query:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site's environment; required when the Site has several." example:"alpha-k8s"`
}

type accountLookupOutput struct {
	Body struct {
		State       string   `json:"state" enum:"bound,retired,unknown" example:"bound"`
		Reasons     []string `json:"reasons" doc:"unknown: the step that found nothing; retired: why (member_removed, site_binding_retired)." example:"[]"`
		Environment string   `json:"environment,omitempty" example:"alpha-k8s"`
		ProjectID   string   `json:"project_id,omitempty" doc:"The canonical Project." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
		PartyID     string   `json:"party_id,omitempty" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
		Account     string   `json:"account,omitempty" doc:"The account to write: member-<party_id> at a kubernetes environment, the Party's site username at a slurm one." example:"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
		BindingID   string   `json:"binding_id,omitempty" doc:"The member binding: account_ref.binding_id of the Site protocol." example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
		Revision    int64    `json:"revision,omitempty" example:"1"`
		Generation  int64    `json:"generation,omitempty" example:"1"`
	}
}

func (h *Handlers) accountLookupOperation() huma.Operation {
	return reporterOperation(huma.Operation{
		OperationID: "account-lookup",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/{site}/account-lookup",
		Summary:     "Resolve a Site username in a Waldur Project to its member binding",
		Description: "The Site's agent resolves the offering username of a resource user (`username`) and the Waldur " +
			"Project of the resource (`provider_project`) at one of its environments (`environment`, required " +
			"when the Site has several) by the four steps of the account's finding: the username's newest site " +
			"binding at the environment (never an older one, nothing guessed from an email or a similar name), " +
			"the canonical Project claiming the Waldur Project, the Party's member binding in it, and an " +
			"allocation of the Project at the Site. `state` is `bound` (write `binding_id` and `generation` on " +
			"the account: `member-<party_id>` at a kubernetes environment, the site username at a slurm one), `retired` (the binding is retired: remove the account) or " +
			"`unknown` with the step that found nothing in `reasons` (`no_environment`, `unknown_username`, " +
			"`site_binding_not_verified`, `project_unbound`, `not_a_member`, `account_taken` (another Party's binding holds " +
			"the account: make none), `no_allocation`). A missing " +
			"username or provider_project, or an environment that is not this Site's, is 422 naming each. Only " +
			"the key of `site:<site>` is admitted (any other key is 403 `forbidden`)."}, readReasons())
}

// accountLookup resolves a Site username in a Waldur Project to its member binding.
func (h *Handlers) accountLookup(ctx context.Context, in *accountLookupInput) (*accountLookupOutput, error) {
	l, err := h.Service.LookupAccount(ctx, in.Site, in.Environment, in.Username, in.ProviderProject)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &accountLookupOutput{}
	b := &out.Body
	b.State, b.Reasons, b.Environment, b.ProjectID, b.PartyID = l.State, l.Reasons, l.Environment, l.ProjectID, l.PartyID
	b.Account, b.BindingID, b.Revision, b.Generation = l.Account, l.BindingID, l.Revision, l.Generation
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	return out, nil
}
