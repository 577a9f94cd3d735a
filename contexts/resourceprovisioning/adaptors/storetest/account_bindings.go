package storetest

// The member account cases (memberTests, accounts.go) of Runtime member
// bindings: identity, generations, a replaced Site binding and an
// allocation that moves.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

func testBindingIdentity(t *testing.T, e *env) {
	for _, env := range []string{EnvK8s, EnvHPC} {
		e.event(t, SiteBindingEvent(siteBindingID(PartyID, env), PartyID, env, "alice", domain.SiteBindingVerified, 1, 0))
	}
	e.event(t, MembersEvent(ProjectA, 1, "pp1", PartyID))
	e.event(t, MembersEvent(ProjectB, 1, "pp2", PartyID))
	ids := map[string]string{}
	for _, env := range []string{EnvK8s, EnvHPC} {
		for _, project := range []string{ProjectA, ProjectB} {
			b := e.binding(t, PartyID, project, env)
			if b == nil {
				t.Fatalf("no binding of the Party in %s at %s", project, env)
			}
			where := project + " at " + env
			if prev, dup := ids[b.ID]; dup {
				t.Fatalf("%s and %s share binding ID %s", prev, where, b.ID)
			}
			ids[b.ID] = where
			if b.ID != bindingID(PartyID, project, env) || b.Generation != 1 || b.Revision != 1 || b.ID == siteBindingID(PartyID, env) {
				t.Fatalf("%s: %+v", where, b)
			}
			if b.State != domain.BindingPending || !slices.Equal(b.Reasons, []string{domain.ReasonAccountMissing}) || b.AccountName() != "member-"+PartyID {
				t.Fatalf("%s before any account report: %+v", where, b)
			}
		}
	}
	if n := len(e.bindingChanges(t)); n != 4 {
		t.Fatalf("%d binding changes in the feed, want 4 (one per binding at revision 1)", n)
	}
	// A member without a verified site binding at an environment gets no
	// binding there.
	if b := e.binding(t, PartyID, ProjectA, EnvBeta); b != nil {
		t.Fatalf("a binding at %s without a site binding there: %+v", EnvBeta, b)
	}
}

func testGenerationsAndRecreatedAccount(t *testing.T, e *env) {
	e.setUp(t, PartyID)
	id := bindingID(PartyID, ProjectA, EnvK8s)
	user := "user-" + PartyID[:8]
	l := e.lookup(t, Site, EnvK8s, user, "pp1")
	if l.State != application.LookupBound || l.BindingID != id || l.Generation != 1 || l.Revision != 1 || l.ProjectID != ProjectA || l.PartyID != PartyID || l.Account != domain.AccountName(PartyID) {
		t.Fatalf("lookup %+v", l)
	}
	res := e.accounts(t, "r1", time.Minute, ready(PartyID, "uid-1", id, 1))
	if res.Outcome != domain.OutcomeCreated || res.Revision != 1 || !res.Accounts[0].Current || res.Accounts[0].BindingState != domain.BindingReady {
		t.Fatalf("first account report %+v", res)
	}
	if uid := e.readyUID(t, PartyID, ProjectA); uid != "uid-1" {
		t.Fatalf("ready account %q, want uid-1", uid)
	}
	b := e.binding(t, PartyID, ProjectA, EnvK8s)
	if b.State != domain.BindingReady || b.Revision != 2 || (b.Account != domain.ReadyAccount{UID: "uid-1", AllocationID: domain.AllocationID(Site, "r1"), Namespace: "ns-r1"}) {
		t.Fatalf("binding after the account report %+v", b)
	}

	// Removed from the Project: retired with its generation.
	e.event(t, MembersEvent(ProjectA, 2, "pp1"))
	b = e.binding(t, PartyID, ProjectA, EnvK8s)
	if b == nil || b.State != domain.BindingRetired || b.Generation != 1 || b.Revision != 3 || !slices.Equal(b.Reasons, []string{domain.ReasonMemberRemoved}) || b.Account.UID != "" {
		t.Fatalf("after removal %+v", b)
	}
	if l := e.lookup(t, Site, EnvK8s, user, "pp1"); l.State != application.LookupRetired || l.Generation != 1 || l.BindingID != id {
		t.Fatalf("lookup after removal %+v", l)
	}
	if uid := e.readyUID(t, PartyID, ProjectA); uid != "" {
		t.Fatalf("a retired binding still reads ready account %s", uid)
	}
	// The agent removes the account; the member comes back: generation 2.
	e.accounts(t, "r1", 2*time.Minute)
	e.event(t, MembersEvent(ProjectA, 3, "pp1", PartyID))
	b = e.binding(t, PartyID, ProjectA, EnvK8s)
	if b.State != domain.BindingPending || b.Generation != 2 || b.ID != id {
		t.Fatalf("after re-adding %+v", b)
	}
	if l := e.lookup(t, Site, EnvK8s, user, "pp1"); l.State != application.LookupBound || l.Generation != 2 {
		t.Fatalf("lookup after re-adding %+v", l)
	}
	// An old report naming generation 1 cannot revive it: it is stale.
	e.accountsRefused(t, Site, domain.ReasonStaleReport, "r1", 90*time.Second, ready(PartyID, "uid-1", id, 1))
	// The account made again under the same name: a new UID, a new row.
	res = e.accounts(t, "r1", 3*time.Minute, ready(PartyID, "uid-2", id, 2))
	if res.Outcome != domain.OutcomeChanged || !res.Accounts[0].Current || res.Accounts[0].BindingGeneration != 2 {
		t.Fatalf("report of the recreated account %+v", res)
	}
	if uid := e.readyUID(t, PartyID, ProjectA); uid != "uid-2" {
		t.Fatalf("ready account %q, want the recreated uid-2", uid)
	}
	rows, err := e.svc.NativeAccounts(e.ctx, domain.AllocationID(Site, "r1"))
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, a := range rows {
		states[fmt.Sprintf("%s/%d", a.UID, a.Generation)] = a.State
	}
	if len(rows) != 2 || states["uid-1/1"] != domain.AccountAbsent || states["uid-2/2"] != domain.AccountReady {
		t.Fatalf("stored accounts %+v: want uid-1 (generation 1) absent and uid-2 (generation 2) ready", rows)
	}
	// An account still carrying the older generation is kept as evidence
	// and counts for nothing.
	res = e.accounts(t, "r1", 4*time.Minute, ready(PartyID, "uid-2", id, 1))
	if res.Outcome != domain.OutcomeChanged || res.Accounts[0].Current || res.Accounts[0].BindingGeneration != 2 {
		t.Fatalf("an account of generation 1 reported for a generation 2 binding: %+v", res)
	}
	if uid := e.readyUID(t, PartyID, ProjectA); uid != "" {
		t.Fatalf("an older generation's account reads ready: %s", uid)
	}
}

func testSiteBindingReplaced(t *testing.T, e *env) {
	e.setUp(t, PartyID)
	id := bindingID(PartyID, ProjectA, EnvK8s)
	e.accounts(t, "r1", time.Minute, ready(PartyID, "uid-1", id, 1))
	// Beto replaces the site binding: a new binding verified before the old
	// one's retirement arrives.
	replacement := "f52a1b3c-4d5e-4f6a-9b0c-1d2e3f4a5b6c"
	e.event(t, SiteBindingEvent(replacement, PartyID, EnvK8s, "alice-new", domain.SiteBindingVerified, 1, time.Hour))
	b := e.binding(t, PartyID, ProjectA, EnvK8s)
	if b.Generation != 2 || b.State != domain.BindingPending || b.Site.ID != replacement || b.Site.Username != "alice-new" {
		t.Fatalf("after the replacement %+v", b)
	}
	e.event(t, SiteBindingEvent(siteBindingID(PartyID, EnvK8s), PartyID, EnvK8s, "user-"+PartyID[:8], "retired", 2, 2*time.Hour))
	if b2 := e.binding(t, PartyID, ProjectA, EnvK8s); b2.Generation != 2 || b2.Revision != b.Revision {
		t.Fatalf("the replaced binding's retirement moved the binding: %+v", b2)
	}
	e.event(t, SiteBindingEvent(replacement, PartyID, EnvK8s, "alice-new", "retired", 2, 3*time.Hour))
	b = e.binding(t, PartyID, ProjectA, EnvK8s)
	if b.State != domain.BindingRetired || b.Generation != 2 || !slices.Equal(b.Reasons, []string{domain.ReasonSiteBindingRetired}) {
		t.Fatalf("after the site binding's retirement %+v", b)
	}
	// Beto's own generation is evidence, not the binding's.
	if b.Site.Generation != 1 {
		t.Fatalf("site binding generation %d", b.Site.Generation)
	}
}

func testAllocationMovesAccounts(t *testing.T, e *env) {
	e.setUp(t, PartyID)
	id := bindingID(PartyID, ProjectA, EnvK8s)
	e.accounts(t, "r1", time.Minute, ready(PartyID, "uid-1", id, 1))
	// The Waldur Project is rebound to ProjectB: the next report moves the
	// allocation, and its accounts no longer serve ProjectA's binding.
	e.event(t, MembersEvent(ProjectA, 2, "pp9", PartyID))
	e.event(t, MembersEvent(ProjectB, 1, "pp1", PartyID))
	e.submit(t, Report("r1", "pp1", time.Minute))
	if b := e.binding(t, PartyID, ProjectA, EnvK8s); b.State != domain.BindingPending || !slices.Equal(b.Reasons, []string{domain.ReasonAccountMissing}) {
		t.Fatalf("after the allocation moved to another Project: %+v", b)
	}
	// Back to ProjectA: ready again, with the same account.
	e.event(t, MembersEvent(ProjectB, 2, "pp8", PartyID))
	e.event(t, MembersEvent(ProjectA, 3, "pp1", PartyID))
	e.submit(t, Report("r1", "pp1", 2*time.Minute))
	if uid := e.readyUID(t, PartyID, ProjectA); uid != "uid-1" {
		t.Fatalf("back in ProjectA: ready account %q", uid)
	}
	// A new namespace moves the binding's namespace.
	r := Report("r1", "pp1", 3*time.Minute)
	r.NativeScope = "ns-renamed"
	e.submit(t, r)
	if b := e.binding(t, PartyID, ProjectA, EnvK8s); b.Account.Namespace != "ns-renamed" {
		t.Fatalf("namespace %+v", b.Account)
	}
	// Terminated: the account is gone with it.
	gone := Report("r1", "pp1", 4*time.Minute)
	gone.State = domain.WaldurTerminated
	e.submit(t, gone)
	if b := e.binding(t, PartyID, ProjectA, EnvK8s); b.State != domain.BindingPending {
		t.Fatalf("after the allocation's retirement: %+v", b)
	}
}
