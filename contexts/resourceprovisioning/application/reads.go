package application

import (
	"context"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// AllocationView is an allocation as readers see it, with freshness computed
// at read time (docs/resource-provisioning.md#freshness). This is the read contract of
// the owner adaptors in execution_ports (in-process and HTTP); its JSON form
// is the body of GET /resource-provisioning/projects/{project}/allocations.
type AllocationView struct {
	// ID is the UUIDv5 of "<site>/<provider resource ID>"
	// (domain.AllocationID).
	ID                 string
	Site               string
	ProjectID          string
	ProviderResourceID string
	OfferingID         string
	ProviderProjectID  string
	// NativeScope is the namespace at the Site ("" until created).
	NativeScope string
	// Lifecycle is pending, ready, changing, suspended or retired. A ready,
	// changing or pending allocation not seen within the freshness bound
	// reads as pending with the extra reason "stale".
	Lifecycle string
	// Reasons of a pending lifecycle (snake_case: provisioning,
	// provider_error, terminating, limits_not_applied, project_unbound,
	// stale); empty otherwise.
	Reasons []string
	// ConfiguredLimits in canonical units: cpu millicores, memory and
	// storage bytes, gpu.<vendor> devices.
	ConfiguredLimits map[string]int64
	// AppliedLimits is what the Site enforces, in the same units; nil when
	// the Site has not confirmed any. For a changing allocation these are
	// the limits still in force.
	AppliedLimits map[string]int64
	// WaldurState is the Waldur resource state of the newest report.
	WaldurState string
	Paused      bool
	// Revision counts material changes.
	Revision int64
	// ObservedAt is the agent's observation time of the newest accepted
	// report; LastSeenAt the server's receipt time of it.
	ObservedAt time.Time
	LastSeenAt time.Time
	// Fresh is false when LastSeenAt is older than the freshness bound at
	// the time of the read.
	Fresh bool
}

// view returns the reader's view of a at now: freshness is computed here,
// never stored.
func (s *Service) view(a domain.Allocation, now time.Time) AllocationView {
	v := AllocationView{
		ID: a.ID, Site: a.Site, ProjectID: a.ProjectID, ProviderResourceID: a.ProviderResourceID,
		OfferingID: a.OfferingID, ProviderProjectID: a.ProviderProjectID, NativeScope: a.NativeScope,
		Lifecycle: a.Lifecycle, Reasons: append([]string{}, a.Reasons...),
		ConfiguredLimits: a.Configured.Clone(), AppliedLimits: a.Applied.Clone(),
		WaldurState: a.WaldurState, Paused: a.Paused, Revision: a.Revision,
		ObservedAt: a.ObservedAt, LastSeenAt: a.LastSeenAt,
		Fresh: now.Sub(a.LastSeenAt) <= s.cfg.Freshness,
	}
	if v.ConfiguredLimits == nil {
		v.ConfiguredLimits = map[string]int64{}
	}
	if !v.Fresh {
		switch v.Lifecycle {
		case domain.LifecycleReady, domain.LifecycleChanging, domain.LifecyclePending:
			v.Lifecycle = domain.LifecyclePending
			v.Reasons = append(v.Reasons, domain.PendingStale)
		}
	}
	return v
}

func (s *Service) views(as []domain.Allocation) []AllocationView {
	now := s.now()
	out := make([]AllocationView, 0, len(as))
	for _, a := range as {
		out = append(out, s.view(a, now))
	}
	return out
}

// ProjectAllocations returns the allocations of a canonical Project at site
// (every Site when site is empty), ordered by Site then ID, with lifecycle
// and freshness as of now. A Project with no allocation gives an empty
// slice. Errors: *domain.ValidationError for a projectID that is not a
// canonical ID (a lower-case UUID) or a site that is not valid UTF-8 text
// without control characters; an error wrapping ErrUnavailable when the
// store cannot be reached (never a guess).
func (s *Service) ProjectAllocations(ctx context.Context, projectID, site string) ([]AllocationView, error) {
	problems := domain.CheckCanonicalID("path.project", projectID, true)
	problems = append(problems, domain.CheckText("query.site", site, false)...)
	if err := domain.Invalid(problems...); err != nil {
		return nil, err
	}
	as, err := s.store.ProjectAllocations(ctx, projectID, site)
	if err != nil {
		return nil, err
	}
	return s.views(as), nil
}

// AllocationPage is one page of the complete allocation snapshot.
type AllocationPage struct {
	Allocations []AllocationView
	// After is the last allocation ID of the page, to pass to the next
	// call; empty when this is the last page.
	After string
	// ChangesHead is, on the first page only (after == ""), the change feed
	// position captured before paging began: follow the feed from there and
	// apply only newer revisions. Zero on later pages.
	ChangesHead int64
	// First tells whether ChangesHead is set (the first page).
	First bool
}

// Allocations returns the page of the snapshot after allocation ID after
// ("" for the first page), in ID order, with up to limit views
// (DefaultPageLimit when 0, at most MaxPageLimit). Paging by ID is stable:
// every allocation that exists when paging starts is returned exactly once.
// Errors: an error wrapping ErrUnknownCursor when after is neither empty nor
// an allocation ID (a lower-case UUID); *domain.ValidationError for a limit
// out of range; an error wrapping ErrUnavailable when the store cannot be
// reached.
func (s *Service) Allocations(ctx context.Context, after string, limit int) (AllocationPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return AllocationPage{}, err
	}
	if after != "" && len(domain.CheckCanonicalID("after", after, true)) > 0 {
		return AllocationPage{}, fmt.Errorf("%w: %q is not an allocation ID", ErrUnknownCursor, after)
	}
	var page AllocationPage
	if after == "" {
		// The head is read before the first page, so every change at or
		// below it is already in the pages.
		if page.ChangesHead, err = s.store.ChangesHead(ctx); err != nil {
			return AllocationPage{}, err
		}
		page.First = true
	}
	as, err := s.store.AllocationsAfter(ctx, after, limit+1)
	if err != nil {
		return AllocationPage{}, err
	}
	if len(as) > limit {
		as = as[:limit]
		page.After = as[limit-1].ID
	}
	page.Allocations = s.views(as)
	return page, nil
}

// MemberBindingChangedType is the Type of a binding change in a ChangePage
// (domain.MemberBindingChangedType, for readers outside this context).
const MemberBindingChangedType = domain.MemberBindingChangedType

// ChangePage is a slice of the change feed.
type ChangePage struct {
	Changes []domain.Change
	// Next is the position to pass as after to continue (the last change's
	// position, or after itself when there was none).
	Next int64
}

// Changes returns up to limit AllocationChanged events after position
// after, in commit order (DefaultPageLimit when 0, at most MaxPageLimit).
// A change that commits late is never skipped: positions follow commit
// order. Errors: an error wrapping ErrUnknownCursor for a negative position
// or one beyond the feed head (no reader was ever given it, and it would
// answer "nothing new" forever); *domain.ValidationError for a limit out
// of range; an error wrapping ErrUnavailable when the store cannot be
// reached.
func (s *Service) Changes(ctx context.Context, after int64, limit int) (ChangePage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return ChangePage{}, err
	}
	if after < 0 {
		return ChangePage{}, fmt.Errorf("%w: position %d is negative", ErrUnknownCursor, after)
	}
	cs, err := s.store.ChangesAfter(ctx, after, limit)
	if err != nil {
		return ChangePage{}, err
	}
	if len(cs) == 0 && after > 0 {
		// Only an empty answer needs the head: a change after `after`
		// proves it lies within the feed.
		head, err := s.store.ChangesHead(ctx)
		if err != nil {
			return ChangePage{}, err
		}
		if after > head {
			return ChangePage{}, fmt.Errorf("%w: position %d is beyond the feed head %d", ErrUnknownCursor, after, head)
		}
	}
	next := after
	if len(cs) > 0 {
		next = cs[len(cs)-1].Position
	}
	return ChangePage{Changes: cs, Next: next}, nil
}

// BindingConflicts returns the provider Projects claimed by several
// canonical Projects (kept visible, never resolved by guessing). Errors wrap
// ErrUnavailable when the store cannot be reached.
func (s *Service) BindingConflicts(ctx context.Context) ([]domain.BindingConflict, error) {
	return s.store.BindingConflicts(ctx)
}

// Ping checks the store answers.
func (s *Service) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageLimit, nil
	case limit < 0 || limit > MaxPageLimit:
		return 0, domain.Invalid(domain.Problem{Location: "query.limit", Message: fmt.Sprintf("limit must be 1 to %d", MaxPageLimit), Value: limit})
	}
	return limit, nil
}
