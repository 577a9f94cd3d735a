package inprocessowners

import (
	"context"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	rpapp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
)

var _ application.BindingFeed = (*Resources)(nil)

// FeedHead implements application.BindingFeed: the change feed position the
// owner's snapshot captures before its first page
// (docs/execution-ports.md#following-the-change-feed). Any owner error is
// application.ErrResourceLookupUnavailable.
func (r *Resources) FeedHead(ctx context.Context) (string, error) {
	page, err := r.owner.Allocations(ctx, "", 1)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", application.ErrResourceLookupUnavailable, OwnerName, err)
	}
	return rpapp.FeedCursor(page.ChangesHead), nil
}

// BindingChanges implements application.BindingFeed: one page (the owner's
// largest) of its change feed after cursor after, its MemberBindingChanged
// entries. A cursor the owner did not issue, and any owner error, is
// application.ErrResourceLookupUnavailable.
func (r *Resources) BindingChanges(ctx context.Context, after string) (application.BindingChangePage, error) {
	pos, ok := rpapp.ParseFeedCursor(after)
	if !ok {
		return application.BindingChangePage{}, fmt.Errorf("%w: %s: %q is not a change feed cursor", application.ErrResourceLookupUnavailable, OwnerName, after)
	}
	page, err := r.owner.Changes(ctx, pos, rpapp.MaxPageLimit)
	if err != nil {
		return application.BindingChangePage{}, fmt.Errorf("%w: %s: %w", application.ErrResourceLookupUnavailable, OwnerName, err)
	}
	out := application.BindingChangePage{Next: rpapp.FeedCursor(page.Next), More: len(page.Changes) == rpapp.MaxPageLimit}
	for _, c := range page.Changes {
		if c.Type == rpapp.MemberBindingChangedType {
			out.Changes = append(out.Changes, application.BindingChange{Environment: c.Binding.Environment, BindingID: c.Binding.BindingID, Revision: c.Binding.Revision})
		}
	}
	return out, nil
}
