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

type inconsistenciesOutput struct {
	Body struct {
		Allocations        []AllocationInconsistencyBody `json:"allocations" doc:"Inconsistent allocations in ID order."`
		AmbiguousResources *[]AmbiguousResourceBody      `json:"ambiguous_resources,omitempty" doc:"First page only (an empty list when there is none): every Project with several non-retired allocations at one Site (planning answers resource_ambiguous)."`
		BindingConflicts   *[]BindingConflictBody        `json:"binding_conflicts,omitempty" doc:"First page only (an empty list when there is none): every provider Project claimed by several canonical Projects (its allocations stay project_unbound)."`
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
			"provider Project claimed by several canonical Projects (`binding_conflicts`). A cursor this API did not " +
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
		out.Body.AmbiguousResources, out.Body.BindingConflicts = &ambiguous, &conflicts
	}
	if page.After != "" {
		out.Body.NextCursor = encodeCursor(inconsistencyCursorPrefix, page.After)
	}
	return out
}
