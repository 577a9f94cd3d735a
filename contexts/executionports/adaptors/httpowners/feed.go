package httpowners

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

var _ application.BindingFeed = (*Resources)(nil)

// feedPageLimit is the page size of one change feed read (the owner's
// largest).
const feedPageLimit = 1000

// FeedHead implements application.BindingFeed: the changes_cursor of the
// owner's GET /resource-provisioning/allocations?limit=1, the feed position
// captured before its first page
// (docs/execution-ports.md#following-the-change-feed). Any failure is
// application.ErrResourceLookupUnavailable.
func (r *Resources) FeedHead(ctx context.Context) (string, error) {
	u := r.base.JoinPath("resource-provisioning", "allocations")
	u.RawQuery = url.Values{"limit": {"1"}}.Encode()
	var p struct {
		ChangesCursor string `json:"changes_cursor"`
	}
	if err := r.get(ctx, u, &p); err != nil {
		return "", err
	}
	if p.ChangesCursor == "" {
		return "", fmt.Errorf("%w: answer of GET %s has no changes_cursor", application.ErrResourceLookupUnavailable, u.Redacted())
	}
	return p.ChangesCursor, nil
}

// BindingChanges implements application.BindingFeed: one page of the
// owner's GET /resource-provisioning/changes?after=, its MemberBindingChanged
// entries. Any failure to read a well-formed page (a cursor the owner
// refuses, 400, included) is application.ErrResourceLookupUnavailable.
func (r *Resources) BindingChanges(ctx context.Context, after string) (application.BindingChangePage, error) {
	u := r.base.JoinPath("resource-provisioning", "changes")
	u.RawQuery = url.Values{"after": {after}, "limit": {strconv.Itoa(feedPageLimit)}}.Encode()
	var p struct {
		Changes []struct {
			Type    string       `json:"type"`
			Binding *BindingJSON `json:"binding"`
		} `json:"changes"`
		NextCursor string `json:"next_cursor"`
	}
	if err := r.get(ctx, u, &p); err != nil {
		return application.BindingChangePage{}, err
	}
	if p.Changes == nil || p.NextCursor == "" {
		return application.BindingChangePage{}, fmt.Errorf("%w: answer of GET %s lacks changes or next_cursor", application.ErrResourceLookupUnavailable, u.Redacted())
	}
	out := application.BindingChangePage{Next: p.NextCursor, More: len(p.Changes) == feedPageLimit}
	for i, c := range p.Changes {
		if c.Type != "MemberBindingChanged" {
			continue
		}
		if c.Binding == nil || c.Binding.BindingID == "" || c.Binding.Environment == "" || c.Binding.Revision < 1 {
			return application.BindingChangePage{}, fmt.Errorf("%w: answer of GET %s: changes[%d] is a MemberBindingChanged without its binding's binding_id, environment and revision", application.ErrResourceLookupUnavailable, u.Redacted(), i)
		}
		out.Changes = append(out.Changes, application.BindingChange{Environment: c.Binding.Environment, BindingID: c.Binding.BindingID, Revision: c.Binding.Revision})
	}
	return out, nil
}
