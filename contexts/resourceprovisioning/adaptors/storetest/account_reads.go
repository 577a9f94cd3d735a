package storetest

// The member account cases (memberTests, accounts.go) of the reads of
// member accounts: the lookup, the desired bindings and the change feed.

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

func testLookup(t *testing.T, e *env) {
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

func testBindingFeed(t *testing.T, e *env) {
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
