package storetest

// The conformance suite's native member accounts and Runtime member
// bindings (docs/resource-provisioning.md#native-member-accounts): identity,
// generations, the account report, the lookup, the reads, the change feed,
// concurrency and unavailability, on every store adaptor.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// Environments of the suite: two at Site alpha, one at Site beta.
const (
	EnvK8s  = "alpha-k8s"
	EnvHPC  = "alpha-hpc"
	EnvBeta = "beta-k8s"
)

// Environments maps the suite's environments to their Sites.
var Environments = map[string]string{EnvK8s: Site, EnvHPC: Site, EnvBeta: "beta"}

// Parties of the suite (lower-case UUIDs).
const (
	PartyB = "1d3e6f2b-1c8a-4f4d-9b7e-3a2f1d0c9b8e"
	PartyC = "2e4f7a3c-2d9b-4a5e-8c8f-4b3a2e1d0c9f"
)

// memberTests are the suite's native member account cases; Exercise runs
// them with the others.
var memberTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"BindingsAreOnePerPartyProjectAndEnvironment", testBindingIdentity},
	{"RemovedThenAddedAgainRetiresThenGivesGenerationTwoAndARecreatedAccountIsANewRow", testGenerationsAndRecreatedAccount},
	{"SiteBindingRetiredAndReplacedMoveTheGeneration", testSiteBindingReplaced},
	{"OutOfOrderAccountReportsAreStaleAndChangeNothing", testAccountReportOrder},
	{"AccountReportsNamingWhatThisContextDoesNotHoldAreRefusedWhole", testAccountRefusals},
	{"TheLookupFollowsTheFourStepsAndAnswersRetiredRatherThanAnOlderLiveBinding", testLookup},
	{"DesiredBindingsAreCompleteOrderedPaginatedAndSayWhy", testDesiredBindings},
	{"AnAllocationsProjectOrRetirementMovesItsAccountsBindings", testAllocationMovesAccounts},
	{"BindingChangesAreInTheChangeFeedInRevisionOrder", testBindingFeed},
	{"ConcurrentFirstAccountReportsOfOneAllocationAreDecidedOneAfterTheOther", testConcurrentFirstAccountReports},
	{"ConcurrentEventsMissNoBinding", testConcurrentEventsAndReports},
	{"MemberReadsAndAccountReportsAreUnavailableWithTheDatabase", testMembersUnavailable},
}

// members returns e with a service that knows the suite's environments.
func (e *env) members(t *testing.T) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	tel, err := telemetry.New(zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := application.NewService(e.sub.Store, e.clock, tel, application.Config{WaldurInstance: Instance, Freshness: 15 * time.Minute, Environments: Environments})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sub: e.sub, svc: svc, clock: e.clock, reg: reg, ctx: e.ctx}
}

var eventSeq atomic.Int64

// SiteBindingEvent returns a PartyProviderBindingChanged of Party party's
// site binding id at environment env with username, in state, at revision
// rev, occurred at T0+at.
func SiteBindingEvent(id, party, env, username, state string, rev int64, at time.Duration) domain.BetoEvent {
	return domain.BetoEvent{EventID: fmt.Sprintf("pb-%d", eventSeq.Add(1)), Type: domain.EventPartyProviderBindingChanged, OccurredAt: T0.Add(at),
		Binding: &domain.PartyProviderBinding{ID: id, PartyID: party, Revision: rev, Provider: domain.ProviderSite, Instance: env, ExternalID: username, State: state, Generation: 1}}
}

// MembersEvent returns a ProjectChanged of project at revision rev bound to
// Waldur Project pp with members.
func MembersEvent(project string, rev int64, pp string, members ...string) domain.BetoEvent {
	ev := ProjectEvent(fmt.Sprintf("pc-%d", eventSeq.Add(1)), project, rev, Instance, pp)
	for _, m := range members {
		ev.Project.Memberships = append(ev.Project.Memberships, domain.Membership{PartyID: m, Role: "member"})
	}
	return ev
}

// bindingID returns the binding of party in project at env.
func bindingID(party, project, env string) string {
	return domain.BindingKey{PartyID: party, ProjectID: project, Environment: env}.ID()
}

// ready is a ready account of party with uid for binding at generation.
func ready(party, uid, binding string, gen int64) domain.ReportedAccount {
	return domain.ReportedAccount{PartyID: party, Account: domain.AccountName(party), UID: uid, BindingID: binding, Generation: gen, State: domain.AccountReady}
}

func (e *env) accounts(t *testing.T, resource string, at time.Duration, accounts ...domain.ReportedAccount) application.AccountsResult {
	t.Helper()
	res, err := e.svc.SubmitAccounts(e.ctx, Site, domain.AccountReport{ProviderResourceID: resource, ObservedAt: T0.Add(at), Accounts: accounts})
	if err != nil {
		t.Fatalf("account report: %v", err)
	}
	return res
}

func (e *env) accountsRefused(t *testing.T, site, reason, resource string, at time.Duration, accounts ...domain.ReportedAccount) []domain.Refusal {
	t.Helper()
	_, err := e.svc.SubmitAccounts(e.ctx, site, domain.AccountReport{ProviderResourceID: resource, ObservedAt: T0.Add(at), Accounts: accounts})
	var ce *domain.ConflictError
	if !errors.As(err, &ce) || ce.Reason() != reason {
		t.Fatalf("account report: %v, want a conflict %s", err, reason)
	}
	return ce.Refusals
}

// binding returns the binding of party in project at env through the
// desired-binding read (nil when it has none).
func (e *env) binding(t *testing.T, party, project, env string) *domain.MemberBinding {
	t.Helper()
	for _, en := range e.desired(t, env, 0) {
		if en.PartyID == party && en.ProjectID == project {
			return en.Binding
		}
	}
	return nil
}

// desired reads every entry of env's desired bindings, pages of limit.
func (e *env) desired(t *testing.T, env string, limit int) []application.DesiredEntry {
	t.Helper()
	var out []application.DesiredEntry
	after := ""
	for {
		p, err := e.svc.DesiredBindings(e.ctx, env, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Entries...)
		if p.After == "" {
			return out
		}
		after = p.After
	}
}

func (e *env) lookup(t *testing.T, site, env, username, pp string) application.AccountLookup {
	t.Helper()
	l, err := e.svc.LookupAccount(e.ctx, site, env, username, pp)
	if err != nil {
		t.Fatalf("lookup %s %s: %v", username, pp, err)
	}
	return l
}

// readyUID returns the UID of party's ready account in project at the
// suite's Site ("" when none is ready).
func (e *env) readyUID(t *testing.T, party, project string) string {
	t.Helper()
	vs, err := e.svc.ProjectAccounts(e.ctx, project, Site, party)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.State == domain.BindingReady {
			return v.UID
		}
	}
	return ""
}

// bindingChanges returns the feed's MemberBindingChanged events.
func (e *env) bindingChanges(t *testing.T) []domain.MemberBindingChanged {
	t.Helper()
	var out []domain.MemberBindingChanged
	for _, c := range e.changes(t) {
		if c.Type == domain.MemberBindingChangedType {
			out = append(out, c.Binding)
		}
	}
	return out
}

// memberState is everything the member reads answer, to prove a refused
// request changed nothing.
func (e *env) memberState(t *testing.T, resources ...string) string {
	t.Helper()
	var b strings.Builder
	for _, env := range []string{EnvK8s, EnvHPC, EnvBeta} {
		for _, en := range e.desired(t, env, 0) {
			fmt.Fprintf(&b, "%s %s %s %v", env, en.ProjectID, en.PartyID, en.Reasons)
			if en.Binding != nil {
				fmt.Fprintf(&b, " %+v", *en.Binding)
			}
			b.WriteString("\n")
		}
	}
	for _, r := range resources {
		as, err := e.svc.NativeAccounts(e.ctx, domain.AllocationID(Site, r))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %+v\n", r, as)
	}
	return b.String() + e.snapshot(t)
}

// setUp binds ProjectA to Waldur Project pp1 with members, gives each
// member a verified site binding at EnvK8s (username = "user-" + its first
// 8 characters), and reports a ready allocation r1 in pp1.
func (e *env) setUp(t *testing.T, members ...string) {
	t.Helper()
	for i, m := range members {
		e.event(t, SiteBindingEvent(siteBindingID(m, EnvK8s), m, EnvK8s, "user-"+m[:8], domain.SiteBindingVerified, 1, time.Duration(i)*time.Second))
	}
	e.event(t, MembersEvent(ProjectA, 1, "pp1", members...))
	e.submit(t, Report("r1", "pp1", 0))
}

// siteBindingID returns a stable Beto binding ID for party's site binding
// at env.
func siteBindingID(party, env string) string {
	return domain.BindingKey{PartyID: party, ProjectID: "site", Environment: env}.ID()
}

func testBindingIdentity(t *testing.T, e *env) {
	e = e.members(t)
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
	e = e.members(t)
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
	e = e.members(t)
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

func testAccountReportOrder(t *testing.T, e *env) {
	e = e.members(t)
	e.setUp(t, PartyID, PartyB)
	a, b := bindingID(PartyID, ProjectA, EnvK8s), bindingID(PartyB, ProjectA, EnvK8s)
	e.accounts(t, "r1", 2*time.Minute, ready(PartyID, "uid-1", a, 1), ready(PartyB, "uid-2", b, 1))
	before := e.memberState(t, "r1")
	// Out of order: the older report arrives second.
	refusals := e.accountsRefused(t, Site, domain.ReasonStaleReport, "r1", time.Minute, ready(PartyID, "uid-1", a, 1))
	if refusals[0].Location != "body.observed_at" {
		t.Fatalf("refusal %+v", refusals)
	}
	// The same observed_at with other accounts is a conflict.
	e.accountsRefused(t, Site, domain.ReasonReportConflict, "r1", 2*time.Minute, ready(PartyID, "uid-1", a, 1))
	if after := e.memberState(t, "r1"); after != before {
		t.Fatalf("a refused account report moved state:\n%s\n%s", before, after)
	}
	// The same report again (accounts in another order): a duplicate.
	e.clock.Advance(time.Minute)
	if res := e.accounts(t, "r1", 2*time.Minute, ready(PartyB, "uid-2", b, 1), ready(PartyID, "uid-1", a, 1)); res.Outcome != domain.OutcomeDuplicate || res.Revision != 1 {
		t.Fatalf("retransmission %+v", res)
	}
	if after := e.memberState(t, "r1"); after != before {
		t.Fatalf("a duplicate moved state:\n%s\n%s", before, after)
	}
	// Newer and unchanged: a renewal, no binding change.
	feed := len(e.changes(t))
	if res := e.accounts(t, "r1", 3*time.Minute, ready(PartyID, "uid-1", a, 1), ready(PartyB, "uid-2", b, 1)); res.Outcome != domain.OutcomeRenewed || res.Revision != 1 {
		t.Fatalf("renewal %+v", res)
	}
	if n := len(e.changes(t)); n != feed {
		t.Fatalf("a renewal wrote %d changes", n-feed)
	}
	vs, err := e.svc.ProjectAccounts(e.ctx, ProjectA, Site, PartyID)
	if err != nil || len(vs) != 1 || !vs[0].LastSeenAt.Equal(e.clock.Now()) || !vs[0].ObservedAt.Equal(T0.Add(3*time.Minute)) || !vs[0].Fresh {
		t.Fatalf("account read after the renewal %+v %v", vs, err)
	}
	e.clock.Advance(16 * time.Minute)
	if vs, _ := e.svc.ProjectAccounts(e.ctx, ProjectA, Site, PartyID); vs[0].Fresh || vs[0].UID != "uid-1" {
		t.Fatalf("an account not reported within the freshness bound must read fresh=false: %+v", vs)
	}
	// Incomplete: the binding is no longer ready.
	res := e.accounts(t, "r1", 20*time.Minute, domain.ReportedAccount{PartyID: PartyID, Account: domain.AccountName(PartyID), UID: "uid-1", BindingID: a, Generation: 1, State: domain.AccountIncomplete})
	if res.Outcome != domain.OutcomeChanged || res.Accounts[0].Current || res.Accounts[0].BindingState != domain.BindingPending {
		t.Fatalf("incomplete %+v", res)
	}
	if bb := e.binding(t, PartyID, ProjectA, EnvK8s); !slices.Equal(bb.Reasons, []string{domain.ReasonAccountIncomplete}) {
		t.Fatalf("binding %+v", bb)
	}
	if bb := e.binding(t, PartyB, ProjectA, EnvK8s); bb.State != domain.BindingPending || !slices.Equal(bb.Reasons, []string{domain.ReasonAccountMissing}) {
		t.Fatalf("the account no longer listed (absent) is not ready: %+v", bb)
	}
}

func testAccountRefusals(t *testing.T, e *env) {
	e = e.members(t)
	partyD := "3f5a8b4d-3e0c-4b6f-9d9a-5c4b3f2e1d0a"
	e.setUp(t, PartyID, PartyB)
	e.event(t, SiteBindingEvent(siteBindingID(partyD, EnvBeta), partyD, EnvBeta, "dora", domain.SiteBindingVerified, 1, 0))
	e.event(t, MembersEvent(ProjectA, 2, "pp1", PartyID, PartyB, partyD))
	a := bindingID(PartyID, ProjectA, EnvK8s)
	before := e.memberState(t, "r1")
	e.accountsRefused(t, Site, domain.ReasonAllocationUnknown, "no-such-resource", time.Minute, ready(PartyID, "uid-1", a, 1))
	// Each bad account is named, the good one is not, and nothing is
	// stored.
	refusals := e.accountsRefused(t, Site, domain.ReasonBindingMismatch, "r1", time.Minute,
		ready(PartyID, "uid-1", a, 1),
		ready(PartyC, "uid-2", bindingID(PartyC, ProjectA, EnvK8s), 1),  // no such binding
		ready(PartyB, "uid-3", a, 1),                                    // another Party's binding
		ready(partyD, "uid-4", bindingID(partyD, ProjectA, EnvBeta), 1), // a binding at another Site's environment
	)
	var locations []string
	for _, r := range refusals {
		locations = append(locations, r.Location)
	}
	if !slices.Equal(locations, []string{"body.accounts[1].binding_id", "body.accounts[2].binding_id", "body.accounts[3].binding_id"}) {
		t.Fatalf("refusals %+v", refusals)
	}
	if after := e.memberState(t, "r1"); after != before {
		t.Fatalf("a refused account report stored something:\n%s\n%s", before, after)
	}
	// Site beta's agent cannot report Site alpha's allocation, nor name an
	// alpha binding on its own.
	e.accountsRefused(t, "beta", domain.ReasonAllocationUnknown, "r1", time.Minute, ready(PartyID, "uid-1", a, 1))
	// Invalid input is named field by field.
	_, err := e.svc.SubmitAccounts(e.ctx, Site, domain.AccountReport{ProviderResourceID: "r1", ObservedAt: e.clock.Now().Add(time.Hour), Accounts: []domain.ReportedAccount{
		{PartyID: PartyID, Account: "member-bob", UID: "u", BindingID: a, Generation: 1, State: domain.AccountReady},
	}})
	var ve *domain.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 {
		t.Fatalf("validation %v", err)
	}
	if after := e.memberState(t, "r1"); after != before {
		t.Fatalf("a refused account report stored something")
	}
	// A retired allocation accepts only an empty set.
	gone := Report("r1", "pp1", time.Minute)
	gone.State = domain.WaldurTerminated
	e.submit(t, gone)
	e.accountsRefused(t, Site, domain.ReasonAllocationRetired, "r1", 2*time.Minute, ready(PartyID, "uid-1", a, 1))
	if res := e.accounts(t, "r1", 2*time.Minute); res.Outcome != domain.OutcomeCreated {
		t.Fatalf("an empty set on a retired allocation %+v", res)
	}
}

func testLookup(t *testing.T, e *env) {
	e = e.members(t)
	// Before anything is known.
	if l := e.lookup(t, Site, EnvK8s, "alice", "pp1"); l.State != application.LookupUnknown || !slices.Equal(l.Reasons, []string{application.LookupUnknownUsername}) {
		t.Fatalf("%+v", l)
	}
	older := "a1b2c3d4-1111-4222-8333-444455556666"
	e.event(t, SiteBindingEvent(older, PartyB, EnvK8s, "alice", domain.SiteBindingVerified, 1, 0))
	if l := e.lookup(t, Site, EnvK8s, "alice", "pp1"); l.State != application.LookupUnknown || !slices.Equal(l.Reasons, []string{application.LookupProjectUnbound}) || l.PartyID != PartyB {
		t.Fatalf("%+v", l)
	}
	e.event(t, MembersEvent(ProjectA, 1, "pp1", PartyID))
	if l := e.lookup(t, Site, EnvK8s, "alice", "pp1"); l.State != application.LookupUnknown || !slices.Equal(l.Reasons, []string{application.LookupNotAMember}) {
		t.Fatalf("%+v", l)
	}
	e.event(t, MembersEvent(ProjectA, 2, "pp1", PartyID, PartyB))
	if l := e.lookup(t, Site, EnvK8s, "alice", "pp1"); l.State != application.LookupUnknown || !slices.Equal(l.Reasons, []string{application.LookupNoAllocation}) {
		t.Fatalf("%+v", l)
	}
	e.submit(t, Report("r1", "pp1", 0))
	l := e.lookup(t, Site, EnvK8s, "alice", "pp1")
	if l.State != application.LookupBound || l.PartyID != PartyB || l.BindingID != bindingID(PartyB, ProjectA, EnvK8s) || l.Generation != 1 {
		t.Fatalf("%+v", l)
	}
	// The username is given to another Party (PartyID) later: its binding
	// is verified, then retired. The lookup answers the newest: retired,
	// never the older live binding of PartyB.
	newer := "b2c3d4e5-2222-4333-8444-555566667777"
	e.event(t, SiteBindingEvent(newer, PartyID, EnvK8s, "alice", domain.SiteBindingVerified, 1, time.Hour))
	if l := e.lookup(t, Site, EnvK8s, "alice", "pp1"); l.State != application.LookupBound || l.PartyID != PartyID {
		t.Fatalf("the newest site binding of the username: %+v", l)
	}
	e.event(t, SiteBindingEvent(newer, PartyID, EnvK8s, "alice", "retired", 2, 2*time.Hour))
	l = e.lookup(t, Site, EnvK8s, "alice", "pp1")
	if l.State != application.LookupRetired || l.PartyID != PartyID || l.BindingID != bindingID(PartyID, ProjectA, EnvK8s) || l.Generation != 1 || !slices.Equal(l.Reasons, []string{domain.ReasonSiteBindingRetired}) {
		t.Fatalf("want retired (PartyID's binding), not PartyB's older live one: %+v", l)
	}
	if b := e.binding(t, PartyB, ProjectA, EnvK8s); b == nil || b.State == domain.BindingRetired {
		t.Fatalf("PartyB's binding is still live: %+v", b)
	}
	// Another Site's agent sees nothing of alpha's environments.
	if _, err := e.svc.LookupAccount(e.ctx, "beta", EnvK8s, "alice", "pp1"); !isValidation(err, "query.environment") {
		t.Fatalf("Site beta asking about %s: %v", EnvK8s, err)
	}
	if l := e.lookup(t, "beta", "", "alice", "pp1"); l.State != application.LookupUnknown || l.Environment != EnvBeta || !slices.Equal(l.Reasons, []string{application.LookupUnknownUsername}) {
		t.Fatalf("Site beta's own environment: %+v", l)
	}
	if _, err := e.svc.LookupAccount(e.ctx, Site, "", "alice", "pp1"); !isValidation(err, "query.environment") {
		t.Fatalf("Site alpha has two environments; none given: %v", err)
	}
	if _, err := e.svc.LookupAccount(e.ctx, Site, EnvK8s, "", ""); !isValidation(err, "query.username") || !isValidation(err, "query.provider_project") {
		t.Fatalf("missing parameters: %v", err)
	}
	// Nothing is guessed from a similar username.
	if l := e.lookup(t, Site, EnvK8s, "Alice", "pp1"); l.State != application.LookupUnknown {
		t.Fatalf("a similar username matched: %+v", l)
	}
	// An unverified newest site binding without a binding is unknown.
	e.event(t, SiteBindingEvent("c3d4e5f6-3333-4444-8555-666677778888", PartyC, EnvK8s, "carol", "pending", 1, 0))
	if l := e.lookup(t, Site, EnvK8s, "carol", "pp1"); l.State != application.LookupUnknown || !slices.Equal(l.Reasons, []string{application.LookupSiteBindingNotVerified}) {
		t.Fatalf("%+v", l)
	}
}

func isValidation(err error, location string) bool {
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return false
	}
	return slices.ContainsFunc(ve.Problems, func(p domain.Problem) bool { return p.Location == location })
}

func testDesiredBindings(t *testing.T, e *env) {
	e = e.members(t)
	parties := []string{PartyID, PartyB, PartyC, "3f5a8b4d-3e0c-4b6f-9d9a-5c4b3f2e1d0a", "4a6b9c5e-4f1d-4c7a-8eab-6d5c4a3f2e1b"}
	e.setUp(t, parties[:4]...)
	// The fifth member has no site binding: no binding, and the read says
	// why.
	e.event(t, MembersEvent(ProjectA, 2, "pp1", parties...))
	first, err := e.svc.DesiredBindings(e.ctx, EnvK8s, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !first.First || first.Site != Site || first.Environment != EnvK8s || first.ChangesHead == 0 || len(first.Entries) != 2 || first.After == "" {
		t.Fatalf("first page %+v", first)
	}
	// A binding change while paging is in the feed after changes_cursor.
	e.event(t, MembersEvent(ProjectA, 3, "pp1", parties[1:]...))
	entries := first.Entries
	for after := first.After; after != ""; {
		p, err := e.svc.DesiredBindings(e.ctx, EnvK8s, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if p.First || p.ChangesHead != 0 {
			t.Fatalf("only the first page carries the changes cursor: %+v", p)
		}
		entries = append(entries, p.Entries...)
		after = p.After
	}
	seen := map[string]int{}
	for i, en := range entries {
		seen[en.PartyID]++
		if i > 0 && en.ProjectID+en.PartyID <= entries[i-1].ProjectID+entries[i-1].PartyID {
			t.Fatal("entries are not in (Project, Party) order")
		}
		switch {
		case en.PartyID == parties[4]:
			if en.Binding != nil || !slices.Equal(en.Reasons, []string{domain.ReasonNoSiteBinding}) {
				t.Fatalf("the member without a site binding: %+v", en)
			}
		case en.Binding == nil || en.Binding.ID != bindingID(en.PartyID, ProjectA, EnvK8s):
			t.Fatalf("entry %+v", en)
		}
	}
	for _, p := range parties {
		if seen[p] != 1 {
			t.Fatalf("Party %s seen %d times across the pages", p, seen[p])
		}
	}
	feed, err := e.svc.Changes(e.ctx, first.ChangesHead, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(feed.Changes) != 1 || feed.Changes[0].Type != domain.MemberBindingChangedType || feed.Changes[0].Binding.PartyID != PartyID || feed.Changes[0].Binding.State != domain.BindingRetired {
		t.Fatalf("the feed after changes_cursor: %+v", feed.Changes)
	}
	// The retired binding stays in the read, to be delivered as retired.
	if b := e.binding(t, PartyID, ProjectA, EnvK8s); b == nil || b.State != domain.BindingRetired {
		t.Fatalf("retired binding %+v", b)
	}
	// An environment of another Site, without allocations: nothing.
	if es := e.desired(t, EnvBeta, 0); len(es) != 0 {
		t.Fatalf("%s: %+v", EnvBeta, es)
	}
	if _, err := e.svc.DesiredBindings(e.ctx, "gamma-k8s", "", 0); !errors.Is(err, application.ErrUnknownEnvironment) {
		t.Fatalf("an environment not configured: %v", err)
	}
	if _, err := e.svc.DesiredBindings(e.ctx, EnvK8s, "garbage", 0); !errors.Is(err, application.ErrUnknownCursor) {
		t.Fatalf("a forged cursor: %v", err)
	}
}

func testAllocationMovesAccounts(t *testing.T, e *env) {
	e = e.members(t)
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

func testBindingFeed(t *testing.T, e *env) {
	e = e.members(t)
	e.setUp(t, PartyID, PartyB)
	a, b := bindingID(PartyID, ProjectA, EnvK8s), bindingID(PartyB, ProjectA, EnvK8s)
	e.accounts(t, "r1", time.Minute, ready(PartyID, "uid-1", a, 1), ready(PartyB, "uid-2", b, 1))
	e.event(t, MembersEvent(ProjectA, 2, "pp1", PartyB))
	e.event(t, MembersEvent(ProjectA, 3, "pp1", PartyID, PartyB))
	revs := map[string][]int64{}
	for _, c := range e.bindingChanges(t) {
		revs[c.BindingID] = append(revs[c.BindingID], c.Revision)
		if c.Account != domain.AccountName(c.PartyID) || c.Environment != EnvK8s || c.ProjectID != ProjectA {
			t.Fatalf("change %+v", c)
		}
	}
	if !slices.Equal(revs[a], []int64{1, 2, 3, 4}) || !slices.Equal(revs[b], []int64{1, 2}) {
		t.Fatalf("binding revisions in feed order: %v", revs)
	}
	cur := e.binding(t, PartyID, ProjectA, EnvK8s)
	last := e.bindingChanges(t)
	if got := last[len(last)-1]; got.BindingID != a || got.Revision != cur.Revision || got.Generation != 2 || got.State != cur.State {
		t.Fatalf("the newest change %+v does not match the binding %+v", got, cur)
	}
	for i, c := range e.changes(t) {
		if c.Position != int64(i+1) {
			t.Fatalf("positions %d at %d", c.Position, i)
		}
	}
}

func testConcurrentFirstAccountReports(t *testing.T, e *env) {
	e = e.members(t)
	e.setUp(t, PartyID, PartyB)
	a, b := bindingID(PartyID, ProjectA, EnvK8s), bindingID(PartyB, ProjectA, EnvK8s)
	reports := []domain.AccountReport{
		{ProviderResourceID: "r1", ObservedAt: T0.Add(time.Minute), Accounts: []domain.ReportedAccount{ready(PartyID, "uid-1", a, 1), ready(PartyB, "uid-2", b, 1)}},
		{ProviderResourceID: "r1", ObservedAt: T0.Add(time.Minute), Accounts: []domain.ReportedAccount{ready(PartyB, "uid-2", b, 1), ready(PartyID, "uid-1", a, 1)}},
		{ProviderResourceID: "r1", ObservedAt: T0.Add(time.Minute), Accounts: []domain.ReportedAccount{ready(PartyID, "uid-1", a, 1)}},
		{ProviderResourceID: "r1", ObservedAt: T0.Add(2 * time.Minute), Accounts: []domain.ReportedAccount{ready(PartyID, "uid-1", a, 1), ready(PartyB, "uid-2", b, 1)}},
	}
	for round := range 5 {
		if round > 0 {
			e.clock.Advance(time.Hour)
		}
		outcomes := make([]string, len(reports))
		var wg sync.WaitGroup
		for i, r := range reports {
			r.ObservedAt = r.ObservedAt.Add(time.Duration(round) * time.Hour)
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.svc.SubmitAccounts(e.ctx, Site, r)
				var ce *domain.ConflictError
				switch {
				case err == nil:
					outcomes[i] = res.Outcome
				case errors.As(err, &ce):
					outcomes[i] = ce.Reason()
				default:
					outcomes[i] = "error: " + err.Error()
				}
			}()
		}
		wg.Wait()
		for _, o := range outcomes {
			if strings.HasPrefix(o, "error") {
				t.Fatalf("round %d: %v", round, outcomes)
			}
		}
		if round == 0 && slices.Index(outcomes, domain.OutcomeCreated) < 0 {
			t.Fatalf("no report created the first set: %v", outcomes)
		}
	}
	// The newest report of the last round lists both accounts, whatever
	// order the rounds' reports were applied in.
	if e.readyUID(t, PartyID, ProjectA) != "uid-1" || e.readyUID(t, PartyB, ProjectA) != "uid-2" {
		t.Fatalf("ready accounts %q %q", e.readyUID(t, PartyID, ProjectA), e.readyUID(t, PartyB, ProjectA))
	}
	rows, err := e.svc.NativeAccounts(e.ctx, domain.AllocationID(Site, "r1"))
	if err != nil || len(rows) != 2 || rows[0].State != domain.AccountReady || rows[1].State != domain.AccountReady {
		t.Fatalf("stored accounts %+v %v", rows, err)
	}
	checkFeedRevisions(t, e)
}

// checkFeedRevisions asserts the feed holds every binding's revisions
// 1..n in order, its newest that of the stored binding.
func checkFeedRevisions(t *testing.T, e *env) {
	t.Helper()
	revs := map[string]int64{}
	for _, c := range e.bindingChanges(t) {
		if c.Revision != revs[c.BindingID]+1 {
			t.Fatalf("binding %s: revision %d after %d in the feed", c.BindingID, c.Revision, revs[c.BindingID])
		}
		revs[c.BindingID] = c.Revision
	}
	for _, env := range []string{EnvK8s, EnvHPC, EnvBeta} {
		for _, en := range e.desired(t, env, 0) {
			if b := en.Binding; b != nil && revs[b.ID] != b.Revision {
				t.Fatalf("binding %s at revision %d, the feed's newest %d", b.ID, b.Revision, revs[b.ID])
			}
		}
	}
}

func testConcurrentEventsAndReports(t *testing.T, e *env) {
	e = e.members(t)
	const n = 12
	parties := make([]string, n)
	for i := range parties {
		parties[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i+1, i+1)
	}
	e.submit(t, Report("r1", "pp1", 0))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// The Project's membership (in three revisions) and every member's site
	// binding arrive at once: write skew would leave a member without its
	// binding.
	for rev := int64(1); rev <= 3; rev++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.svc.ReceiveBetoEvent(e.ctx, MembersEvent(ProjectA, rev, "pp1", parties[:int(rev)*n/3]...)); err != nil {
				fail(err)
			}
		}()
	}
	for i, p := range parties {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.svc.ReceiveBetoEvent(e.ctx, SiteBindingEvent(siteBindingID(p, EnvK8s), p, EnvK8s, fmt.Sprintf("user-%d", i), domain.SiteBindingVerified, 1, 0)); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("events: %v", errs)
	}
	members := e.desired(t, EnvK8s, 0)
	if len(members) != n {
		t.Fatalf("%d entries, want %d", len(members), n)
	}
	for _, en := range members {
		if en.Binding == nil || en.Binding.State == domain.BindingRetired || en.Binding.Generation != 1 {
			t.Fatalf("after concurrent events every member has a live generation 1 binding: %+v", en)
		}
	}
	// Account reports of two allocations naming the same bindings, with the
	// Project's membership changing meanwhile (r1, reported before the
	// Project was bound, resolves it now).
	e.submit(t, Report("r1", "pp1", time.Second), Report("r2", "pp1", 0))
	var accounts []domain.ReportedAccount
	for i, p := range parties {
		accounts = append(accounts, ready(p, fmt.Sprintf("uid-%d", i), bindingID(p, ProjectA, EnvK8s), 1))
	}
	for k := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			resource := []string{"r1", "r2"}[k%2]
			if _, err := e.svc.SubmitAccounts(e.ctx, Site, domain.AccountReport{ProviderResourceID: resource, ObservedAt: T0.Add(time.Duration(k+1) * time.Minute), Accounts: accounts}); err != nil {
				var ce *domain.ConflictError
				if !errors.As(err, &ce) || ce.Reason() != domain.ReasonStaleReport {
					fail(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := e.svc.ReceiveBetoEvent(e.ctx, MembersEvent(ProjectA, int64(4+k), "pp1", parties[:n-k]...)); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("reports and events: %v", errs)
	}
	// Each binding is what its inputs give now. The view holds the highest
	// revision, 7: the first n-3 parties are members, the last three left.
	// Both allocations report every member's account ready, so a member's
	// binding has two ready accounts (account_ambiguous).
	byParty := map[string]*domain.MemberBinding{}
	for _, en := range e.desired(t, EnvK8s, 0) {
		byParty[en.PartyID] = en.Binding
	}
	for i, p := range parties {
		b := byParty[p]
		switch {
		case b == nil:
			t.Fatalf("no binding for %s", p)
		case i >= n-3 && (b.State != domain.BindingRetired || !slices.Equal(b.Reasons, []string{domain.ReasonMemberRemoved})):
			t.Fatalf("%s left the Project but its binding is %s %v", p, b.State, b.Reasons)
		case i < n-3 && (b.State != domain.BindingPending || !slices.Equal(b.Reasons, []string{domain.ReasonAccountAmbiguous})):
			t.Fatalf("%s is a member with a ready account in each of two allocations, but its binding is %s %v", p, b.State, b.Reasons)
		case b.Generation != 1:
			t.Fatalf("%s: generation %d (nobody came back)", p, b.Generation)
		}
	}
	checkFeedRevisions(t, e)
}

func testMembersUnavailable(t *testing.T, e *env) {
	e = e.members(t)
	e.setUp(t, PartyID)
	e.sub.Break()
	ctx := context.WithoutCancel(e.ctx)
	if _, err := e.svc.LookupAccount(ctx, Site, EnvK8s, "alice", "pp1"); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := e.svc.DesiredBindings(ctx, EnvK8s, "", 0); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("desired bindings: %v", err)
	}
	if _, err := e.svc.ProjectAccounts(ctx, ProjectA, Site, ""); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("project accounts: %v", err)
	}
	if _, err := e.svc.SubmitAccounts(ctx, Site, domain.AccountReport{ProviderResourceID: "r1", ObservedAt: T0}); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("account report: %v", err)
	}
}
