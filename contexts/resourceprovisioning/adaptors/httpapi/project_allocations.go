package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

type projectAllocationsInput struct {
	Project string `path:"project" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"Canonical Project ID: a lower-case UUID." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Site    string `query:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Only this Site; every Site when absent." example:"alpha"`
}

type projectAllocationsOutput struct {
	Body struct {
		Allocations []AllocationBody `json:"allocations"`
	}
}

func (h *Handlers) projectAllocationsOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "project-allocations",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/projects/{project}/allocations",
		Summary:     "A Project's allocations, with lifecycle and freshness",
		Description: "The allocations bound to a canonical Project (a lower-case UUID), at one Site (`site`) or all. An allocation " +
			"not seen within the freshness bound (default 15 minutes) reads `fresh: false` and, unless suspended " +
			"or retired, `pending` with reason `stale`. A store that cannot be read is 503, never a guess."}, readReasons())
}

// projectAllocations answers a Project's allocations with lifecycle and freshness.
func (h *Handlers) projectAllocations(ctx context.Context, in *projectAllocationsInput) (*projectAllocationsOutput, error) {
	vs, err := h.Service.ProjectAllocations(ctx, in.Project, in.Site)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &projectAllocationsOutput{}
	out.Body.Allocations = allocationBodies(vs)
	return out, nil
}
