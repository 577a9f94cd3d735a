package application

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// ErrUnknownEnvironment is wrapped by a read's error when the environment
// is not configured (environments.yaml).
var ErrUnknownEnvironment = errors.New("unknown environment")

// Answers of the account lookup (docs/resource-provisioning.md#the-account-lookup).
const (
	// LookupBound: a live binding; its ID, revision and generation are the
	// ones to write on the account.
	LookupBound = "bound"
	// LookupRetired: the binding is retired; its account is to be removed.
	LookupRetired = "retired"
	// LookupUnknown: nothing is known; the reasons name the step that found
	// nothing.
	LookupUnknown = "unknown"
)

// Reasons of an unknown lookup, by the step of "How an account is found".
const (
	// LookupNoEnvironment: the Site has no configured environment.
	LookupNoEnvironment = "no_environment"
	// LookupUnknownUsername: no site binding at the environment has the
	// username (step 2).
	LookupUnknownUsername = "unknown_username"
	// LookupSiteBindingNotVerified: the username's newest site binding is
	// not verified (step 2).
	LookupSiteBindingNotVerified = "site_binding_not_verified"
	// LookupProjectUnbound: no single canonical Project claims the provider
	// Project (step 3).
	LookupProjectUnbound = "project_unbound"
	// LookupNotAMember: the Party is not a member of the Project (step 3).
	LookupNotAMember = "not_a_member"
	// LookupNoAllocation: the Project has no allocation at the Site that is
	// not retired (step 4).
	LookupNoAllocation = "no_allocation"
	// LookupAccountTaken: the Party's binding is held back because another
	// Party's binding at the environment holds the account
	// (docs/resource-provisioning.md#one-party-per-account): make no
	// account for it.
	LookupAccountTaken = domain.ReasonAccountTaken
)

// AccountLookup is the answer to an agent's lookup of a Site username in a
// provider Project.
type AccountLookup struct {
	// State is bound, retired or unknown.
	State string
	// Reasons: for unknown, the step that found nothing; for retired, why.
	Reasons     []string
	Environment string
	// The binding's facts (bound and retired; PartyID and ProjectID may be
	// set for unknown too, as far as the steps got).
	ProjectID  string
	PartyID    string
	Account    string
	BindingID  string
	Revision   int64
	Generation int64
}

// LookupAccount resolves, for site's agent, a Site username (the Waldur
// offering username of a resource user) and a provider (Waldur) Project to
// the canonical Project, the Party and its member binding at environment
// (docs/resource-provisioning.md#the-account-lookup), following the four steps
// of "How an account is found": the username's newest site binding at the
// environment (never an older one, never an email or a similar name), the
// Project claiming the provider Project, the binding of the Party in it,
// and an allocation of the Project at the Site. environment may be empty
// when site has exactly one. Errors: *domain.ValidationError for a missing
// username or provider Project, an environment that is not site's, or none
// given while site has several; an error wrapping ErrUnavailable when the
// store cannot be reached.
func (s *Service) LookupAccount(ctx context.Context, site, environment, username, providerProject string) (AccountLookup, error) {
	problems := domain.CheckText("query.username", username, true)
	problems = append(problems, domain.CheckText("query.provider_project", providerProject, true)...)
	envs := s.sites().environmentsOf(site)
	switch {
	case environment != "" && !slices.Contains(envs, environment):
		problems = append(problems, domain.Problem{Location: "query.environment", Message: fmt.Sprintf("not an environment of Site %s (%s)", site, listOrNone(envs)), Value: environment})
	case environment == "" && len(envs) > 1:
		problems = append(problems, domain.Problem{Location: "query.environment", Message: fmt.Sprintf("required: Site %s has several environments (%s)", site, strings.Join(envs, ", "))})
	case environment == "" && len(envs) == 1:
		environment = envs[0]
	}
	if err := domain.Invalid(problems...); err != nil {
		return AccountLookup{}, err
	}
	out := AccountLookup{State: LookupUnknown, Environment: environment}
	if environment == "" {
		out.Reasons = []string{LookupNoEnvironment}
		return out, nil
	}
	newest, err := s.store.NewestBindingOfUsername(ctx, environment, username)
	if err != nil {
		return AccountLookup{}, err
	}
	if newest == nil {
		out.Reasons = []string{LookupUnknownUsername}
		return out, nil
	}
	out.PartyID = newest.PartyID
	claims, err := s.store.ProjectClaims(ctx, s.cfg.WaldurInstance, providerProject, 2)
	if err != nil {
		return AccountLookup{}, err
	}
	if len(claims) != 1 {
		out.Reasons = []string{LookupProjectUnbound}
		return out, nil
	}
	out.ProjectID = claims[0]
	b, err := s.store.BindingByKey(ctx, domain.BindingKey{PartyID: newest.PartyID, ProjectID: out.ProjectID, Environment: environment})
	if err != nil {
		return AccountLookup{}, err
	}
	switch {
	case b != nil && b.State == domain.BindingRetired:
		return lookupOf(LookupRetired, *b), nil
	case newest.State != domain.SiteBindingVerified:
		out.Reasons = []string{LookupSiteBindingNotVerified}
		return out, nil
	case b == nil:
		out.Reasons = []string{LookupNotAMember}
		return out, nil
	case slices.Contains(b.Reasons, domain.ReasonAccountTaken):
		out.Reasons = []string{LookupAccountTaken}
		return out, nil
	}
	has, err := s.store.SiteHasProjectAllocation(ctx, site, out.ProjectID)
	if err != nil {
		return AccountLookup{}, err
	}
	if !has {
		out.Reasons = []string{LookupNoAllocation}
		return out, nil
	}
	return lookupOf(LookupBound, *b), nil
}

func lookupOf(state string, b domain.MemberBinding) AccountLookup {
	l := AccountLookup{
		State: state, Reasons: []string{}, Environment: b.Environment, ProjectID: b.ProjectID, PartyID: b.PartyID,
		Account: b.AccountName(), BindingID: b.ID, Revision: b.Revision, Generation: b.Generation,
	}
	if state == LookupRetired {
		l.Reasons = append(l.Reasons, b.Reasons...)
	}
	return l
}

func listOrNone(envs []string) string {
	if len(envs) == 0 {
		return "it has none configured"
	}
	return "its environments: " + strings.Join(envs, ", ")
}

// DesiredEntry is one member of the desired-binding read: a binding, or a
// member of a Project allocated at the Site without one and why.
type DesiredEntry struct {
	ProjectID string
	PartyID   string
	// Binding is the member's binding at the environment (live or
	// retired); nil when it has none.
	Binding *domain.MemberBinding
	// Reasons say why a member has no binding (no_site_binding).
	Reasons []string
}

// BindingPage is one page of an environment's desired bindings.
type BindingPage struct {
	Environment string
	Site        string
	Entries     []DesiredEntry
	// After is the last entry's cursor value ("<project>/<party>"), to pass
	// to the next call; empty on the last page.
	After string
	// ChangesHead is, on the first page only, the change feed position
	// captured before paging began: follow the feed from there and apply
	// only newer binding revisions.
	ChangesHead int64
	// First tells whether ChangesHead is set.
	First bool
}

// DesiredBindings returns a page of environment's desired bindings
// (docs/resource-provisioning.md#the-desired-bindings-read): every binding
// at the environment, live and retired (a retired one is to be delivered as
// retired), and every member of a Project with a non-retired allocation at
// the environment's Site that has none (with the reason), in (Project,
// Party) order after after ("" for the first page), up to limit entries
// (DefaultPageLimit when 0, at most MaxPageLimit). Errors: an error wrapping
// ErrUnknownEnvironment for an environment not configured; one wrapping
// ErrUnknownCursor for an after this read did not issue;
// *domain.ValidationError for a limit out of range; an error wrapping
// ErrUnavailable when the store cannot be reached.
func (s *Service) DesiredBindings(ctx context.Context, environment, after string, limit int) (BindingPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return BindingPage{}, err
	}
	site, ok := s.sites().siteOf(environment)
	if !ok {
		return BindingPage{}, fmt.Errorf("%w: %q is not a configured environment", ErrUnknownEnvironment, environment)
	}
	var afterProject, afterParty string
	if after != "" {
		var ok bool
		afterProject, afterParty, ok = ParseBindingCursor(after)
		if !ok {
			return BindingPage{}, fmt.Errorf("%w: %q is not a binding cursor", ErrUnknownCursor, after)
		}
	}
	page := BindingPage{Environment: environment, Site: site}
	if after == "" {
		if page.ChangesHead, err = s.store.ChangesHead(ctx); err != nil {
			return BindingPage{}, err
		}
		page.First = true
	}
	bs, err := s.store.EnvironmentBindingsAfter(ctx, environment, afterProject, afterParty, limit+1)
	if err != nil {
		return BindingPage{}, err
	}
	ms, err := s.store.MembersWithoutBinding(ctx, environment, site, afterProject, afterParty, limit+1)
	if err != nil {
		return BindingPage{}, err
	}
	entries := make([]DesiredEntry, 0, len(bs)+len(ms))
	for _, b := range bs {
		b = b.Normalize()
		entries = append(entries, DesiredEntry{ProjectID: b.ProjectID, PartyID: b.PartyID, Binding: &b, Reasons: []string{}})
	}
	for _, m := range ms {
		entries = append(entries, DesiredEntry{ProjectID: m.ProjectID, PartyID: m.PartyID, Reasons: []string{domain.ReasonNoSiteBinding}})
	}
	slices.SortStableFunc(entries, func(a, b DesiredEntry) int {
		return cmp.Or(cmp.Compare(a.ProjectID, b.ProjectID), cmp.Compare(a.PartyID, b.PartyID))
	})
	// A member read in both lists (it gained a binding between the two
	// reads) is kept once, with its binding.
	entries = slices.CompactFunc(entries, func(a, b DesiredEntry) bool { return a.ProjectID == b.ProjectID && a.PartyID == b.PartyID })
	if len(entries) > limit {
		entries = entries[:limit]
		last := entries[limit-1]
		page.After = BindingCursor(last.ProjectID, last.PartyID)
	}
	page.Entries = entries
	return page, nil
}

// BindingCursor returns the cursor value of the desired-binding entry of
// (project, party).
func BindingCursor(project, party string) string { return project + "/" + party }

// ParseBindingCursor is the inverse of BindingCursor; false when v is not
// two canonical IDs.
func ParseBindingCursor(v string) (project, party string, ok bool) {
	project, party, ok = strings.Cut(v, "/")
	if !ok || len(domain.CheckCanonicalID("", project, true)) > 0 || len(domain.CheckCanonicalID("", party, true)) > 0 {
		return "", "", false
	}
	return project, party, true
}

// AccountView is a member's binding at an environment of a Site as the
// account read answers it: its state and, when ready, the ready account
// with its UID and the receipt times of the account report it came from,
// freshness computed at read time.
type AccountView struct {
	PartyID     string
	ProjectID   string
	Environment string
	// Site is the environment's Site ("" for an environment not
	// configured).
	Site      string
	BindingID string
	// Account is member-<party>.
	Account    string
	Generation int64
	Revision   int64
	// State is ready, pending or retired; Reasons say why it is not ready.
	State   string
	Reasons []string
	// UID, AllocationID and Namespace are the ready account's (empty unless
	// State is ready).
	UID          string
	AllocationID string
	Namespace    string
	// ObservedAt and LastSeenAt are the agent's observation and the
	// server's receipt time of the newest account report of the ready
	// account's allocation (zero unless ready).
	ObservedAt time.Time
	LastSeenAt time.Time
	// Fresh is false when LastSeenAt is older than the freshness bound at
	// the read (always false unless ready).
	Fresh bool
}

// ProjectAccounts returns the member bindings of a canonical Project at the
// environments of site (every environment when site is empty), of partyID
// only when it is not empty, by Party then environment: the ready accounts
// with their UIDs, and for the others why they are not ready
// (docs/resource-provisioning.md#the-account-read). Errors:
// *domain.ValidationError for a projectID or partyID that is not a canonical
// ID or a site that is not valid text; an error wrapping ErrUnavailable when
// the store cannot be reached.
func (s *Service) ProjectAccounts(ctx context.Context, projectID, site, partyID string) ([]AccountView, error) {
	problems := domain.CheckCanonicalID("path.project", projectID, true)
	problems = append(problems, domain.CheckText("query.site", site, false)...)
	problems = append(problems, domain.CheckCanonicalID("query.party", partyID, false)...)
	if err := domain.Invalid(problems...); err != nil {
		return nil, err
	}
	bs, err := s.store.ProjectBindings(ctx, projectID, partyID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]AccountView, 0, len(bs))
	configured := s.sites()
	for _, b := range bs {
		envSite, _ := configured.siteOf(b.Environment)
		if site != "" && envSite != site {
			continue
		}
		v := AccountView{
			PartyID: b.PartyID, ProjectID: b.ProjectID, Environment: b.Environment, Site: envSite, BindingID: b.ID,
			Account: b.AccountName(), Generation: b.Generation, Revision: b.Revision, State: b.State,
			Reasons: append([]string{}, b.Reasons...),
		}
		if b.State == domain.BindingReady {
			v.UID, v.AllocationID, v.Namespace = b.Account.UID, b.Account.AllocationID, b.Account.Namespace
			v.ObservedAt, v.LastSeenAt = b.AccountObservedAt.UTC(), b.AccountLastSeenAt.UTC()
			v.Fresh = now.Sub(b.AccountLastSeenAt) <= s.cfg.Freshness
		}
		out = append(out, v)
	}
	return out, nil
}

// NativeAccounts returns every account reported in an allocation (ready,
// incomplete and absent, every generation: the evidence), by Party, UID,
// binding and generation. Errors: *domain.ValidationError for an
// allocationID that is not an allocation ID; an error wrapping
// ErrUnavailable when the store cannot be reached.
func (s *Service) NativeAccounts(ctx context.Context, allocationID string) ([]domain.NativeAccount, error) {
	if err := domain.Invalid(domain.CheckCanonicalID("path.allocation", allocationID, true)...); err != nil {
		return nil, err
	}
	return s.store.NativeAccounts(ctx, allocationID)
}
