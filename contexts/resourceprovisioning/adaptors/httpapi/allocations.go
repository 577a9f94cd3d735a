package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

type listAllocationsInput struct {
	Cursor string `query:"cursor" maxLength:"512" doc:"Opaque cursor from next_cursor; empty for the first page."`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size."`
}

type listAllocationsOutput struct {
	Body struct {
		Allocations   []AllocationBody `json:"allocations"`
		NextCursor    string           `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
		ChangesCursor string           `json:"changes_cursor,omitempty" doc:"First page only: the change feed position captured before paging began; follow /resource-provisioning/changes?after=<changes_cursor>."`
	}
}

func (h *Handlers) listAllocationsOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "list-allocations",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/allocations",
		Summary:     "The complete allocation snapshot, paginated",
		Description: "Every allocation in a stable order (by ID) with an opaque cursor. The first page carries " +
			"`changes_cursor`, the change feed position captured before paging began: after the last page, " +
			"follow `GET /resource-provisioning/changes?after=<changes_cursor>` and apply only newer revisions. " +
			"Lifecycle and freshness are computed at read time. A cursor this API did not issue is 400 " +
			"`invalid-cursor`."}, cursorReasons())
}

// listAllocations answers one page of the complete allocation snapshot.
func (h *Handlers) listAllocations(ctx context.Context, in *listAllocationsInput) (*listAllocationsOutput, error) {
	after, err := decodeCursor(snapshotCursorPrefix, in.Cursor, "query.cursor", isAllocationID)
	if err != nil {
		return nil, err
	}
	page, err := h.Service.Allocations(ctx, after, in.Limit)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &listAllocationsOutput{}
	out.Body.Allocations = allocationBodies(page.Allocations)
	if page.After != "" {
		out.Body.NextCursor = encodeCursor(snapshotCursorPrefix, page.After)
	}
	if page.First {
		out.Body.ChangesCursor = FeedCursor(page.ChangesHead)
	}
	return out, nil
}
