package storetest

// The conformance suite's native member accounts and Runtime member
// bindings (docs/resource-provisioning.md#native-member-accounts): identity,
// generations, the account report, the lookup, the reads, the change feed,
// concurrency and unavailability, on every store adaptor. This file holds
// their table (memberTests) and fixtures; the cases are in account_*.go.

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
// them with the others, each in e.members (withMembers).
var memberTests = []testCase{
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
	{"AtASlurmEnvironmentTheAccountIsTheSiteUsernameWithItsUnixUID", testSlurmAccountIsTheSiteUsername},
	{"AtASlurmEnvironmentOnePartyHoldsAnAccount", testSlurmOnePartyPerAccount},
}

// withMembers returns cases that each run in e.members: the member
// account cases need a service that knows the suite's environments.
func withMembers(cases []testCase) []testCase {
	out := make([]testCase, 0, len(cases))
	for _, tc := range cases {
		out = append(out, testCase{tc.name, func(t *testing.T, e *env) { tc.fn(t, e.members(t)) }})
	}
	return out
}

// members returns e with a service that knows the suite's environments.
func (e *env) members(t *testing.T) *env {
	t.Helper()
	svc, reg := newService(t, e.sub, e.clock, Environments)
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
