package policytest

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// created returns the object that a create request made.
func created[T any](t *testing.T, what string, create func(context.Context) (T, error)) T {
	t.Helper()
	o, err := create(ctx(t))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return o
}

// prepared creates the Attempt's workspace claim and credential as the Runtime does (impersonating
// the member) and returns them.
func prepared(t *testing.T, s *site, a attempt) (*corev1.PersistentVolumeClaim, *corev1.Secret) {
	t.Helper()
	cs := s.viaRuntime(t, a.member)
	claim := created(t, "the Attempt's workspace claim", func(c context.Context) (*corev1.PersistentVolumeClaim, error) {
		return cs.CoreV1().PersistentVolumeClaims(s.namespace).Create(c, a.claim(), metav1.CreateOptions{})
	})
	secret := created(t, "the Attempt's credential", func(c context.Context) (*corev1.Secret, error) {
		return cs.CoreV1().Secrets(s.namespace).Create(c, a.credential(), metav1.CreateOptions{})
	})
	return claim, secret
}

// The control of the batch path: the Runtime, impersonating the bound member with its user
// extra, creates her Attempt's workspace claim, credential and Job mounting both; the Job
// controller's Pod passes the Pod policies, runs on a KWOK Node and the Job completes. The audit
// log names alice as the creator of each, impersonated by the Runtime's own service account with
// the extra execution.pharos.dev/created-through=site-runtime. Simulated: KWOK runs the Pod for a
// second and marks it Succeeded.
func TestBoundMembersOwnJobIsAcceptedRunsAndIsCreatedAsTheMember(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	claim, secret := prepared(t, s, a)
	job := created(t, "alice's Job through the Runtime", func(c context.Context) (*batchv1.Job, error) {
		return s.viaRuntime(t, s.alice).BatchV1().Jobs(s.namespace).Create(c, a.job("1"), metav1.CreateOptions{})
	})
	done := kubetest.Until(t, long, "alice's Job Complete", s.watch("jobs", job.Name), func(j *batchv1.Job) bool {
		_, ok := kubetest.JobCondition(j, batchv1.JobComplete)
		return ok
	})
	if done.Status.Succeeded != 1 {
		t.Fatalf("job %s: want one succeeded Pod, got %+v", done.Name, done.Status)
	}
	for _, o := range []struct{ resource, name string }{
		{"persistentvolumeclaims", claim.Name}, {"secrets", secret.Name}, {"jobs", job.Name},
	} {
		ev := s.e.WhoCreated(o.resource, s.namespace, o.name)
		if ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != s.memberUser(s.alice) || ev.User.Username != runtimeUser ||
			!slices.Equal(ev.ImpersonatedUser.Extra[extraCreatedThrough], authenticationv1.ExtraValue{extraSiteRuntime}) {
			t.Errorf("%s %s: want created by %s impersonated by %s with extra %s=%s, got user %q impersonating %+v",
				o.resource, o.name, s.memberUser(s.alice), runtimeUser, extraCreatedThrough, extraSiteRuntime, ev.User.Username, ev.ImpersonatedUser)
		}
	}
}

// The control of preparation: a fresh workspace claim and credential of the member's own
// Attempt, and its workspace helper Pod, are accepted; the claim binds and the helper runs.
// Simulated: KWOK runs the helper; nothing is fetched.
func TestFreshWorkspaceClaimAndHelperOfOwnAttemptAreAccepted(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.bob)
	prepared(t, s, a)
	helper := created(t, "bob's workspace helper through the Runtime", func(c context.Context) (*corev1.Pod, error) {
		return s.viaRuntime(t, s.bob).CoreV1().Pods(s.namespace).Create(c, a.helper(), metav1.CreateOptions{})
	})
	kubetest.Until(t, long, "the helper Pod Succeeded", s.watch("pods", helper.Name), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	kubetest.Until(t, long, "the workspace claim Bound", s.watch("persistentvolumeclaims", a.claimName()), func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
}

// cleanUp deletes the Attempt's Job, helper Pod, claim and credential as the Runtime does — its
// own token, the exact UID, foreground — and waits until each is gone, so the garbage collector
// removed the Job's Pods first.
func cleanUp(t *testing.T, s *site, a attempt, job *batchv1.Job, helper *corev1.Pod, claim *corev1.PersistentVolumeClaim, secret *corev1.Secret) {
	t.Helper()
	rt := s.asRuntime(t)
	ns := s.namespace
	accepted(t, "the Runtime's exact-UID delete of the Job", func(c context.Context, dryRun []string) error {
		return rt.BatchV1().Jobs(ns).Delete(c, job.Name, exactDelete(job.UID, dryRun))
	})
	accepted(t, "the Runtime's exact-UID delete of the helper Pod", func(c context.Context, dryRun []string) error {
		return rt.CoreV1().Pods(ns).Delete(c, helper.Name, exactDelete(helper.UID, dryRun))
	})
	accepted(t, "the Runtime's exact-UID delete of the credential", func(c context.Context, dryRun []string) error {
		return rt.CoreV1().Secrets(ns).Delete(c, secret.Name, exactDelete(secret.UID, dryRun))
	})
	accepted(t, "the Runtime's exact-UID delete of the claim", func(c context.Context, dryRun []string) error {
		return rt.CoreV1().PersistentVolumeClaims(ns).Delete(c, claim.Name, exactDelete(claim.UID, dryRun))
	})
	kubetest.UntilGone(t, long, "the Job", s.watch("jobs", job.Name), &batchv1.Job{}, ns, job.Name)
	kubetest.UntilGone(t, long, "the helper Pod", s.watch("pods", helper.Name), &corev1.Pod{}, ns, helper.Name)
	kubetest.UntilGone(t, long, "the claim", s.watch("persistentvolumeclaims", claim.Name), &corev1.PersistentVolumeClaim{}, ns, claim.Name)
	c := ctx(t)
	if _, err := s.e.Client.CoreV1().Secrets(ns).Get(c, secret.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("credential %s: want it gone, got %v", secret.Name, err)
	}
	pods, err := s.e.Client.CoreV1().Pods(ns).List(c, metav1.ListOptions{LabelSelector: labelAttempt + "=" + a.id})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("want no Pod of the Attempt left, got %d (err %v)", len(pods.Items), err)
	}
	del := s.e.AuditLog()
	ev, err := del.Find(c, func(ev kubetest.AuditEvent) bool {
		r := ev.ObjectRef
		return ev.Verb == "delete" && r != nil && r.Resource == "jobs" && r.Namespace == ns && r.Name == job.Name && ev.Code() == 200
	})
	if err != nil || ev.User.Username != runtimeUser || ev.ImpersonatedUser != nil {
		t.Fatalf("the Job's delete: want it made by %s itself, got %+v (err %v)", runtimeUser, ev, err)
	}
}

// startAttempt prepares and starts the member's Attempt through the Runtime; its Pods run for
// ten minutes, so cleanup meets them running.
func startAttempt(t *testing.T, s *site, a attempt) (*batchv1.Job, *corev1.Pod, *corev1.PersistentVolumeClaim, *corev1.Secret) {
	t.Helper()
	claim, secret := prepared(t, s, a)
	cs := s.viaRuntime(t, a.member)
	helper := a.helper()
	helper.Annotations[kubetest.AnnotationRunSeconds] = "600"
	pod := created(t, "the helper Pod", func(c context.Context) (*corev1.Pod, error) {
		return cs.CoreV1().Pods(s.namespace).Create(c, helper, metav1.CreateOptions{})
	})
	job := created(t, "the Job", func(c context.Context) (*batchv1.Job, error) {
		return cs.BatchV1().Jobs(s.namespace).Create(c, a.job("600"), metav1.CreateOptions{})
	})
	kubetest.Until(t, long, "the Job's Pod Running", s.watch("pods", ""), func(p *corev1.Pod) bool {
		return p.Labels["job-name"] == job.Name && p.Status.Phase == corev1.PodRunning
	})
	return job, pod, claim, secret
}

// The control of cleanup: the Runtime's exact-UID foreground deletes of a running Job, the
// helper Pod, the claim and the credential are accepted, made as the Runtime itself, and
// everything is gone (the garbage collector deleted the Job's Pod first). Simulated: KWOK ends a
// deleted Pod at once.
func TestRuntimeExactUIDForegroundCleanupIsAccepted(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	job, helper, claim, secret := startAttempt(t, s, a)
	cleanUp(t, s, a, job, helper, claim, secret)
}

// Cancellation does not depend on the member's grants: once alice's RoleBinding is removed, her
// creates are refused (by RBAC), and the Runtime's exact-UID cleanup of her running Attempt still
// succeeds (docs/site-runtime.md#access-before-every-native-start: cancellation needs no member grant).
func TestRuntimeCleanupWorksAfterTheMembersGrantsAreRemoved(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	a := s.attempt(s.alice)
	job, helper, claim, secret := startAttempt(t, s, a)

	c := ctx(t)
	if err := s.e.Client.RbacV1().RoleBindings(s.namespace).Delete(c, "member-"+s.alice, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := s.attempt(s.alice)
	waitRefusedByRBAC(t, "alice's next Job after her grants were removed", createJob(s.viaRuntime(t, s.alice), s.namespace, next.job("1")))
	cleanUp(t, s, a, job, helper, claim, secret)
}

// waitRefusedByRBAC waits (dry runs) until RBAC refuses the request, then makes it for real: it
// must be refused by RBAC (403 without any admission policy's name).
func waitRefusedByRBAC(t *testing.T, what string, req request) {
	t.Helper()
	refusedBy(t, what, func(err error) bool { return isRBACRefusal(err) }, req)
}

// The policies never stand in the way of deleting a Site project namespace: with a running Job,
// its Pod, a helper Pod, a claim and a credential in it, the namespace controller and the garbage
// collector remove everything and the namespace is gone.
func TestDeletingASiteProjectNamespaceRemovesEverything(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	synced(t, e)
	c := ctx(t)
	name := "pt-deleted-" + uuid.NewString()[:8]
	if _, err := e.Client.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{kubetest.NamespaceLabel: "true"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	s := siteIn(t, e, name)
	startAttempt(t, s, s.attempt(s.alice))
	startAttempt(t, s, s.attempt(s.bob))

	if err := e.Client.CoreV1().Namespaces().Delete(c, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	namespaces := cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "namespaces", "", fields.OneTermEqualSelector("metadata.name", name))
	kubetest.UntilGone(t, long, "namespace "+name, namespaces, &corev1.Namespace{}, "", name)
}
