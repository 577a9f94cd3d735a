package storetest

// The member account cases (memberTests, accounts.go) of a Slurm
// environment (docs/resource-provisioning.md#member-identity-at-a-slurm-environment):
// the account is the Party's site username, its UID the decimal Unix uid,
// and one Party holds an account at an environment
// (docs/resource-provisioning.md#one-party-per-account).

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// slurm returns e with a service whose environment alpha-hpc is a Slurm
// one (the others Kubernetes).
func (e *env) slurm(t *testing.T) *env {
	t.Helper()
	svc, reg := newServiceWith(t, e.sub, e.clock, application.StaticEnvironments{
		SiteOf: Environments, BackendOf: map[string]siteprotocol.Backend{EnvHPC: siteprotocol.BackendSlurm},
	})
	return &env{sub: e.sub, svc: svc, clock: e.clock, reg: reg, ctx: e.ctx}
}

// slurmAccount is party's Unix account username with uid for binding at
// generation gen, ready.
func slurmAccount(party, username, uid, binding string, gen int64) domain.ReportedAccount {
	return domain.ReportedAccount{PartyID: party, Account: username, UID: uid, BindingID: binding, Generation: gen, State: domain.AccountReady}
}

// accountsInvalid submits an account report that must be refused 422 and
// returns the problems' locations.
func (e *env) accountsInvalid(t *testing.T, resource string, at time.Duration, accounts ...domain.ReportedAccount) []string {
	t.Helper()
	_, err := e.svc.SubmitAccounts(e.ctx, Site, domain.AccountReport{ProviderResourceID: resource, ObservedAt: T0.Add(at), Accounts: accounts})
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("account report: %v, want a validation error", err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Location)
	}
	return out
}

// testSlurmAccountIsTheSiteUsername: at a Slurm environment a Party with a
// verified site binding jdoe gets a binding whose account is jdoe; the
// lookup answers jdoe; an account report naming member-<party> there is
// 422 naming the field, one with a uid that is not a decimal Unix uid too;
// the report (jdoe, 1001) makes the binding ready with UID 1001; jdoe made
// again with uid 1002 is another account, a new revision with 1002. The
// Kubernetes environment of the same Site keeps member-<party>.
func testSlurmAccountIsTheSiteUsername(t *testing.T, e *env) {
	e = e.slurm(t)
	e.event(t, SiteBindingEvent(siteBindingID(PartyID, EnvHPC), PartyID, EnvHPC, "jdoe", domain.SiteBindingVerified, 1, 0))
	e.event(t, SiteBindingEvent(siteBindingID(PartyID, EnvK8s), PartyID, EnvK8s, "jdoe", domain.SiteBindingVerified, 1, 0))
	e.event(t, MembersEvent(ProjectA, 1, "pp1", PartyID))
	e.submit(t, Report("r1", "pp1", 0))
	id := bindingID(PartyID, ProjectA, EnvHPC)
	b := e.binding(t, PartyID, ProjectA, EnvHPC)
	if b == nil || b.AccountName() != "jdoe" || b.State != domain.BindingPending || !slices.Equal(b.Reasons, []string{domain.ReasonAccountMissing}) {
		t.Fatalf("slurm binding before any account report: %+v", b)
	}
	if k := e.binding(t, PartyID, ProjectA, EnvK8s); k == nil || k.AccountName() != domain.AccountName(PartyID) {
		t.Fatalf("kubernetes binding of the same Party: %+v", k)
	}
	if l := e.lookup(t, Site, EnvHPC, "jdoe", "pp1"); l.State != application.LookupBound || l.Account != "jdoe" || l.BindingID != id || l.Generation != 1 {
		t.Fatalf("lookup of jdoe: %+v", l)
	}
	if got := e.accountsInvalid(t, "r1", time.Minute, slurmAccount(PartyID, domain.AccountName(PartyID), "1001", id, 1)); !slices.Equal(got, []string{"body.accounts[0].account"}) {
		t.Fatalf("member-<party> at a slurm environment: problems at %v, want body.accounts[0].account", got)
	}
	if got := e.accountsInvalid(t, "r1", time.Minute, slurmAccount(PartyID, "jdoe", "3b0c6a52-6f1d-4c1e-9f0a-2d7e5b8c9a41", id, 1)); !slices.Equal(got, []string{"body.accounts[0].uid"}) {
		t.Fatalf("a Kubernetes UID at a slurm environment: problems at %v", got)
	}
	if got := e.accountsInvalid(t, "r1", time.Minute, slurmAccount(PartyID, "jsmith", "1001", id, 1)); !slices.Equal(got, []string{"body.accounts[0].account"}) {
		t.Fatalf("another username than the site binding's: problems at %v", got)
	}
	res := e.accounts(t, "r1", time.Minute, slurmAccount(PartyID, "jdoe", "1001", id, 1))
	if !res.Accounts[0].Current || res.Accounts[0].BindingState != domain.BindingReady {
		t.Fatalf("account report (jdoe, 1001): %+v", res)
	}
	b = e.binding(t, PartyID, ProjectA, EnvHPC)
	if b.State != domain.BindingReady || b.AccountName() != "jdoe" || b.Account.UID != "1001" || b.Account.Namespace != "ns-r1" || b.Generation != 1 {
		t.Fatalf("binding after (jdoe, 1001): %+v", b)
	}
	// jdoe deleted and made again with uid 1002: another account (the UID
	// is part of its key), a new revision carrying 1002.
	rev := b.Revision
	e.accounts(t, "r1", 2*time.Minute, slurmAccount(PartyID, "jdoe", "1002", id, 1))
	b = e.binding(t, PartyID, ProjectA, EnvHPC)
	if b.State != domain.BindingReady || b.Account.UID != "1002" || b.Revision != rev+1 {
		t.Fatalf("binding after jdoe was made again with uid 1002: %+v", b)
	}
	accs, err := e.svc.NativeAccounts(e.ctx, domain.AllocationID(Site, "r1"))
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, a := range accs {
		states[a.UID] = a.State
	}
	if states["1001"] != domain.AccountAbsent || states["1002"] != domain.AccountReady {
		t.Fatalf("accounts by uid %v: 1001 absent and 1002 ready", states)
	}
}

// testSlurmOnePartyPerAccount: two Parties whose site bindings name jdoe
// at one Slurm environment: the first keeps the binding, the second's is
// pending account_taken, listed by the inconsistencies read, answered
// unknown by the lookup, and its account report makes it no ready
// account; when the first Party's site binding is retired, the second's
// binding is derived again at its next input. A uid held by another
// Party's ready account is refused the same way.
func testSlurmOnePartyPerAccount(t *testing.T, e *env) {
	e = e.slurm(t)
	e.event(t, SiteBindingEvent(siteBindingID(PartyID, EnvHPC), PartyID, EnvHPC, "jdoe", domain.SiteBindingVerified, 1, 0))
	e.event(t, MembersEvent(ProjectA, 1, "pp1", PartyID, PartyB))
	e.submit(t, Report("r1", "pp1", 0))
	e.event(t, SiteBindingEvent(siteBindingID(PartyB, EnvHPC), PartyB, EnvHPC, "jdoe", domain.SiteBindingVerified, 1, time.Second))
	first, second := e.binding(t, PartyID, ProjectA, EnvHPC), e.binding(t, PartyB, ProjectA, EnvHPC)
	if first == nil || first.State != domain.BindingPending || !slices.Equal(first.Reasons, []string{domain.ReasonAccountMissing}) {
		t.Fatalf("the first Party's binding: %+v", first)
	}
	if second == nil || second.State != domain.BindingPending || !slices.Equal(second.Reasons, []string{domain.ReasonAccountTaken}) || second.AccountName() != "jdoe" {
		t.Fatalf("the second Party's binding: %+v", second)
	}
	_, page, _ := e.inconsistencies(t, 0)
	if len(page.AccountConflicts) != 1 || page.AccountConflicts[0].ID != second.ID || page.AccountConflicts[0].AccountName() != "jdoe" {
		t.Fatalf("account conflicts %+v, want the second Party's binding only", page.AccountConflicts)
	}
	// The username's newest site binding is the second Party's: the lookup
	// says its binding is held back.
	if l := e.lookup(t, Site, EnvHPC, "jdoe", "pp1"); l.State != application.LookupUnknown || !slices.Equal(l.Reasons, []string{application.LookupAccountTaken}) || l.PartyID != PartyB {
		t.Fatalf("lookup of jdoe: %+v", l)
	}
	// An agent reporting jdoe for both: the first is ready, the second
	// stays held back.
	res := e.accounts(t, "r1", time.Minute,
		slurmAccount(PartyID, "jdoe", "1001", first.ID, 1), slurmAccount(PartyB, "jdoe", "1002", second.ID, 1))
	if !res.Accounts[0].Current || res.Accounts[1].Current || res.Accounts[1].BindingState != domain.BindingPending {
		t.Fatalf("account report of both: %+v", res)
	}
	if b := e.binding(t, PartyB, ProjectA, EnvHPC); b.State != domain.BindingPending || !slices.Equal(b.Reasons, []string{domain.ReasonAccountTaken}) || b.Account.UID != "" {
		t.Fatalf("the second Party's binding after the report: %+v", b)
	}
	// A third Party with its own username but the first's uid: held back.
	e.event(t, SiteBindingEvent(siteBindingID(PartyC, EnvHPC), PartyC, EnvHPC, "csmith", domain.SiteBindingVerified, 1, 2*time.Second))
	e.event(t, MembersEvent(ProjectA, 2, "pp1", PartyID, PartyB, PartyC))
	third := bindingID(PartyC, ProjectA, EnvHPC)
	e.submit(t, Report("r2", "pp1", time.Minute))
	e.accounts(t, "r2", 2*time.Minute, slurmAccount(PartyC, "csmith", "1001", third, 1))
	if b := e.binding(t, PartyC, ProjectA, EnvHPC); b.State != domain.BindingPending || !slices.Equal(b.Reasons, []string{domain.ReasonAccountTaken}) {
		t.Fatalf("a binding whose account has another Party's uid: %+v", b)
	}
	if b := e.binding(t, PartyID, ProjectA, EnvHPC); b.State != domain.BindingReady || b.Account.UID != "1001" {
		t.Fatalf("the first Party's binding: %+v", b)
	}
	// The first Party's site binding retired: its binding retires, and in
	// the same transaction the second Party's binding, derived again, takes
	// the account: its reported account (jdoe, uid 1002) is ready. The
	// third Party's binding, held back by uid 1001, is derived again at its
	// allocation's next account report (every agent cycle).
	e.event(t, SiteBindingEvent(siteBindingID(PartyID, EnvHPC), PartyID, EnvHPC, "jdoe", "retired", 2, 3*time.Second))
	if b := e.binding(t, PartyID, ProjectA, EnvHPC); b.State != domain.BindingRetired {
		t.Fatalf("the first Party's binding after its site binding was retired: %+v", b)
	}
	if b := e.binding(t, PartyB, ProjectA, EnvHPC); b.State != domain.BindingReady || b.Account.UID != "1002" || b.Generation != 1 {
		t.Fatalf("the second Party's binding once jdoe is free: %+v", b)
	}
	e.accounts(t, "r2", 4*time.Minute, slurmAccount(PartyC, "csmith", "1001", third, 1))
	if b := e.binding(t, PartyC, ProjectA, EnvHPC); b.State != domain.BindingReady || b.Account.UID != "1001" {
		t.Fatalf("the third Party's binding once uid 1001 is free: %+v", b)
	}
	if _, page, _ := e.inconsistencies(t, 0); len(page.AccountConflicts) != 0 {
		t.Fatalf("account conflicts left: %+v", page.AccountConflicts)
	}
}
