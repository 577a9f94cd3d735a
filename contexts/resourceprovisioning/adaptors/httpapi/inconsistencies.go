package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
)

// inconsistencyCursorPrefix starts the value inside an inconsistencies
// cursor (another route's cursor is 400 invalid-cursor here).
const inconsistencyCursorPrefix = "i1:"

type inconsistenciesInput struct {
	Cursor string `query:"cursor" maxLength:"512" doc:"Opaque cursor from next_cursor; empty for the first page."`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Most allocations per page."`
}

// AllocationInconsistencyBody is one inconsistent allocation: the
// allocation as readers see it (configured_limits and applied_limits both)
// and every kind that applies.
type AllocationInconsistencyBody struct {
	Kinds      []string       `json:"kinds" doc:"limits_differ (applied limits differ from the configured ones), limits_not_applied (a configured key has no applied value), stale (not seen within the freshness bound), in this order." example:"[\"limits_differ\"]"`
	Allocation AllocationBody `json:"allocation"`
}

// AmbiguousResourceBody is a Project with several non-retired allocations
// at one Site.
type AmbiguousResourceBody struct {
	ProjectID     string   `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Site          string   `json:"site" example:"alpha"`
	AllocationIDs []string `json:"allocation_ids" doc:"Its non-retired allocations at the Site, in ID order."`
}

// AccountConflictBody is a member binding held pending because a binding
// of another Party at its environment holds its account or the account's
// UID (docs/resource-provisioning.md#one-party-per-account).
type AccountConflictBody struct {
	BindingID   string   `json:"binding_id" example:"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab"`
	PartyID     string   `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	ProjectID   string   `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Environment string   `json:"environment" example:"alpha-hpc"`
	Account     string   `json:"account" doc:"The account the binding would act as, which another Party holds." example:"jdoe"`
	Generation  int64    `json:"generation" example:"1"`
	Reasons     []string `json:"reasons" doc:"The binding's reasons: account_taken." example:"[\"account_taken\"]"`
}

type inconsistenciesOutput struct {
	Body struct {
		Allocations        []AllocationInconsistencyBody `json:"allocations" doc:"Inconsistent allocations in ID order."`
		AmbiguousResources *[]AmbiguousResourceBody      `json:"ambiguous_resources,omitempty" doc:"First page only (an empty list when there is none): every Project with several non-retired allocations at one Site (planning answers resource_ambiguous)."`
		BindingConflicts   *[]BindingConflictBody        `json:"binding_conflicts,omitempty" doc:"First page only (an empty list when there is none): every provider Project claimed by several canonical Projects (its allocations stay project_unbound)."`
		AccountConflicts   *[]AccountConflictBody        `json:"account_conflicts,omitempty" doc:"First page only (an empty list when there is none): every member binding held pending (account_taken) because a live binding of another Party at its environment holds its account or the account's UID; nothing is delivered for it."`
		NextCursor         string                        `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

func (h *Handlers) inconsistenciesOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "list-inconsistencies",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/inconsistencies",
		Summary:     "Allocations and Projects that need an operator's attention",
		Description: "Allocations, neither retired nor suspended, whose applied limits differ from the configured ones " +
			"(`limits_differ`, with both limit sets), that lack an applied value for a configured key " +
			"(`limits_not_applied`) or that were not seen within the freshness bound (`stale`), in ID order with an " +
			"opaque cursor like the snapshot; a fresh `ready` allocation is never listed. The first page also lists " +
			"every Project with several non-retired allocations at one Site (`ambiguous_resources`) and every " +
			"provider Project claimed by several canonical Projects (`binding_conflicts`) and every member binding held " +
			"back because another Party's binding at its environment holds its account (`account_conflicts`). A cursor this API did not " +
			"issue is 400 `invalid-cursor`."}, cursorReasons())
}

// inconsistencies answers one page of what needs an operator.
func (h *Handlers) inconsistencies(ctx context.Context, in *inconsistenciesInput) (*inconsistenciesOutput, error) {
	after, err := decodeCursor(inconsistencyCursorPrefix, in.Cursor, "query.cursor", isAllocationID)
	if err != nil {
		return nil, err
	}
	page, err := h.Service.Inconsistencies(ctx, after, in.Limit)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	return inconsistencyBody(page), nil
}

func inconsistencyBody(page application.InconsistencyPage) *inconsistenciesOutput {
	out := &inconsistenciesOutput{}
	out.Body.Allocations = make([]AllocationInconsistencyBody, 0, len(page.Allocations))
	for _, ai := range page.Allocations {
		out.Body.Allocations = append(out.Body.Allocations, AllocationInconsistencyBody{Kinds: ai.Kinds, Allocation: allocationBody(ai.Allocation)})
	}
	if page.First {
		ambiguous := make([]AmbiguousResourceBody, 0, len(page.AmbiguousResources))
		for _, r := range page.AmbiguousResources {
			ambiguous = append(ambiguous, AmbiguousResourceBody{ProjectID: r.ProjectID, Site: r.Site, AllocationIDs: r.AllocationIDs})
		}
		conflicts := make([]BindingConflictBody, 0, len(page.BindingConflicts))
		for _, c := range page.BindingConflicts {
			conflicts = append(conflicts, BindingConflictBody{Instance: c.Instance, ProviderProjectID: c.ProviderProjectID, ProjectIDs: c.ProjectIDs})
		}
		accounts := make([]AccountConflictBody, 0, len(page.AccountConflicts))
		for _, b := range page.AccountConflicts {
			accounts = append(accounts, AccountConflictBody{
				BindingID: b.ID, PartyID: b.PartyID, ProjectID: b.ProjectID, Environment: b.Environment,
				Account: b.AccountName(), Generation: b.Generation, Reasons: b.Reasons,
			})
		}
		out.Body.AmbiguousResources, out.Body.BindingConflicts, out.Body.AccountConflicts = &ambiguous, &conflicts, &accounts
	}
	if page.After != "" {
		out.Body.NextCursor = encodeCursor(inconsistencyCursorPrefix, page.After)
	}
	return out
}
