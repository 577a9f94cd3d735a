package storetest

// The member account cases (memberTests, accounts.go) of the account
// report: order and refusals.

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

func testAccountReportOrder(t *testing.T, e *env) {
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
