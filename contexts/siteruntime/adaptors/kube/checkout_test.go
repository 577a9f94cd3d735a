package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

const (
	checkoutCommit = "0123456789abcdef0123456789abcdef01234567"
	checkoutToken  = "kwok-lane-token-3f9a"
	// annotationTerminationMessage makes KWOK write its value as every
	// container's termination message (deploy/localcluster/kwok/stages.yaml).
	annotationTerminationMessage = "localcluster.metallo.dev/termination-message"
)

// providerDouble stands in for the repository grant provider, a provider
// outside this project: the same idempotency key answers the same grant;
// it counts issues and revocations. (The Git host lane mints real tokens;
// here KWOK runs no container, so no token is ever used.)
type providerDouble struct {
	mu      sync.Mutex
	issued  map[string]bool // grant ID → unrevoked
	revoked []string
}

func (p *providerDouble) Issue(_ context.Context, r domain.GrantRequest) (domain.RepositoryGrant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := "grant-" + r.AttemptID
	if _, ok := p.issued[id]; !ok {
		p.issued[id] = true
	}
	return domain.RepositoryGrant{GrantID: id, Username: "member-user", Token: checkoutToken, ExpiresAt: time.Now().Add(time.Hour)}, nil
}

func (p *providerDouble) Revoke(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.issued[id] = false
	p.revoked = append(p.revoked, id)
	return nil
}

// A batch prepare with a repository on the local cluster: the credential
// Secret and the helper Pod are created as the member through the
// admission policies of deploy/cluster (metallo-workspace-helpers with the
// namespace's platform image), the helper's termination message is read,
// the grant is revoked, and the Secret and the helper are deleted by UID
// before prepare answers prepared; then the Job starts. No record holds
// the token. Real: API server, RBAC, impersonation, admission, audit log.
// Simulated by KWOK: the helper "runs" a second and terminates with the
// outcome line its annotation carries; the provider is a double.
func TestAPrepareWithARepositoryRunsTheHelperAndLeavesNothingBeforeItAnswers(t *testing.T) {
	t.Parallel()
	outcome := domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Message: "checked out", Commit: checkoutCommit, Bytes: 4096, Fetch: "shallow"}
	grants := &providerDouble{issued: map[string]bool{}}
	s := newSite(t, siteOptions{grants: grants, podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "1", annotationTerminationMessage: string(bytes.TrimSpace(outcome.Encode()))}})
	attempt := uuid.NewString()
	prep := s.execute(s.command(siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 1 << 30,
		"repository": map[string]any{"url": "https://git.example.org/lab/model.git", "commit": checkoutCommit}}))
	want(t, prep, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	if !strings.Contains(prep.Message, checkoutCommit) {
		t.Errorf("message: %s", prep.Message)
	}
	ctx := testContext(t)
	helper, secret := domain.AttemptObjectName(attempt, domain.SuffixHelper), domain.AttemptObjectName(attempt, domain.SuffixCredential)
	if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, helper, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the helper Pod %s after prepare: %v", helper, err)
	}
	if _, err := s.e.Client.CoreV1().Secrets(s.ns).Get(ctx, secret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the credential Secret %s after prepare: %v", secret, err)
	}
	if grants.issued["grant-"+attempt] || len(grants.revoked) != 1 {
		t.Errorf("grant unrevoked: %v, revocations %v", grants.issued, grants.revoked)
	}
	for _, o := range []struct{ resource, name string }{{"pods", helper}, {"secrets", secret}} {
		if ev := s.e.WhoCreated(o.resource, s.ns, o.name); ev.Actor() != s.memberUser() || ev.User.Username != siteagent.RuntimeUser() {
			t.Errorf("audit: %s %s created by %q impersonating %+v; want the Runtime impersonating %s", o.resource, o.name, ev.User.Username, ev.ImpersonatedUser, s.memberUser())
		}
	}
	records, err := s.journal.Batch().Records(ctx, attempt)
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]string{}
	for _, r := range records {
		phases[r.Kind] = r.Phase
		if bytes.Contains(r.Spec, []byte(checkoutToken)) {
			t.Errorf("record %s %s holds the token", r.Kind, r.Name)
		}
	}
	if got := fmt.Sprint(phases); got != fmt.Sprint(map[string]string{domain.KindCheckout: domain.PhaseRead, domain.KindWorkspace: domain.PhaseCreated,
		domain.KindPod: domain.PhaseRemoved, domain.KindGrant: domain.PhaseRevoked, domain.KindSecret: domain.PhaseRemoved}) {
		t.Errorf("records %s", got)
	}
	want(t, s.start(attempt, 500, 60), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
}

// A helper whose outcome is a failure ends prepare with its reason, after
// the revocation and the removal; a start is then not-prepared.
func TestAFailedHelperOutcomeIsThePreparesReasonAndLeavesNothing(t *testing.T) {
	t.Parallel()
	outcome := domain.CheckoutFailed(siteprotocol.ReasonCommitMissing, "the repository has no commit %s", checkoutCommit)
	grants := &providerDouble{issued: map[string]bool{}}
	s := newSite(t, siteOptions{grants: grants, podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "1", "localcluster.metallo.dev/fail": "true",
		annotationTerminationMessage: string(bytes.TrimSpace(outcome.Encode()))}})
	attempt := uuid.NewString()
	prep := s.execute(s.command(siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 1 << 30,
		"repository": map[string]any{"url": "https://git.example.org/lab/model.git", "commit": checkoutCommit}}))
	want(t, prep, siteprotocol.OutcomeFailed, siteprotocol.ReasonCommitMissing)
	ctx := testContext(t)
	if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixHelper), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the helper Pod after prepare: %v", err)
	}
	if len(grants.revoked) != 1 {
		t.Errorf("revocations %v", grants.revoked)
	}
	want(t, s.start(attempt, 500, 60), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
}

// crashAtCall panics at the n-th after-native-call hit: the process dies
// right after that native call returned, before recording it.
type crashAtCall struct{ n int }

type crashed struct{}

func (c *crashAtCall) Hit(name string) {
	if name != application.FailAfterNativeCall {
		return
	}
	if c.n--; c.n == 0 {
		panic(crashed{})
	}
}

// Recovery adopts a workspace helper of the earlier 30 s grace period: a
// prepare dies right after its helper create (the record says creating);
// an administrator replaces that helper with the one the earlier rendering
// made (terminationGracePeriodSeconds 30, its digest; everything else the
// same), and the recovered prepare adopts it, reads its outcome and
// removes it, answering prepared. A helper with any other change is
// unexplained and nothing is deleted. Simulated by KWOK: the helper's run.
func TestRecoveryAdoptsAnOldGraceHelperCreatedByAnAdministratorAndNothingElse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		change  func(spec map[string]any)
		adopted bool
	}{
		{"the earlier grace", func(map[string]any) {}, true},
		{"the earlier grace and another command", func(spec map[string]any) {
			c := spec["containers"].([]any)[0].(map[string]any)
			c["command"] = []any{"/bin/sh", "-c", "true"}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			outcome := domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Message: "checked out", Commit: checkoutCommit, Bytes: 1}
			grants := &providerDouble{issued: map[string]bool{}}
			// The fourth native call is the helper's create (claim, grant, Secret, helper).
			s := newSite(t, siteOptions{noPolicy: true, grants: grants, fp: &crashAtCall{n: 4},
				podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "1", annotationTerminationMessage: string(bytes.TrimSpace(outcome.Encode()))}})
			attempt := uuid.NewString()
			p := s.command(siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 1 << 30,
				"repository": map[string]any{"url": "https://git.example.org/lab/model.git", "commit": checkoutCommit}})
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(crashed); !ok {
							panic(r)
						}
					}
				}()
				_, _ = s.registry.Execute(testContext(t), p)
				t.Fatal("the prepare did not crash after the helper's create")
			}()
			ctx := testContext(t)
			records, err := s.journal.Batch().Records(ctx, attempt)
			if err != nil {
				t.Fatal(err)
			}
			rec := domain.FindRecord(records, domain.KindPod)
			if rec == nil || rec.Phase != domain.PhaseCreating {
				t.Fatalf("helper record %+v", rec)
			}
			name := domain.AttemptObjectName(attempt, domain.SuffixHelper)
			fg := metav1.DeletePropagationForeground
			zero := int64(0)
			if err := s.e.Client.CoreV1().Pods(s.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &fg}); err != nil {
				t.Fatal(err)
			}
			waitPodGone(t, s, name)
			legacy, ok := kube.LegacyHelperSpec(rec.Spec)
			if !ok {
				t.Fatal("no legacy form")
			}
			var pod map[string]any
			if err := json.Unmarshal(legacy, &pod); err != nil {
				t.Fatal(err)
			}
			tc.change(pod["spec"].(map[string]any))
			meta := pod["metadata"].(map[string]any)
			ann, _ := meta["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
			}
			ann[kube.AnnotationSpecDigest] = siteprotocol.Digest(legacy)
			meta["annotations"] = ann
			var typed corev1.Pod
			b, _ := json.Marshal(pod)
			if err := json.Unmarshal(b, &typed); err != nil {
				t.Fatal(err)
			}
			if _, err := s.e.Client.CoreV1().Pods(s.ns).Create(ctx, &typed, metav1.CreateOptions{}); err != nil {
				t.Fatalf("the administrator's helper: %v", err)
			}
			a, err := s.registry.Recover(ctx, p)
			if !tc.adopted {
				if !errors.Is(err, application.ErrUnexplained) {
					t.Fatalf("want unexplained, got %+v %v", a, err)
				}
				if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
					t.Fatalf("the unexplained helper was touched: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want(t, s.result(p, a), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
			if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the adopted helper after prepare: %v", err)
			}
			if len(grants.revoked) != 1 {
				t.Fatalf("revocations %v", grants.revoked)
			}
		})
	}
}

func waitPodGone(t *testing.T, s *site, name string) {
	t.Helper()
	var last error
	if err := kubetest.Poll(testContext(t), 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		_, last = s.e.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(last), nil
	}); err != nil {
		t.Fatalf("Pod %s not gone: %v (last get: %v)", name, err, last)
	}
}
