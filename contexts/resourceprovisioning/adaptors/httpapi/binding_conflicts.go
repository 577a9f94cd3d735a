package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

type bindingConflictsOutput struct {
	Body struct {
		Conflicts []BindingConflictBody `json:"conflicts"`
	}
}

func (h *Handlers) bindingConflictsOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "project-binding-conflicts",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/project-binding-conflicts",
		Summary:     "Provider Projects claimed by several canonical Projects",
		Description: "Conflicts are kept visible, never resolved by guessing: allocations of these provider " +
			"Projects stay `pending` with `project_unbound`."}, readReasons())
}

// bindingConflicts answers the provider Projects claimed by several Projects.
func (h *Handlers) bindingConflicts(ctx context.Context, _ *struct{}) (*bindingConflictsOutput, error) {
	cs, err := h.Service.BindingConflicts(ctx)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &bindingConflictsOutput{}
	out.Body.Conflicts = make([]BindingConflictBody, 0, len(cs))
	for _, c := range cs {
		out.Body.Conflicts = append(out.Body.Conflicts, BindingConflictBody{Instance: c.Instance, ProviderProjectID: c.ProviderProjectID, ProjectIDs: c.ProjectIDs})
	}
	return out, nil
}
