package application

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Runtime member bindings are derived here from the Project view's
// memberships, the Party binding view's site bindings and the agents'
// account reports, inside the transaction that changed one of them
// (docs/resource-provisioning.md#runtime-member-bindings).

// idPattern is the form of a Site or environment ID (as in the routes'
// path parameters and environments.yaml).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether v can name a Site or an environment: 1–128
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidID(v string) bool { return idPattern.MatchString(v) }

// EnvironmentSites is each configured execution environment's Site
// (environments.yaml; docs/architecture.md#configuration-files). The
// configuration in use can be replaced while the service runs
// (docs/operations.md#configuration-reloads), so an operation reads it
// once, at its start.
type EnvironmentSites interface {
	// Sites returns each environment's Site (environment → Site). The
	// service never changes the map.
	Sites() map[string]string
	// Backends returns each environment's backend (environment →
	// backend); an environment it does not list is kubernetes. The
	// service never changes the map.
	Backends() map[string]siteprotocol.Backend
}

// StaticSites is a fixed EnvironmentSites of Kubernetes environments.
type StaticSites map[string]string

// Sites implements EnvironmentSites.
func (s StaticSites) Sites() map[string]string { return s }

// Backends implements EnvironmentSites: every environment is kubernetes.
func (s StaticSites) Backends() map[string]siteprotocol.Backend { return nil }

// StaticEnvironments is a fixed EnvironmentSites with backends.
type StaticEnvironments struct {
	SiteOf    map[string]string
	BackendOf map[string]siteprotocol.Backend
}

// Sites implements EnvironmentSites.
func (s StaticEnvironments) Sites() map[string]string { return s.SiteOf }

// Backends implements EnvironmentSites.
func (s StaticEnvironments) Backends() map[string]siteprotocol.Backend { return s.BackendOf }

// anySlurm reports whether a slurm environment is configured: only then
// may an account report name a POSIX user name
// (domain.AccountReport.ValidateNames).
func (s *Service) anySlurm() bool {
	if s.cfg.Environments == nil {
		return false
	}
	for _, b := range s.cfg.Environments.Backends() {
		if b == siteprotocol.BackendSlurm {
			return true
		}
	}
	return false
}

// backends is one reading of the configured environments' backends.
type backends map[string]siteprotocol.Backend

// backends returns the backends of the configuration in use, read once
// per operation like sites.
func (s *Service) backends() backends {
	if s.cfg.Environments == nil {
		return nil
	}
	return s.cfg.Environments.Backends()
}

// of returns environment's backend: kubernetes when the configuration
// says none or the environment is not configured (bindings are derived
// whatever the configuration).
func (m backends) of(environment string) siteprotocol.Backend {
	if b := m[environment]; b != "" {
		return b
	}
	return siteprotocol.BackendKubernetes
}

// sites is one reading of the configured environments' Sites.
type sites map[string]string

// sites returns the Sites of the configuration in use (none when the
// service has no EnvironmentSites).
func (s *Service) sites() sites {
	if s.cfg.Environments == nil {
		return nil
	}
	return s.cfg.Environments.Sites()
}

// environmentsOf returns the configured environments of site, sorted.
func (m sites) environmentsOf(site string) []string {
	var out []string
	for env, sv := range m {
		if sv == site {
			out = append(out, env)
		}
	}
	slices.Sort(out)
	return out
}

// siteOf returns the Site of a configured environment.
func (m sites) siteOf(environment string) (string, bool) {
	site, ok := m[environment]
	return site, ok
}

// deriveBindings derives, in binding-ID order, the bindings of keys and of
// the stored bindings ids, writes each material change with its
// MemberBindingChanged, and returns every binding that exists afterwards by
// ID. Locking in ID order keeps concurrent transactions from deadlocking.
func (s *Service) deriveBindings(ctx context.Context, tx BindingTx, keys []domain.BindingKey, ids []string, now time.Time) (map[string]domain.MemberBinding, error) {
	known := make(map[string]*domain.BindingKey, len(keys)+len(ids))
	for _, id := range ids {
		known[id] = nil
	}
	for _, k := range keys {
		known[k.ID()] = &k
	}
	out := make(map[string]domain.MemberBinding, len(known))
	var events []domain.MemberBindingChanged
	var freed []domain.MemberBinding
	configured := s.backends()
	derive := func(id string, key *domain.BindingKey) error {
		before, err := tx.LockBinding(ctx, id)
		if err != nil {
			return err
		}
		next, exists, material, err := s.deriveBinding(ctx, tx, id, key, configured, now)
		if err != nil {
			return err
		}
		if exists {
			out[id] = next
		}
		if material {
			events = append(events, domain.NewMemberBindingChanged(next))
			if releases(before, next) {
				freed = append(freed, *before)
			}
		}
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(known)) {
		if err := derive(id, known[id]); err != nil {
			return nil, err
		}
	}
	// A binding that stopped holding its account (retired, or another
	// account) lets a binding held back for it take it now
	// (docs/resource-provisioning.md#one-party-per-account). These are
	// locked after the others, out of ID order: rare, and a deadlock on
	// PostgreSQL is an error its caller retries.
	for len(freed) > 0 {
		b := freed[0]
		freed = freed[1:]
		waiting, err := tx.BindingsHoldingAccount(ctx, b.Environment, b.AccountName(), "")
		if err != nil {
			return nil, err
		}
		for _, w := range waiting {
			if _, done := out[w.ID]; done || !slices.Contains(w.Reasons, domain.ReasonAccountTaken) {
				continue
			}
			if err := derive(w.ID, nil); err != nil {
				return nil, err
			}
		}
	}
	if len(events) == 0 {
		return out, nil
	}
	return out, tx.AppendBindingChanges(ctx, events, now)
}

// releases reports whether a binding that was live and not held back
// (before) no longer holds its account or its ready account's UID after
// a change (next).
func releases(before *domain.MemberBinding, next domain.MemberBinding) bool {
	if before == nil || before.State == domain.BindingRetired || slices.Contains(before.Reasons, domain.ReasonAccountTaken) {
		return false
	}
	return next.State == domain.BindingRetired || next.AccountName() != before.AccountName() || next.Account.UID != before.Account.UID
}

// deriveBinding derives and stores one binding (its key nil: only a stored
// binding is derived again).
func (s *Service) deriveBinding(ctx context.Context, tx BindingTx, id string, key *domain.BindingKey, configured backends, now time.Time) (next domain.MemberBinding, exists, material bool, err error) {
	for attempt := 0; attempt < 2; attempt++ {
		cur, err := tx.LockBinding(ctx, id)
		if err != nil {
			return domain.MemberBinding{}, false, false, err
		}
		k := key
		if cur != nil {
			k = &cur.BindingKey
		}
		if k == nil {
			return domain.MemberBinding{}, false, false, nil
		}
		in, err := s.bindingInputs(ctx, tx, id, *k, cur, configured)
		if err != nil {
			return domain.MemberBinding{}, false, false, err
		}
		next, material := domain.DeriveBinding(cur, *k, in, now)
		switch {
		case !material:
			return next, cur != nil, false, nil
		case cur != nil:
			return next, true, true, tx.UpdateBinding(ctx, next)
		}
		inserted, err := tx.InsertBinding(ctx, next)
		if err != nil || inserted {
			return next, err == nil, err == nil, err
		}
		// Another transaction created it and committed: derive again
		// against its row, now locked.
	}
	return domain.MemberBinding{}, false, false, fmt.Errorf("member binding %s neither inserted nor found", id)
}

// bindingInputs reads what binding id of key is derived from; the accounts
// only when it is live, and its account name by its environment's backend
// in configured.
func (s *Service) bindingInputs(ctx context.Context, tx BindingTx, id string, key domain.BindingKey, cur *domain.MemberBinding, configured backends) (domain.BindingInputs, error) {
	var in domain.BindingInputs
	var err error
	if in.Member, err = tx.IsProjectMember(ctx, key.ProjectID, key.PartyID); err != nil {
		return in, err
	}
	if !in.Member && cur == nil {
		return in, nil
	}
	if in.SiteBinding, err = tx.CurrentSiteBinding(ctx, key.PartyID, key.Environment); err != nil || !in.Live() {
		return in, err
	}
	if in.Accounts, err = tx.BindingAccounts(ctx, id); err != nil {
		return in, err
	}
	in.NativeName = siteprotocol.MemberAccountAt(configured.of(key.Environment), key.PartyID, in.SiteBinding.ExternalID)
	return in, s.takenAccounts(ctx, tx, key, &in)
}

// takenAccounts sets in's AccountTaken and TakenUIDs: one Party per
// account (docs/resource-provisioning.md#one-party-per-account). A binding
// of another Party at the environment holds an account (by name, or by the
// UID of its ready account) unless it is itself held back
// (account_taken), so the first binding keeps the account and a later one
// waits.
func (s *Service) takenAccounts(ctx context.Context, tx BindingTx, key domain.BindingKey, in *domain.BindingInputs) error {
	holds := func(b domain.MemberBinding) bool {
		return b.PartyID != key.PartyID && !slices.Contains(b.Reasons, domain.ReasonAccountTaken)
	}
	others, err := tx.BindingsHoldingAccount(ctx, key.Environment, in.NativeName, "")
	if err != nil {
		return err
	}
	for _, b := range others {
		if b.AccountName() == in.NativeName && holds(b) {
			in.AccountTaken = true
		}
	}
	for _, a := range in.Accounts {
		if a.State != domain.AccountReady {
			continue
		}
		others, err := tx.BindingsHoldingAccount(ctx, key.Environment, "", a.UID)
		if err != nil {
			return err
		}
		for _, b := range others {
			if b.State == domain.BindingReady && b.Account.UID == a.UID && holds(b) {
				if in.TakenUIDs == nil {
					in.TakenUIDs = map[string]bool{}
				}
				in.TakenUIDs[a.UID] = true
			}
		}
	}
	return nil
}

// applyMemberships replaces the Project view's memberships with p's and
// returns the keys of the bindings the change may move: those of every
// Party that joined or left, at each environment of its site bindings or
// of its bindings in the Project.
func (s *Service) applyMemberships(ctx context.Context, tx EventTx, p *domain.ProjectChanged) ([]domain.BindingKey, error) {
	old, err := tx.ProjectMembers(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	before := make(map[string]string, len(old))
	for _, m := range old {
		before[m.PartyID] = m.Role
	}
	after := make(map[string]string, len(p.Memberships))
	for _, m := range p.Memberships {
		if _, ok := after[m.PartyID]; !ok {
			after[m.PartyID] = m.Role
		}
	}
	var moved []string
	for _, party := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[party]; !ok {
			if err := tx.DeleteMembership(ctx, p.ID, party); err != nil {
				return nil, err
			}
			moved = append(moved, party)
		}
	}
	for _, party := range slices.Sorted(maps.Keys(after)) {
		role, ok := before[party]
		if ok && role == after[party] {
			continue
		}
		if err := tx.UpsertMembership(ctx, p.ID, Membership{PartyID: party, Role: after[party]}); err != nil {
			return nil, err
		}
		if !ok {
			moved = append(moved, party)
		}
	}
	var keys []domain.BindingKey
	for _, party := range moved {
		envs, err := tx.PartySiteEnvironments(ctx, party)
		if err != nil {
			return nil, err
		}
		existing, err := tx.PartyBindingKeys(ctx, party)
		if err != nil {
			return nil, err
		}
		for _, k := range existing {
			if k.ProjectID == p.ID {
				envs = append(envs, k.Environment)
			}
		}
		slices.Sort(envs)
		for _, env := range slices.Compact(envs) {
			keys = append(keys, domain.BindingKey{PartyID: party, ProjectID: p.ID, Environment: env})
		}
	}
	return keys, nil
}

// applyPartyBinding stores a Party binding event in the view and returns
// whether it applied and, for a site binding, the keys of the bindings it
// may move: the Party's (before and after the event) in each of its
// Projects and bindings, at the environments the binding names before and
// after.
func (s *Service) applyPartyBinding(ctx context.Context, tx EventTx, b domain.PartyProviderBinding, occurredAt, now time.Time) (bool, []domain.BindingKey, error) {
	old, err := tx.PartyBinding(ctx, b.ID)
	if err != nil {
		return false, nil, err
	}
	applied, err := tx.UpsertPartyBinding(ctx, b, occurredAt, now)
	if err != nil || !applied {
		return false, nil, err
	}
	type pe struct{ party, env string }
	var touched []pe
	if b.Provider == domain.ProviderSite {
		touched = append(touched, pe{b.PartyID, b.Instance})
	}
	if old != nil && old.Provider == domain.ProviderSite {
		touched = append(touched, pe{old.PartyID, old.Instance})
	}
	var keys []domain.BindingKey
	for _, t := range touched {
		projects, err := tx.PartyProjects(ctx, t.party)
		if err != nil {
			return false, nil, err
		}
		existing, err := tx.PartyBindingKeys(ctx, t.party)
		if err != nil {
			return false, nil, err
		}
		for _, k := range existing {
			if k.Environment == t.env {
				projects = append(projects, k.ProjectID)
			}
		}
		slices.Sort(projects)
		for _, project := range slices.Compact(projects) {
			keys = append(keys, domain.BindingKey{PartyID: t.party, ProjectID: project, Environment: t.env})
		}
	}
	return true, keys, nil
}

// movedAllocation is a material change of an allocation in a report
// transaction: its facts before (nil when the report created it) and its
// event.
type movedAllocation struct {
	prev *domain.Facts
	next *domain.AllocationChanged
}

// rederiveAccountBindings derives again the bindings named by the accounts
// of allocations whose Project, native scope or retirement a report
// changed: a binding's ready account is reported in a non-retired
// allocation of its Project, and its namespace is that allocation's.
func (s *Service) rederiveAccountBindings(ctx context.Context, tx ReportTx, moved []movedAllocation, now time.Time) error {
	var ids []string
	for _, m := range moved {
		if m.prev == nil {
			continue // created: no account can name it yet
		}
		retired := func(l string) bool { return l == domain.LifecycleRetired }
		if m.prev.ProjectID == m.next.ProjectID && m.prev.NativeScope == m.next.NativeScope && retired(m.prev.Lifecycle) == retired(m.next.Lifecycle) {
			continue
		}
		bs, err := tx.AllocationAccountBindings(ctx, m.next.AllocationID)
		if err != nil {
			return err
		}
		ids = append(ids, bs...)
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := s.deriveBindings(ctx, tx, nil, ids, now)
	return err
}
