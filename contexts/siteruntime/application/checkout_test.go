package application_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

const (
	repoURL    = "https://git.example.org/lab/model.git"
	repoCommit = "0123456789abcdef0123456789abcdef01234567"
	theToken   = "token-never-in-a-journal-5d1c"
)

// grantHost stands in for the repository grant provider and its host
// (outside this project): the same idempotency key answers the same grant;
// a revoked grant's token is refused.
type grantHost struct {
	mu        sync.Mutex
	issues    int
	revokes   []string
	live      map[string]bool // grant ID → not revoked
	deny      bool
	revokeErr error
}

func (g *grantHost) Issue(_ context.Context, r domain.GrantRequest) (domain.RepositoryGrant, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.issues++
	if g.deny {
		return domain.RepositoryGrant{}, fmt.Errorf("%w: not a collaborator", application.ErrGrantDenied)
	}
	id := "grant-" + r.IdempotencyKey
	if _, ok := g.live[id]; !ok {
		g.live[id] = true
	}
	return domain.RepositoryGrant{GrantID: id, Username: "member-user", Token: theToken, ExpiresAt: now.Add(time.Hour)}, nil
}

func (g *grantHost) Revoke(_ context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.revokeErr != nil {
		return g.revokeErr
	}
	g.revokes = append(g.revokes, id)
	g.live[id] = false
	return nil
}

func (g *grantHost) unrevoked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, l := range g.live {
		if l {
			n++
		}
	}
	return n
}

// checkoutSpecs renders like jsonSpecs; the Secret's token goes into Data.
type checkoutSpecs struct{ jsonSpecs }

func (checkoutSpecs) RenderCredential(s application.CredentialSpec) (application.NativeObject, error) {
	b, _ := json.Marshal(map[string]any{"identity": s.Identity, "namespace": s.Namespace})
	return application.NativeObject{Kind: domain.KindSecret, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixCredential),
		Spec: b, Data: map[string][]byte{"username": []byte(s.Grant.Username), "token": []byte(s.Grant.Token)}}, nil
}

func (checkoutSpecs) RenderHelper(s application.HelperSpec) (application.NativeObject, error) {
	b, _ := json.Marshal(s)
	return application.NativeObject{Kind: domain.KindPod, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixHelper), Spec: b}, nil
}

// helperRun stands in for the kubelet running the helper: a helper Pod of
// the fake API server terminates with outcome.
type helperRun struct {
	native  *fakeNative
	outcome domain.CheckoutOutcome
	never   bool // the helper never terminates
}

func (h *helperRun) HelperState(_ context.Context, ref siteprotocol.NativeRef) (application.HelperState, bool, error) {
	h.native.mu.Lock()
	defer h.native.mu.Unlock()
	o, ok := h.native.objects[key(ref.Kind, ref.Namespace, ref.Name)]
	if !ok || o.uid != ref.UID {
		return application.HelperState{}, false, nil
	}
	if h.never {
		return application.HelperState{}, true, nil
	}
	code := int32(0)
	if h.outcome.Outcome != siteprotocol.OutcomeSucceeded {
		code = 1
	}
	return application.HelperState{Done: true, Message: string(h.outcome.Encode()), ExitCode: code}, true, nil
}

// crashAt panics at the n-th failpoint hit: the process dies there.
type crashAt struct {
	mu   sync.Mutex
	n    int
	hits int
}

type crash struct{}

func (c *crashAt) Hit(string) {
	c.mu.Lock()
	c.hits++
	hit := c.hits == c.n
	c.mu.Unlock()
	if hit {
		panic(crash{})
	}
}

type checkoutFixture struct {
	*batchFixture
	grants *grantHost
	helper *helperRun
	cfg    application.CheckoutConfig
}

func newCheckoutFixture(t *testing.T) *checkoutFixture {
	t.Helper()
	f := &checkoutFixture{batchFixture: newBatchFixture(t, time.Second), grants: &grantHost{live: map[string]bool{}},
		cfg: application.CheckoutConfig{Image: pinned{}.BatchImage(), Wait: 2 * time.Second, HelperDeletionWait: time.Second}}
	f.helper = &helperRun{native: f.native, outcome: domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Message: "checked out", Commit: repoCommit, Bytes: 4096, LFSObjects: 1, Fetch: "shallow"}}
	f.reg = f.registry(t, nil)
	return f
}

// registry is a Runtime process over the fixture's journal, cluster and
// provider, with failpoints fp.
func (f *checkoutFixture) registry(t *testing.T, fp application.Failpoints) *application.Registry {
	t.Helper()
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	exec := batch.NewExecutor(access, f.native, jsonSpecs{}, pinned{}, f.records, fp, application.ExecutorConfig{DeletionWait: time.Second}).
		WithCheckout(f.grants, checkoutSpecs{}, f.helper, f.cfg)
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

var repoPrepare = map[string]any{"workspace_size_bytes": 1 << 20, "repository": map[string]any{"url": repoURL, "commit": repoCommit}}

// settled checks what prepare must have left whatever it answered: no
// grant unrevoked, no Secret and no helper, at most one of each created,
// and no token in any record.
func (f *checkoutFixture) settled(t *testing.T) {
	t.Helper()
	if n := f.grants.unrevoked(); n != 0 {
		t.Errorf("%d grants are not revoked", n)
	}
	f.native.mu.Lock()
	defer f.native.mu.Unlock()
	for k := range f.native.objects {
		if strings.HasPrefix(k, domain.KindSecret+"/") || strings.HasPrefix(k, domain.KindPod+"/") {
			t.Errorf("%s still exists", k)
		}
	}
	f.records.mu.Lock()
	defer f.records.mu.Unlock()
	for k, r := range f.records.rows {
		if bytes.Contains(r.Spec, []byte(theToken)) {
			t.Errorf("record %s holds the token", k)
		}
	}
}

func (f *checkoutFixture) record(kind string) domain.NativeRecord {
	f.records.mu.Lock()
	defer f.records.mu.Unlock()
	for _, r := range f.records.rows {
		if r.Kind == kind {
			return r
		}
	}
	return domain.NativeRecord{}
}

func TestAPrepareWithARepositoryIsReadyOnlyOnceVerifiedRevokedAndTheHelperGone(t *testing.T) {
	f := newCheckoutFixture(t)
	r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, repoPrepare), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	if !strings.Contains(r.Message, repoCommit) || !strings.Contains(r.Message, "revoked") {
		t.Errorf("message: %s", r.Message)
	}
	f.settled(t)
	if f.grants.issues != 1 || len(f.grants.revokes) != 1 {
		t.Errorf("issues %d, revokes %v", f.grants.issues, f.grants.revokes)
	}
	for kind, phase := range map[string]string{domain.KindGrant: domain.PhaseRevoked, domain.KindSecret: domain.PhaseRemoved, domain.KindPod: domain.PhaseRemoved, domain.KindCheckout: domain.PhaseRead} {
		if got := f.record(kind).Phase; got != phase {
			t.Errorf("%s record: phase %q, want %q", kind, got, phase)
		}
	}
	// Three creates as the member: the claim, the Secret, the helper.
	if len(f.native.creates) != 3 {
		t.Errorf("%d creates", len(f.native.creates))
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
}

func TestTheSecretGetsTheTokenAtCreateOnly(t *testing.T) {
	f := newCheckoutFixture(t)
	var seen []byte
	f.helper.never = true
	f.cfg.Wait = 10 * time.Millisecond
	f.reg = f.registry(t, nil)
	f.native.onCreate = func(obj application.NativeObject) {
		if obj.Kind == domain.KindSecret {
			seen = obj.Data["token"]
		}
	}
	r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, repoPrepare), false)
	// A helper that never ends reaches the checkout's bound.
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if string(seen) != theToken {
		t.Errorf("the Secret was created with token %q", seen)
	}
	f.settled(t)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
}

func TestAFailedCheckoutIsItsReasonAfterRevocationAndRemoval(t *testing.T) {
	f := newCheckoutFixture(t)
	f.helper.outcome = domain.CheckoutFailed(siteprotocol.ReasonCommitMissing, "the repository has no commit %s", repoCommit)
	p := f.cmd(t, siteprotocol.OpPrepare, repoPrepare)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonCommitMissing)
	f.settled(t)
	if again := f.run(t, p, true); again.Message != r.Message {
		t.Errorf("a recovery answered %q, then %q", r.Message, again.Message)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
	// A prepare retried on the Attempt says the checkout failed and that a
	// new Attempt is needed; it changes nothing.
	creates := len(f.native.creates)
	again := f.run(t, f.cmd(t, siteprotocol.OpPrepare, repoPrepare), false)
	expect(t, again, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if !strings.Contains(again.Message, "checkout failed") || !strings.Contains(again.Message, string(siteprotocol.ReasonCommitMissing)) ||
		!strings.Contains(again.Message, "new Attempt") || len(f.native.creates) != creates {
		t.Fatalf("a retried prepare answered %q and created %d objects", again.Message, len(f.native.creates)-creates)
	}
}

func TestARevocationTheProviderDoesNotConfirmFailsThePrepare(t *testing.T) {
	f := newCheckoutFixture(t)
	f.grants.revokeErr = fmt.Errorf("%w: no answer within 2m0s", application.ErrGrantUnavailable)
	p := f.cmd(t, siteprotocol.OpPrepare, repoPrepare)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonRevocationUnconfirmed)
	if f.record(domain.KindGrant).Phase != domain.PhaseUnconfirmed {
		t.Errorf("grant record: %+v", f.record(domain.KindGrant))
	}
	for _, kind := range []string{domain.KindSecret, domain.KindPod} {
		if f.record(kind).Phase != domain.PhaseRemoved {
			t.Errorf("%s not removed", kind)
		}
	}
	// The same answer on recovery, even once the provider answers again.
	f.grants.revokeErr = nil
	if again := f.run(t, p, true); again.Reason != r.Reason || again.Message != r.Message {
		t.Errorf("recovery answered %s: %s", again.Reason, again.Message)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
	// The cleanup revokes it again, now that the provider answers.
	if f.grants.unrevoked() != 1 {
		t.Fatalf("%d unrevoked grants before the cleanup", f.grants.unrevoked())
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpCleanup, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if f.grants.unrevoked() != 0 || f.record(domain.KindGrant).Phase != domain.PhaseRevoked {
		t.Fatalf("after the cleanup: %d unrevoked, grant record %s", f.grants.unrevoked(), f.record(domain.KindGrant).Phase)
	}
	f.settled(t)
}

func TestADeniedGrantCreatesNoSecretAndNoHelper(t *testing.T) {
	f := newCheckoutFixture(t)
	f.grants.deny = true
	p := f.cmd(t, siteprotocol.OpPrepare, repoPrepare)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonPermissionDenied)
	if len(f.native.creates) != 1 {
		t.Errorf("%d creates (the claim only)", len(f.native.creates))
	}
	if again := f.run(t, p, true); again.Message != r.Message || f.grants.issues != 1 {
		t.Errorf("recovery answered %q and asked the provider %d times", again.Message, f.grants.issues)
	}
}

// TestACrashAtEveryStepRecoversToTheUninterruptedResult kills the prepare
// at every failpoint it reaches (after each native call and each record),
// then recovers it in a new process: the result is the uninterrupted
// run's, byte for byte, and nothing is left or doubled.
func TestACrashAtEveryStepRecoversToTheUninterruptedResult(t *testing.T) {
	ref := newCheckoutFixture(t)
	counter := &crashAt{}
	ref.reg = ref.registry(t, counter)
	want := ref.run(t, ref.cmd(t, siteprotocol.OpPrepare, repoPrepare), false)
	expect(t, want, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	steps := counter.hits
	if steps < 12 {
		t.Fatalf("the prepare passed only %d failpoints", steps)
	}
	for n := 1; n <= steps; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newCheckoutFixture(t)
			p := f.cmd(t, siteprotocol.OpPrepare, repoPrepare)
			f.reg = f.registry(t, &crashAt{n: n})
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(crash); !ok {
							panic(r)
						}
					}
				}()
				f.run(t, p, false)
				t.Fatalf("no crash at failpoint %d", n)
			}()
			f.reg = f.registry(t, nil)
			got := f.run(t, p, true)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if !bytes.Equal(gb, wb) {
				t.Errorf("after a crash at failpoint %d:\n got %s\nwant %s", n, gb, wb)
			}
			f.settled(t)
			secrets, pods := 0, 0
			for _, c := range f.native.createdKinds {
				switch c {
				case domain.KindSecret:
					secrets++
				case domain.KindPod:
					pods++
				}
			}
			if secrets != 1 || pods != 1 {
				t.Errorf("%d Secrets and %d helpers created", secrets, pods)
			}
		})
	}
}

// appCheckout is an application fixture whose executor checks out
// repositories (the grant provider and the helper stand-ins above).
func appCheckout(t *testing.T) (*appFixture, *grantHost, *helperRun) {
	t.Helper()
	f := newAppFixture(t, time.Minute)
	grants := &grantHost{live: map[string]bool{}}
	helper := &helperRun{native: f.native, outcome: domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Message: "checked out", Commit: repoCommit, Bytes: 10}}
	access := application.NewAccess(f.bindings, f.app, f.perms, fixedClock{now})
	exec := appservice.NewExecutor(access, f.app, jsonAppSpecs{}, f.records, nil,
		application.ExecutorConfig{DeletionWait: time.Second}, time.Minute).
		WithCheckout(grants, checkoutSpecs{}, helper, application.CheckoutConfig{Image: pinned{}.BatchImage(), Wait: time.Second, HelperDeletionWait: time.Second, MaxBytes: 1 << 10})
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	return f, grants, helper
}

func TestAnApplicationsServingPodVerifiesThePreparedCheckout(t *testing.T) {
	f, grants, _ := appCheckout(t)
	body := preparePayload(8080)
	body["repository"] = map[string]any{"url": repoURL, "commit": repoCommit}
	p := f.cmd(t, siteprotocol.OpPrepare, body)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	if grants.unrevoked() != 0 || len(grants.revokes) != 1 {
		t.Fatalf("grants: %d unrevoked, revoked %v", grants.unrevoked(), grants.revokes)
	}
	var spec application.ApplicationServiceSpec
	dep := f.record(domain.KindDeployment)
	if err := json.Unmarshal(dep.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if v := spec.Verify; v == nil || v.Repository.Commit != repoCommit || v.Image != (pinned{}).BatchImage() || v.SizeLimitBytes != 1<<10 {
		t.Fatalf("the saved specification verifies %+v", spec.Verify)
	}
	for _, r := range f.records.rows {
		if r.ServiceKind != string(siteprotocol.ServiceApplication) {
			t.Errorf("record %s %s in services.sqlite without the service kind", r.Kind, r.Name)
		}
	}
	if again := f.run(t, p, true); again.Message != r.Message {
		t.Errorf("recovery answered %q, then %q", r.Message, again.Message)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, map[string]any{}), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
}

func TestAnApplicationWhoseCheckoutFailedSavesNoSpecification(t *testing.T) {
	f, _, helper := appCheckout(t)
	helper.outcome = domain.CheckoutFailed(siteprotocol.ReasonSymlinkEscape, "the link data leaves the checkout")
	body := preparePayload(8080)
	body["repository"] = map[string]any{"url": repoURL, "commit": repoCommit}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, body), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonSymlinkEscape)
	if dep := f.record(domain.KindDeployment); dep.Name != "" {
		t.Fatalf("a Deployment specification was saved: %+v", dep)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, map[string]any{}), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
	again := f.run(t, f.cmd(t, siteprotocol.OpPrepare, body), false)
	expect(t, again, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if !strings.Contains(again.Message, "checkout failed") || !strings.Contains(again.Message, "new Attempt") {
		t.Fatalf("a retried prepare answered %q", again.Message)
	}
}

// isvcCheckout is an inference fixture whose executor checks out
// repositories (the grant provider and the helper stand-ins above).
func isvcCheckout(t *testing.T) (*isvcFixture, *grantHost, *helperRun) {
	t.Helper()
	f := newIsvcFixture(t)
	grants := &grantHost{live: map[string]bool{}}
	helper := &helperRun{native: f.native, outcome: domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Message: "checked out", Commit: repoCommit, Bytes: 10}}
	f.reg = isvcCheckoutRegistry(t, f, grants, helper, nil)
	return f, grants, helper
}

// isvcCheckoutRegistry is a Runtime process over f's records and cluster
// whose inference executor checks out repositories, with failpoints fp.
func isvcCheckoutRegistry(t *testing.T, f *isvcFixture, grants *grantHost, helper *helperRun, fp application.Failpoints) *application.Registry {
	t.Helper()
	access := application.NewAccess(f.bindings, f.isvc, f.perms, fixedClock{now})
	exec, err := inference.NewExecutor(access, f.isvc, jsonIsvcSpecs{}, f.records, fp,
		application.ExecutorConfig{DeletionWait: time.Second}, inference.Config{ServingRuntimes: map[string]string{"huggingface": servingRuntime}})
	if err != nil {
		t.Fatal(err)
	}
	exec.WithCheckout(grants, checkoutSpecs{}, helper, application.CheckoutConfig{Image: pinned{}.BatchImage(), Wait: time.Second, HelperDeletionWait: time.Second, MaxBytes: 1 << 10})
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// An inference prepare with a repository checks it out as the application
// family does (the helper, its grant revoked, the Secret and the helper
// gone, through the one access check) and saves a predictor that verifies
// it (docs/site-runtime.md#services-and-the-prepared-workspace); recovery
// answers the same, and start creates the InferenceService. Fakes: the API
// server, the permission and grant providers, the helper's run.
func TestAnInferencePredictorVerifiesThePreparedCheckout(t *testing.T) {
	f, grants, _ := isvcCheckout(t)
	body := inferencePayload("")
	body["repository"] = map[string]any{"url": repoURL, "commit": repoCommit}
	p := f.cmd(t, siteprotocol.OpPrepare, body)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	if grants.unrevoked() != 0 || len(grants.revokes) != 1 {
		t.Fatalf("grants: %d unrevoked, revoked %v", grants.unrevoked(), grants.revokes)
	}
	if v := f.savedSpec(t).Verify; v == nil || v.Repository.Commit != repoCommit || v.Repository.URL != repoURL || v.Image != (pinned{}).BatchImage() || v.SizeLimitBytes != 1<<10 {
		t.Fatalf("the saved specification verifies %+v", v)
	}
	for _, kind := range []string{domain.KindPod, domain.KindSecret} {
		if rec := f.record(kind); rec.Phase != domain.PhaseRemoved {
			t.Fatalf("the helper's %s is %q, not removed, at prepare's success", kind, rec.Phase)
		}
	}
	for _, r := range f.records.rows {
		if r.ServiceKind != string(siteprotocol.ServiceInference) {
			t.Errorf("record %s %s in services.sqlite without the service kind", r.Kind, r.Name)
		}
	}
	if again := f.run(t, p, true); again.Message != r.Message {
		t.Errorf("recovery answered %q, then %q", r.Message, again.Message)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, map[string]any{}), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
}

// A failed checkout ends the inference prepare with its own reason and
// saves no InferenceService specification: start is refused not-prepared.
// Fakes: as above.
func TestAnInferenceWhoseCheckoutFailedSavesNoSpecification(t *testing.T) {
	f, grants, helper := isvcCheckout(t)
	helper.outcome = domain.CheckoutFailed(siteprotocol.ReasonSymlinkEscape, "the link data leaves the checkout")
	body := inferencePayload("")
	body["repository"] = map[string]any{"url": repoURL, "commit": repoCommit}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, body), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonSymlinkEscape)
	if rec := f.record(domain.KindInferenceService); rec.Name != "" {
		t.Fatalf("an InferenceService specification was saved: %+v", rec)
	}
	if grants.unrevoked() != 0 {
		t.Fatalf("%d grants left unrevoked", grants.unrevoked())
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, map[string]any{}), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
}

// An inference prepare with a repository killed at every failpoint it
// reaches (after each native call and each record: claim, grant, Secret,
// helper, outcome, revocation, removal, the saved specification) and
// recovered in a new process answers the uninterrupted run's result byte
// for byte, with no grant unrevoked, no Secret or helper left, one of each
// created and the specification saved once. Fakes: as above.
func TestAnInferencePrepareWithARepositoryCrashedAtEveryStepRecoversToTheUninterruptedResult(t *testing.T) {
	body := inferencePayload("")
	body["repository"] = map[string]any{"url": repoURL, "commit": repoCommit}
	ref, refGrants, refHelper := isvcCheckout(t)
	counter := &crashAt{}
	ref.reg = isvcCheckoutRegistry(t, ref, refGrants, refHelper, counter)
	want := ref.run(t, ref.cmd(t, siteprotocol.OpPrepare, body), false)
	expect(t, want, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	steps := counter.hits
	if steps < 12 {
		t.Fatalf("the prepare passed only %d failpoints", steps)
	}
	for n := 1; n <= steps; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f, grants, helper := isvcCheckout(t)
			p := f.cmd(t, siteprotocol.OpPrepare, body)
			f.reg = isvcCheckoutRegistry(t, f, grants, helper, &crashAt{n: n})
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(crash); !ok {
							panic(r)
						}
					}
				}()
				f.run(t, p, false)
				t.Fatalf("no crash at failpoint %d", n)
			}()
			f.reg = isvcCheckoutRegistry(t, f, grants, helper, nil)
			got := f.run(t, p, true)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if !bytes.Equal(gb, wb) {
				t.Errorf("after a crash at failpoint %d:\n got %s\nwant %s", n, gb, wb)
			}
			if n := grants.unrevoked(); n != 0 {
				t.Errorf("%d grants are not revoked", n)
			}
			secrets, pods := 0, 0
			for _, c := range f.native.createdKinds {
				switch c {
				case domain.KindSecret:
					secrets++
				case domain.KindPod:
					pods++
				}
			}
			if secrets != 1 || pods != 1 {
				t.Errorf("%d Secrets and %d helpers created", secrets, pods)
			}
			for k := range f.native.objects {
				if strings.HasPrefix(k, domain.KindSecret+"/") || strings.HasPrefix(k, domain.KindPod+"/") {
					t.Errorf("%s still exists", k)
				}
			}
			if rec := f.record(domain.KindInferenceService); rec.Phase != domain.PhasePrepared || f.savedSpec(t).Verify == nil {
				t.Errorf("the saved InferenceService record is %s, verifying %+v", rec.Phase, f.savedSpec(t).Verify)
			}
		})
	}
}
