package application

import (
	"context"
	"time"
)

// The owner's change feed as delivery follows it
// (docs/execution-ports.md#following-the-change-feed): between full
// reconciles, a member-binding change on the feed makes the deliverer run a
// pass of the binding's environment at once.

// BindingChange is one MemberBindingChanged of the owner's change feed: the
// binding of Environment reached Revision.
type BindingChange struct {
	Environment string
	BindingID   string
	Revision    int64
}

// BindingChangePage is one read of the feed after a cursor.
type BindingChangePage struct {
	// Changes are the member-binding changes in feed order (allocation
	// changes are passed over, the cursor moves past them).
	Changes []BindingChange
	// Next is the opaque cursor to read on from (the one read after when
	// nothing is new).
	Next string
	// More: the page was full; read again at once.
	More bool
}

// BindingFeed is the owner port of the change feed's member-binding
// changes. Cursors are the owner's opaque feed cursors.
type BindingFeed interface {
	// FeedHead returns the cursor of the feed's newest change: the changes
	// after it are those not made yet.
	FeedHead(ctx context.Context) (string, error)
	// BindingChanges returns the next page of the feed after cursor after.
	// Errors wrap ErrResourceLookupUnavailable when the owner cannot be
	// read or refuses the cursor.
	BindingChanges(ctx context.Context, after string) (BindingChangePage, error)
}

// DefaultFeedInterval is the default period of reading the change feed when
// the last read had nothing more.
const DefaultFeedInterval = time.Second
