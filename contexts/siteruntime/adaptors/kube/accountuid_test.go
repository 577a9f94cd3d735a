package kube_test

import (
	"testing"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// bindUID applies revision of the site's binding (generation 1) carrying
// the account UID uid.
func (s *site) bindUID(revision int64, uid string) {
	s.t.Helper()
	r := s.execute(s.command(siteprotocol.OpBindMember, "", map[string]any{"party_id": s.member, "namespace": s.ns,
		"account": s.account(), "binding_id": s.binding, "revision": revision, "generation": 1, "account_uid": uid}))
	want(s.t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied)
}

func (s *site) accountUID() string {
	s.t.Helper()
	sa, err := s.e.Client.CoreV1().ServiceAccounts(s.ns).Get(testContext(s.t), s.account(), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return string(sa.UID)
}

// The member's account deleted and made again under the same name (a new
// UID) after its binding was applied with the old UID: start is refused
// binding-conflict and no Job exists, until a binding revision carrying
// the new UID is applied; then the start creates the Job
// (docs/site-protocol.md#the-accounts-uid-in-a-binding). Real: the API
// server (service accounts, RBAC of the Runtime's get, nothing created).
// KWOK is not involved.
func TestAnAccountRecreatedUnderTheSameNameIsRefusedUntilItsNewUIDIsBound(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{})
	ctx := testContext(t)
	old := s.accountUID()
	s.bindUID(2, old)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)

	if err := s.e.Client.CoreV1().ServiceAccounts(s.ns).Delete(ctx, s.account(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := siteagent.Member(ctx, s.e.Client, s.ns, s.member); err != nil {
		t.Fatal(err)
	}
	recreated := s.accountUID()
	if recreated == old {
		t.Fatalf("the recreated account has the old UID %s", old)
	}
	for range 2 { // refused again, not only once
		r := s.start(attempt, 500, 60)
		want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingConflict)
		if len(r.NativeRefs) != 0 || len(s.jobsOf(attempt)) != 0 {
			t.Fatalf("a start refused binding-conflict names %v; %d Jobs exist", r.NativeRefs, len(s.jobsOf(attempt)))
		}
	}
	s.bindUID(3, recreated)
	r := s.start(attempt, 500, 60)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if n := len(s.jobsOf(attempt)); n != 1 {
		t.Fatalf("%d Jobs after the start with the new UID bound", n)
	}
}
