package application

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// AccountsResult is the outcome of an accepted account report.
type AccountsResult struct {
	// AllocationID is the reported allocation's ID.
	AllocationID string
	// Outcome is created (the allocation's first account report), changed
	// (an account changed: the set's revision + 1), renewed (newer, nothing
	// changed: only the set's observed_at and last_seen_at moved) or
	// duplicate (the same observed_at and accounts: nothing moved).
	Outcome string
	// Revision is the allocation's account set revision after the report.
	Revision int64
	// Accounts are the reported accounts, in input order, with their
	// bindings after the report.
	Accounts []AccountOutcome
}

// AccountOutcome is one reported account after an account report.
type AccountOutcome struct {
	PartyID    string
	UID        string
	BindingID  string
	Generation int64
	State      string
	// BindingState and BindingGeneration are the binding's after the
	// report: an account of an older generation is evidence and counts for
	// nothing.
	BindingState      string
	BindingGeneration int64
	// Current: this account is the binding's ready account.
	Current bool
}

// SubmitAccounts applies site's agent's account report of one allocation:
// the complete set of member accounts in its native scope, which replaces
// the allocation's last one, all or nothing in one transaction
// (docs/resource-provisioning.md#the-account-report). Errors:
//   - *domain.ValidationError (nothing stored), listing every problem: see
//     domain.AccountReport.Validate, and an observed_at beyond the server
//     clock plus the clock skew;
//   - *domain.ConflictError (nothing stored): allocation_unknown (no
//     allocation of site has the provider resource), allocation_retired
//     (accounts listed in a retired allocation), stale_report (older than
//     the saved report), report_conflict (the saved observed_at, other
//     accounts), binding_mismatch (per account: a binding this context does
//     not hold, another Party's, or one of an environment that is not
//     site's);
//   - an error wrapping ErrUnavailable when the store cannot be reached.
func (s *Service) SubmitAccounts(ctx context.Context, site string, r domain.AccountReport) (AccountsResult, error) {
	now := s.now()
	if err := s.checkAccounts(r, now); err != nil {
		return AccountsResult{}, err
	}
	r = r.Normalize()
	allocationID := domain.AllocationID(site, r.ProviderResourceID)
	var res AccountsResult
	err := s.store.InAccountTx(ctx, func(ctx context.Context, tx AccountTx) error {
		var err error
		res, err = s.applyAccounts(ctx, tx, site, allocationID, r, now)
		return err
	})
	if err != nil {
		return AccountsResult{}, err
	}
	return res, nil
}

func refused(reason, location, detail string) error {
	return &domain.ConflictError{Refusals: []domain.Refusal{{Reason: reason, Location: location, Detail: detail}}}
}

func (s *Service) applyAccounts(ctx context.Context, tx AccountTx, site, allocationID string, r domain.AccountReport, now time.Time) (AccountsResult, error) {
	alloc, err := tx.LockAllocation(ctx, allocationID)
	if err != nil {
		return AccountsResult{}, err
	}
	if alloc == nil {
		return AccountsResult{}, refused(domain.ReasonAllocationUnknown, "body.provider_resource_id",
			fmt.Sprintf("Site %s has reported no resource %s: report the resource first", site, r.ProviderResourceID))
	}
	if alloc.Lifecycle == domain.LifecycleRetired && len(r.Accounts) > 0 {
		return AccountsResult{}, refused(domain.ReasonAllocationRetired, "body.accounts",
			fmt.Sprintf("allocation %s is retired; only an empty account set is accepted", allocationID))
	}
	set, err := tx.LockAccountSet(ctx, allocationID)
	if err != nil {
		return AccountsResult{}, err
	}
	duplicate, refusal := domain.CheckAccountOrder(set, r)
	if refusal != nil {
		refusal.Location = "body.observed_at"
		return AccountsResult{}, &domain.ConflictError{Refusals: []domain.Refusal{*refusal}}
	}
	stored, err := tx.AllocationAccounts(ctx, allocationID)
	if err != nil {
		return AccountsResult{}, err
	}
	// The bindings the report names and those of the accounts it may make
	// absent, locked in ID order.
	ids := r.BindingIDs()
	for _, a := range stored {
		if a.State != domain.AccountAbsent {
			ids = append(ids, a.BindingID)
		}
	}
	bindings := map[string]domain.MemberBinding{}
	for _, id := range sortedUnique(ids) {
		b, err := tx.LockBinding(ctx, id)
		if err != nil {
			return AccountsResult{}, err
		}
		if b != nil {
			bindings[id] = *b
		}
	}
	if err := s.checkAccountBindings(site, r, bindings); err != nil {
		return AccountsResult{}, err
	}
	var problems []domain.Problem
	configured := s.backends()
	for i, a := range r.Accounts {
		b := bindings[a.BindingID]
		problems = append(problems, domain.CheckBackendAccount(fmt.Sprintf("body.accounts[%d]", i), a, b, configured.of(b.Environment))...)
	}
	if err := domain.Invalid(problems...); err != nil {
		return AccountsResult{}, err
	}
	res := AccountsResult{AllocationID: allocationID, Outcome: domain.OutcomeDuplicate}
	if duplicate {
		res.Revision = set.Revision
		res.Accounts = accountOutcomes(allocationID, r, bindings)
		return res, nil
	}
	rows := domain.MergeAccounts(allocationID, stored, r, now)
	next, outcome := domain.NextAccountSet(set, allocationID, r, len(rows) > 0, now)
	if set == nil {
		inserted, err := tx.InsertAccountSet(ctx, next)
		if err != nil {
			return AccountsResult{}, err
		}
		if !inserted {
			// The allocation's lock is held, so no other report can have
			// inserted it.
			return AccountsResult{}, fmt.Errorf("account set of allocation %s neither found nor inserted", allocationID)
		}
	} else if err := tx.UpdateAccountSet(ctx, next); err != nil {
		return AccountsResult{}, err
	}
	res.Outcome, res.Revision = outcome, next.Revision
	// A binding held back for another Party's account (account_taken) is
	// derived again at each report naming it, so it takes the account once
	// the other Party's binding lets it go
	// (docs/resource-provisioning.md#one-party-per-account).
	var moved []string
	for _, a := range r.Accounts {
		if b, ok := bindings[a.BindingID]; ok && slices.Contains(b.Reasons, domain.ReasonAccountTaken) {
			moved = append(moved, a.BindingID)
		}
	}
	if len(rows) > 0 {
		if err := tx.UpsertAccounts(ctx, rows); err != nil {
			return AccountsResult{}, err
		}
	}
	if len(rows) > 0 || len(moved) > 0 {
		// Only the bindings whose accounts changed have new inputs here (an
		// event that moves another input derives its bindings itself).
		for _, a := range rows {
			moved = append(moved, a.BindingID)
		}
		derived, err := s.deriveBindings(ctx, tx, nil, sortedUnique(moved), now)
		if err != nil {
			return AccountsResult{}, err
		}
		maps.Copy(bindings, derived)
	}
	res.Accounts = accountOutcomes(allocationID, r, bindings)
	return res, nil
}

// checkAccountBindings refuses, naming each account, a binding this context
// does not hold, a binding of another Party, and one of an environment that
// is not site's (binding_mismatch).
func (s *Service) checkAccountBindings(site string, r domain.AccountReport, bindings map[string]domain.MemberBinding) error {
	var refusals []domain.Refusal
	configured := s.sites()
	for i, a := range r.Accounts {
		loc := fmt.Sprintf("body.accounts[%d].binding_id", i)
		b, ok := bindings[a.BindingID]
		var detail string
		switch envSite, known := configured.siteOf(b.Environment); {
		case !ok:
			detail = fmt.Sprintf("no member binding %s is held: name the binding the account lookup answered", a.BindingID)
		case b.PartyID != a.PartyID:
			detail = fmt.Sprintf("member binding %s is Party %s's, not %s's", a.BindingID, b.PartyID, a.PartyID)
		case !known || envSite != site:
			detail = fmt.Sprintf("member binding %s is at environment %s, which is not an environment of Site %s", a.BindingID, b.Environment, site)
		default:
			continue
		}
		refusals = append(refusals, domain.Refusal{Reason: domain.ReasonBindingMismatch, Location: loc, Detail: detail})
	}
	if len(refusals) > 0 {
		return &domain.ConflictError{Refusals: refusals}
	}
	return nil
}

func accountOutcomes(allocationID string, r domain.AccountReport, bindings map[string]domain.MemberBinding) []AccountOutcome {
	out := make([]AccountOutcome, 0, len(r.Accounts))
	for _, a := range r.Accounts {
		b := bindings[a.BindingID]
		out = append(out, AccountOutcome{
			PartyID: a.PartyID, UID: a.UID, BindingID: a.BindingID, Generation: a.Generation, State: a.State,
			BindingState: b.State, BindingGeneration: b.Generation,
			Current: b.State == domain.BindingReady && b.Account.UID == a.UID && b.Account.AllocationID == allocationID && b.Generation == a.Generation,
		})
	}
	return out
}

func sortedUnique(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
