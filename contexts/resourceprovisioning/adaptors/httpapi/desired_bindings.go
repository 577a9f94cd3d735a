package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// bindingCursorPrefix starts the desired-binding read's opaque cursors.
const bindingCursorPrefix = "b1:"

// desiredBindingsReasons are cursorReasons and 404 unknown-environment:
// the reasons of the desired-binding read.
func desiredBindingsReasons() map[int][]string {
	r := cursorReasons()
	r[http.StatusNotFound] = []string{ReasonUnknownEnvironment}
	return r
}

type desiredBindingsInput struct {
	Environment string `path:"environment" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The execution environment." example:"alpha-k8s"`
	Cursor      string `query:"cursor" maxLength:"512" doc:"Opaque cursor from next_cursor; empty for the first page."`
	Limit       int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size."`
}

// DesiredEntryBody is one member of an environment's desired bindings.
type DesiredEntryBody struct {
	ProjectID string             `json:"project_id" example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	PartyID   string             `json:"party_id" example:"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"`
	Binding   *MemberBindingBody `json:"binding,omitempty" doc:"The member's binding; absent when it has none (reasons say why)."`
	Reasons   []string           `json:"reasons" doc:"Why a member has no binding: no_site_binding (no verified site binding at the environment)." example:"[]"`
}

type desiredBindingsOutput struct {
	Body struct {
		Environment   string             `json:"environment" example:"alpha-k8s"`
		Site          string             `json:"site" example:"alpha"`
		Entries       []DesiredEntryBody `json:"entries"`
		NextCursor    string             `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
		ChangesCursor string             `json:"changes_cursor,omitempty" doc:"First page only: the change feed position captured before paging began."`
	}
}

func (h *Handlers) desiredBindingsOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "desired-bindings",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/environments/{environment}/bindings",
		Summary:     "An environment's desired Runtime member bindings, paginated",
		Description: "Every member binding at the environment, live and retired (a retired binding is to be " +
			"delivered as retired), and every member of a Project with a non-retired allocation at the " +
			"environment's Site that has no binding, with `reasons` (`no_site_binding`), in (Project, Party) order " +
			"with an opaque cursor. The first page carries `changes_cursor`, the change feed position captured " +
			"before paging began: after the last page, follow `GET /resource-provisioning/changes?after=<changes_cursor>` " +
			"and apply only newer binding revisions. An environment not configured is 404 `unknown-environment`; " +
			"a cursor this API did not issue is 400 `invalid-cursor`."}, desiredBindingsReasons())
}

// desiredBindings answers one page of an environment's desired member bindings.
func (h *Handlers) desiredBindings(ctx context.Context, in *desiredBindingsInput) (*desiredBindingsOutput, error) {
	after, err := decodeCursor(bindingCursorPrefix, in.Cursor, "query.cursor", func(v string) bool {
		_, _, ok := application.ParseBindingCursor(v)
		return ok
	})
	if err != nil {
		return nil, err
	}
	page, err := h.Service.DesiredBindings(ctx, in.Environment, after, in.Limit)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &desiredBindingsOutput{}
	out.Body.Environment, out.Body.Site = page.Environment, page.Site
	out.Body.Entries = make([]DesiredEntryBody, 0, len(page.Entries))
	for _, e := range page.Entries {
		en := DesiredEntryBody{ProjectID: e.ProjectID, PartyID: e.PartyID, Reasons: e.Reasons}
		if e.Binding != nil {
			b := memberBindingBody(domain.NewMemberBindingChanged(*e.Binding))
			en.Binding = &b
		}
		if en.Reasons == nil {
			en.Reasons = []string{}
		}
		out.Body.Entries = append(out.Body.Entries, en)
	}
	if page.After != "" {
		out.Body.NextCursor = encodeCursor(bindingCursorPrefix, page.After)
	}
	if page.First {
		out.Body.ChangesCursor = FeedCursor(page.ChangesHead)
	}
	return out, nil
}
