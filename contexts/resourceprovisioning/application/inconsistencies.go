package application

import (
	"context"
	"fmt"
	"slices"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// The kinds of an allocation's inconsistency
// (docs/resource-provisioning.md#the-inconsistencies-read).
const (
	// InconsistencyLimitsDiffer: the applied limits differ from the
	// configured ones (a changing allocation, or a pending one whose Site
	// enforces other limits than ordered).
	InconsistencyLimitsDiffer = "limits_differ"
	// InconsistencyLimitsNotApplied: a configured key has no applied value
	// (the lifecycle reason limits_not_applied).
	InconsistencyLimitsNotApplied = "limits_not_applied"
	// InconsistencyStale: not seen within the freshness bound.
	InconsistencyStale = "stale"
)

// AllocationInconsistency is one allocation of the inconsistencies read:
// the allocation as readers see it (with both limit sets) and every kind
// that applies, in the order limits_differ, limits_not_applied, stale.
type AllocationInconsistency struct {
	Allocation AllocationView
	Kinds      []string
}

// InconsistencyPage is one page of the inconsistencies read.
type InconsistencyPage struct {
	// Allocations are the page's inconsistent allocations, in ID order.
	Allocations []AllocationInconsistency
	// After is the last allocation ID of the page, to pass to the next
	// call; empty when this is the last page.
	After string
	// First tells that this is the first page: only the first page carries
	// AmbiguousResources and BindingConflicts (complete, not paginated).
	First bool
	// AmbiguousResources are the Projects with several non-retired
	// allocations at one Site (planning answers resource_ambiguous).
	AmbiguousResources []domain.AmbiguousResource
	// BindingConflicts are the provider Projects claimed by several
	// canonical Projects (their allocations stay project_unbound).
	BindingConflicts []domain.BindingConflict
	// AccountConflicts are the member bindings held pending because a
	// binding of another Party at their environment holds their account
	// or its UID (reason account_taken), in ID order
	// (docs/resource-provisioning.md#one-party-per-account).
	AccountConflicts []domain.MemberBinding
}

// accountConflicts reads every binding held back by another Party's
// account (the store's pages, whole).
func (s *Service) accountConflicts(ctx context.Context) ([]domain.MemberBinding, error) {
	out := []domain.MemberBinding{}
	for after := ""; ; {
		bs, err := s.store.TakenBindingsAfter(ctx, after, MaxPageLimit)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			out = append(out, b.Normalize())
		}
		if len(bs) < MaxPageLimit {
			return out, nil
		}
		after = bs[len(bs)-1].ID
	}
}

// Inconsistencies returns the page of inconsistent allocations after
// allocation ID after ("" for the first page), in ID order, with up to
// limit entries (DefaultPageLimit when 0, at most MaxPageLimit): every
// allocation, neither retired nor suspended, whose applied limits differ
// from the configured ones, that lacks an applied value for a configured
// key, or that is stale as of now. A ready allocation that is fresh is never
// listed. The first page also carries every ambiguous resource, every
// binding conflict and every member binding held back by another Party's
// account. Errors: an error wrapping ErrUnknownCursor when after is
// neither empty nor an allocation ID; *domain.ValidationError for a limit
// out of range; an error wrapping ErrUnavailable when the store cannot be
// reached (docs/resource-provisioning.md#the-inconsistencies-read).
func (s *Service) Inconsistencies(ctx context.Context, after string, limit int) (InconsistencyPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return InconsistencyPage{}, err
	}
	if after != "" && len(domain.CheckCanonicalID("after", after, true)) > 0 {
		return InconsistencyPage{}, fmt.Errorf("%w: %q is not an allocation ID", ErrUnknownCursor, after)
	}
	now := s.now()
	var page InconsistencyPage
	if after == "" {
		page.First = true
		if page.AmbiguousResources, err = s.store.AmbiguousResources(ctx); err != nil {
			return InconsistencyPage{}, err
		}
		if page.BindingConflicts, err = s.store.BindingConflicts(ctx); err != nil {
			return InconsistencyPage{}, err
		}
		if page.AccountConflicts, err = s.accountConflicts(ctx); err != nil {
			return InconsistencyPage{}, err
		}
	}
	as, err := s.store.InconsistentAllocationsAfter(ctx, after, now.Add(-s.cfg.Freshness), limit+1)
	if err != nil {
		return InconsistencyPage{}, err
	}
	if len(as) > limit {
		as = as[:limit]
		page.After = as[limit-1].ID
	}
	page.Allocations = make([]AllocationInconsistency, 0, len(as))
	for _, a := range as {
		v := s.view(a, now)
		var kinds []string
		if a.Applied != nil && !a.Applied.Equal(a.Configured) {
			kinds = append(kinds, InconsistencyLimitsDiffer)
		}
		if slices.Contains(a.Reasons, domain.PendingLimitsNotApplied) {
			kinds = append(kinds, InconsistencyLimitsNotApplied)
		}
		if !v.Fresh {
			kinds = append(kinds, InconsistencyStale)
		}
		if len(kinds) == 0 {
			continue // the store's filter is wider than the kinds (never, if both agree)
		}
		page.Allocations = append(page.Allocations, AllocationInconsistency{Allocation: v, Kinds: kinds})
	}
	return page, nil
}
