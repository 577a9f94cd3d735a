package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

type changesInput struct {
	After string `query:"after" maxLength:"512" doc:"Opaque cursor (changes_cursor or next_cursor); empty for the start of the feed."`
	Limit int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Most changes to return."`
}

// ChangeBody is one change at its feed position: an AllocationChanged or a
// MemberBindingChanged.
type ChangeBody struct {
	Cursor     string                 `json:"cursor" doc:"This change's position as an opaque cursor."`
	Type       string                 `json:"type" enum:"AllocationChanged,MemberBindingChanged" example:"AllocationChanged"`
	Allocation *AllocationChangedBody `json:"allocation,omitempty" doc:"Set for AllocationChanged: the allocation at its new revision."`
	Binding    *MemberBindingBody     `json:"binding,omitempty" doc:"Set for MemberBindingChanged: the member binding at its new revision."`
}

// AllocationChangedBody is the AllocationChanged event.
type AllocationChangedBody struct {
	AllocationID       string            `json:"allocation_id" example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
	Site               string            `json:"site" example:"alpha"`
	Revision           int64             `json:"revision" example:"2"`
	ProjectID          string            `json:"project_id"`
	ProviderResourceID string            `json:"provider_resource_id"`
	OfferingID         string            `json:"offering_id"`
	ProviderProjectID  string            `json:"provider_project_id"`
	NativeScope        string            `json:"native_scope"`
	Lifecycle          string            `json:"lifecycle" enum:"pending,ready,changing,suspended,retired"`
	Reasons            []string          `json:"reasons"`
	ConfiguredLimits   map[string]int64  `json:"configured_limits"`
	AppliedLimits      *map[string]int64 `json:"applied_limits,omitempty"`
	WaldurState        string            `json:"waldur_state"`
	Paused             bool              `json:"paused"`
	ObservedAt         time.Time         `json:"observed_at"`
	ChangedAt          time.Time         `json:"changed_at" doc:"Server receipt time of the report that made the change."`
}

type changesOutput struct {
	Body struct {
		Changes    []ChangeBody `json:"changes"`
		NextCursor string       `json:"next_cursor" doc:"Pass as after to continue (unchanged when there was nothing new)."`
	}
}

func (h *Handlers) changesOperation() huma.Operation {
	return readerOperation(huma.Operation{
		OperationID: "allocation-changes",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/changes",
		Summary:     "AllocationChanged and MemberBindingChanged events in commit order after a cursor",
		Description: "The change feed: one AllocationChanged per material change of an allocation (in `allocation`) " +
			"and one MemberBindingChanged per material change of a Runtime member binding (in `binding`), in " +
			"commit order; `type` says which. A change " +
			"that commits late is never skipped: positions are taken under one lock held until commit. Pass " +
			"`next_cursor` as `after` to continue. A cursor this API did not issue (malformed, or a position beyond " +
			"the feed head) is 400 `invalid-cursor`."}, cursorReasons())
}

// changes answers the change feed after a cursor.
func (h *Handlers) changes(ctx context.Context, in *changesInput) (*changesOutput, error) {
	raw, err := decodeCursor(feedCursorPrefix, in.After, "query.after", isPosition)
	if err != nil {
		return nil, err
	}
	var after int64
	if raw != "" {
		after, _ = strconv.ParseInt(raw, 10, 64) // isPosition checked it
	}
	page, err := h.Service.Changes(ctx, after, in.Limit)
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &changesOutput{}
	out.Body.Changes = make([]ChangeBody, 0, len(page.Changes))
	for _, c := range page.Changes {
		cb := ChangeBody{Cursor: FeedCursor(c.Position), Type: c.Type}
		switch c.Type {
		case domain.MemberBindingChangedType:
			b := memberBindingBody(c.Binding)
			cb.Binding = &b
		default:
			ab := changedBody(c.Event)
			cb.Allocation = &ab
		}
		out.Body.Changes = append(out.Body.Changes, cb)
	}
	out.Body.NextCursor = FeedCursor(page.Next)
	return out, nil
}

func changedBody(e domain.AllocationChanged) AllocationChangedBody {
	b := AllocationChangedBody{
		AllocationID: e.AllocationID, Site: e.Site, Revision: e.Revision,
		ProjectID: e.ProjectID, ProviderResourceID: e.ProviderResourceID, OfferingID: e.OfferingID,
		ProviderProjectID: e.ProviderProjectID, NativeScope: e.NativeScope, Lifecycle: e.Lifecycle,
		Reasons: e.Reasons, ConfiguredLimits: e.ConfiguredLimits, WaldurState: e.WaldurState, Paused: e.Paused,
		ObservedAt: e.ObservedAt, ChangedAt: e.ChangedAt,
	}
	if b.Reasons == nil {
		b.Reasons = []string{}
	}
	if e.AppliedLimits != nil {
		applied := map[string]int64(e.AppliedLimits)
		b.AppliedLimits = &applied
	}
	return b
}
