package storetest

// The member account cases (memberTests, accounts.go) of concurrent
// account reports and events, and a database that is gone.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

func testConcurrentFirstAccountReports(t *testing.T, e *env) {
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
