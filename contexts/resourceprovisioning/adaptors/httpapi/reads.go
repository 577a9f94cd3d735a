package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// AllocationBody is an allocation as readers see it (the JSON form of
// application.AllocationView).
type AllocationBody struct {
	ID                 string            `json:"id" doc:"UUIDv5 of <site>/<provider resource ID>." example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
	Site               string            `json:"site" example:"alpha"`
	ProjectID          string            `json:"project_id" doc:"Canonical Project; empty while project_unbound." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	ProviderResourceID string            `json:"provider_resource_id" example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
	OfferingID         string            `json:"offering_id" example:"9b8e7d6c5b4a43219f8e7d6c5b4a3210"`
	ProviderProjectID  string            `json:"provider_project_id" example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	NativeScope        string            `json:"native_scope" example:"waldur-alpha-gpu-ns"`
	Lifecycle          string            `json:"lifecycle" enum:"pending,ready,changing,suspended,retired" example:"ready"`
	Reasons            []string          `json:"reasons" doc:"Reasons of a pending lifecycle: provisioning, provider_error, terminating, limits_not_applied, project_unbound, stale." example:"[]"`
	ConfiguredLimits   map[string]int64  `json:"configured_limits" doc:"cpu millicores, memory and storage bytes, gpu.<vendor> devices." example:"{\"cpu\":32000,\"memory\":137438953472}"`
	AppliedLimits      *map[string]int64 `json:"applied_limits,omitempty" doc:"What the Site enforces; absent until confirmed. For a changing allocation, the limits still in force." example:"{\"cpu\":32000,\"memory\":137438953472}"`
	WaldurState        string            `json:"waldur_state" example:"OK"`
	Paused             bool              `json:"paused"`
	Revision           int64             `json:"revision" doc:"Counts material changes." example:"1"`
	ObservedAt         time.Time         `json:"observed_at" doc:"The agent's observation time of the newest accepted report."`
	LastSeenAt         time.Time         `json:"last_seen_at" doc:"The server's receipt time of the newest accepted report."`
	Fresh              bool              `json:"fresh" doc:"false when last_seen_at is older than the freshness bound at read time." example:"true"`
}

func allocationBody(v application.AllocationView) AllocationBody {
	b := AllocationBody{
		ID: v.ID, Site: v.Site, ProjectID: v.ProjectID, ProviderResourceID: v.ProviderResourceID,
		OfferingID: v.OfferingID, ProviderProjectID: v.ProviderProjectID, NativeScope: v.NativeScope,
		Lifecycle: v.Lifecycle, Reasons: v.Reasons, ConfiguredLimits: v.ConfiguredLimits,
		WaldurState: v.WaldurState, Paused: v.Paused, Revision: v.Revision,
		ObservedAt: v.ObservedAt, LastSeenAt: v.LastSeenAt, Fresh: v.Fresh,
	}
	if v.AppliedLimits != nil {
		applied := v.AppliedLimits
		b.AppliedLimits = &applied
	}
	return b
}

func allocationBodies(vs []application.AllocationView) []AllocationBody {
	out := make([]AllocationBody, 0, len(vs))
	for _, v := range vs {
		out = append(out, allocationBody(v))
	}
	return out
}

// Cursor prefixes inside the opaque base64url tokens.
const (
	snapshotCursorPrefix = "a1:"
	feedCursorPrefix     = application.FeedCursorPrefix
)

func encodeCursor(prefix, v string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + v))
}

// decodeCursor returns the value inside token (a cursor with prefix), ""
// for an empty token, or a 400 invalid-cursor problem at location when the
// token is not one this API could have issued: not base64url, another
// prefix, an empty value, or a value that is not valid(v) (its form:
// an allocation ID, a feed position). Nothing of a forged cursor reaches
// the store.
func decodeCursor(prefix, token, location string, valid func(v string) bool) (string, error) {
	if token == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if v, ok := strings.CutPrefix(string(raw), prefix); err == nil && ok && v != "" && valid(v) {
		return v, nil
	}
	return "", httpserver.NewProblem(http.StatusBadRequest, ReasonInvalidCursor, "the cursor was not issued by this API",
		&huma.ErrorDetail{Location: location, Message: "not a cursor of this API", Value: token})
}

// isAllocationID reports whether v has the form of an allocation ID, the
// value of a snapshot cursor.
func isAllocationID(v string) bool { return len(domain.CheckCanonicalID("", v, true)) == 0 }

// isPosition reports whether v is the decimal form of a feed position, the
// value of a change feed cursor, as FeedCursor writes it.
func isPosition(v string) bool {
	p, err := strconv.ParseInt(v, 10, 64)
	return err == nil && p >= 0 && strconv.FormatInt(p, 10) == v
}

// FeedCursor returns the opaque cursor of change feed position p
// (application.FeedCursor).
func FeedCursor(p int64) string { return application.FeedCursor(p) }

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

func (a *API) listAllocations(ctx context.Context, in *listAllocationsInput) (*listAllocationsOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	after, err := decodeCursor(snapshotCursorPrefix, in.Cursor, "query.cursor", isAllocationID)
	if err != nil {
		return nil, err
	}
	page, err := a.svc.Allocations(ctx, after, in.Limit)
	if err != nil {
		return nil, a.problem("list allocations", err)
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

type projectAllocationsInput struct {
	Project string `path:"project" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"Canonical Project ID: a lower-case UUID." example:"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"`
	Site    string `query:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"Only this Site; every Site when absent." example:"alpha"`
}

type projectAllocationsOutput struct {
	Body struct {
		Allocations []AllocationBody `json:"allocations"`
	}
}

func (a *API) projectAllocations(ctx context.Context, in *projectAllocationsInput) (*projectAllocationsOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	vs, err := a.svc.ProjectAllocations(ctx, in.Project, in.Site)
	if err != nil {
		return nil, a.problem("project allocations", err)
	}
	out := &projectAllocationsOutput{}
	out.Body.Allocations = allocationBodies(vs)
	return out, nil
}

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

func (a *API) changes(ctx context.Context, in *changesInput) (*changesOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	raw, err := decodeCursor(feedCursorPrefix, in.After, "query.after", isPosition)
	if err != nil {
		return nil, err
	}
	var after int64
	if raw != "" {
		after, _ = strconv.ParseInt(raw, 10, 64) // isPosition checked it
	}
	page, err := a.svc.Changes(ctx, after, in.Limit)
	if err != nil {
		return nil, a.problem("changes", err)
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

// BindingConflictBody is a provider Project claimed by several Projects.
type BindingConflictBody struct {
	Instance          string   `json:"instance" example:"https://waldur.example.org"`
	ProviderProjectID string   `json:"provider_project_id" example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	ProjectIDs        []string `json:"project_ids" doc:"The canonical Projects claiming it."`
}

type bindingConflictsOutput struct {
	Body struct {
		Conflicts []BindingConflictBody `json:"conflicts"`
	}
}

func (a *API) bindingConflicts(ctx context.Context, _ *struct{}) (*bindingConflictsOutput, error) {
	if err := requireKind(ctx, auth.KindService); err != nil {
		return nil, err
	}
	cs, err := a.svc.BindingConflicts(ctx)
	if err != nil {
		return nil, a.problem("binding conflicts", err)
	}
	out := &bindingConflictsOutput{}
	out.Body.Conflicts = make([]BindingConflictBody, 0, len(cs))
	for _, c := range cs {
		out.Body.Conflicts = append(out.Body.Conflicts, BindingConflictBody{Instance: c.Instance, ProviderProjectID: c.ProviderProjectID, ProjectIDs: c.ProjectIDs})
	}
	return out, nil
}
