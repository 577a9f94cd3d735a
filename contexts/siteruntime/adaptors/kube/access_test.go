package kube_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// refusedStart prepares an Attempt, lets change withdraw something, and
// checks that start is refused with reason and that no Job exists.
func refusedStart(t *testing.T, reason siteprotocol.Reason, change func(s *site)) {
	t.Helper()
	s := newSite(t, siteOptions{})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	change(s)
	r := s.start(attempt, 500, 60)
	want(t, r, siteprotocol.OutcomeRefused, reason)
	if len(r.NativeRefs) != 0 {
		t.Fatalf("a refused start names %v", r.NativeRefs)
	}
	if n := len(s.jobsOf(attempt)); n != 0 {
		t.Fatalf("%d Jobs exist after a refused start", n)
	}
	// The refusal is recorded nowhere native: observe says not started.
	want(t, s.simple(siteprotocol.OpObserve, attempt), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotStarted)
}

// A binding retired (retire-member) before start: start is refused
// binding-retired and no Job exists. Real: the API server (nothing is
// created). KWOK is not involved.
func TestStartAfterTheBindingWasRetiredIsRefusedAndNoJobExists(t *testing.T) {
	t.Parallel()
	refusedStart(t, siteprotocol.ReasonBindingRetired, func(s *site) { s.retire() })
}

// Permission withdrawn from the policy file before start: start is
// refused permission-denied and no Job exists. The policy file stands in
// for the permission provider (outside this project). KWOK is not involved.
func TestStartAfterThePermissionWasWithdrawnIsRefusedAndNoJobExists(t *testing.T) {
	t.Parallel()
	refusedStart(t, siteprotocol.ReasonPermissionDenied, func(s *site) { s.grant(domain.ActionRead, domain.ActionCancel) })
}

// A namespace whose project-id label names another Project: start is
// refused project-mismatch and nothing is created. KWOK is not involved.
func TestStartInANamespaceOfAnotherProjectIsRefusedAndNothingIsCreated(t *testing.T) {
	t.Parallel()
	refusedStart(t, siteprotocol.ReasonProjectMismatch, func(s *site) {
		s.labelNamespace(map[string]string{kube.NamespaceProjectLabel: uuid.NewString()})
	})
}

// prepare in a namespace of another Project is refused too: no workspace
// claim is created. KWOK is not involved.
func TestPrepareInANamespaceOfAnotherProjectCreatesNoClaim(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{})
	s.labelNamespace(map[string]string{kube.NamespaceProjectLabel: uuid.NewString()})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeRefused, siteprotocol.ReasonProjectMismatch)
	claims, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.ns).List(testContext(t), listByAttempt(attempt))
	if err != nil || len(claims.Items) != 0 {
		t.Fatalf("claims after a refused prepare: %d (%v)", len(claims.Items), err)
	}
	want(t, s.start(attempt, 500, 60), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
}

// The member's RBAC grants removed (the Runtime's impersonated create is
// refused by the API server): start is refused native-request-denied and
// no Job exists. Real: RBAC on the impersonated request.
// Real: the API server. KWOK is not involved (no Job is created).
func TestStartWhenTheMembersGrantsAreGoneIsRefusedNativeRequestDenied(t *testing.T) {
	t.Parallel()
	refusedStart(t, siteprotocol.ReasonNativeRequestDenied, func(s *site) { s.revokeMember() })
}

// A prepare naming a repository, to an executor built without the
// workspace checkout (siteOptions.grants unset; the runtime role always
// wires it), is refused unsupported-operation, never a silent success.
// Real: the API server. KWOK is not involved (no Job is created).
func TestPrepareWithARepositoryIsRefusedUntilCheckoutExists(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{})
	attempt := uuid.NewString()
	r := s.execute(s.command(siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 1 << 20,
		"repository": map[string]any{"url": "https://git.example/x.git", "commit": "0123456789abcdef0123456789abcdef01234567"}}))
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
}
