package kube_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// A batch Attempt end to end on the local cluster: prepare creates the
// workspace claim and start the Job, both as the member (the audit log
// names the member, impersonated by the Runtime's own service account);
// the Job carries the native rules (restartPolicy Never, backoffLimit 0,
// requests = limits = demand, the time limit on the Pod only, the member's
// account, the claim, identity labels, spec digest); observe reports
// running, then succeeded with the Job's reason; cleanup removes the Job and
// the claim by UID. Real: API server, RBAC, impersonation, admission
// policies of deploy/cluster, Job controller, scheduler, PV provisioner,
// audit log. Simulated by KWOK: the Node and its kubelet — the Pod "runs"
// for 3 seconds and exits 0; no container runs.
func TestBatchAttemptIsCreatedAsTheMemberRunsToSucceededAndCleanupRemovesItByUID(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "3"}})
	attempt := uuid.NewString()
	prep := s.prepare(attempt)
	want(t, prep, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	ws := detail[siteprotocol.PrepareDetail](t, prep).Workspace
	start := s.start(attempt, 1500, 600)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if st := detail[siteprotocol.StateDetail](t, start).State; st != siteprotocol.StateQueued {
		t.Fatalf("start reports %s, want queued", st)
	}
	jobs := s.jobsOf(attempt)
	if len(jobs) != 1 || len(start.NativeRefs) != 1 || string(jobs[0].UID) != start.NativeRefs[0].UID {
		t.Fatalf("want one Job named by the result %v, got %d", start.NativeRefs, len(jobs))
	}
	job := jobs[0]
	for _, ev := range []kubetest.AuditEvent{s.e.WhoCreated("jobs", s.ns, job.Name), s.e.WhoCreated("persistentvolumeclaims", s.ns, ws.ClaimName)} {
		if ev.Actor() != s.memberUser() || ev.User.Username != siteagent.RuntimeUser() {
			t.Fatalf("audit: %s created by %q impersonating %+v; want the Runtime impersonating %s", ev.ObjectRef.Resource, ev.User.Username, ev.ImpersonatedUser, s.memberUser())
		}
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	cpu := resource.MustParse("1500m")
	switch {
	case job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0:
		t.Errorf("backoffLimit %v, want 0", job.Spec.BackoffLimit)
	case job.Spec.ActiveDeadlineSeconds != nil:
		t.Errorf("the Job has activeDeadlineSeconds %d; the time limit belongs on the Pod", *job.Spec.ActiveDeadlineSeconds)
	case pod.ActiveDeadlineSeconds == nil || *pod.ActiveDeadlineSeconds != 600:
		t.Errorf("Pod activeDeadlineSeconds %v, want 600", pod.ActiveDeadlineSeconds)
	case pod.RestartPolicy != corev1.RestartPolicyNever, pod.ServiceAccountName != s.account():
		t.Errorf("restartPolicy %s, service account %s", pod.RestartPolicy, pod.ServiceAccountName)
	case c.Image != testImage, c.Resources.Requests.Cpu().Cmp(cpu) != 0, c.Resources.Limits.Cpu().Cmp(cpu) != 0,
		c.Resources.Limits.Memory().Value() != 512<<20, c.Resources.Requests.Memory().Value() != 512<<20:
		t.Errorf("container image %s resources %+v", c.Image, c.Resources)
	case len(pod.Volumes) != 1 || pod.Volumes[0].PersistentVolumeClaim == nil || pod.Volumes[0].PersistentVolumeClaim.ClaimName != ws.ClaimName:
		t.Errorf("volumes %+v, want the claim %s", pod.Volumes, ws.ClaimName)
	case job.Labels[kube.LabelMember] != s.member || job.Labels[kube.LabelProject] != s.project || job.Labels[kube.LabelAttempt] != attempt,
		job.Annotations[kube.AnnotationSpecDigest] == "":
		t.Errorf("identity labels %v annotations %v", job.Labels, job.Annotations)
	}

	ran := s.waitPodRan(attempt)
	t.Logf("Pod %s on KWOK Node %s", ran.Name, ran.Spec.NodeName)
	done := s.observeUntil(attempt, "succeeded", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateSucceeded })
	want(t, done, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	if d := detail[siteprotocol.ObserveDetail](t, done); d.Reason == "" || d.FinishedAt == "" || d.ExitCode == nil || *d.ExitCode != 0 {
		t.Errorf("succeeded without the Job's reason, finish time or exit code 0: %s", done.Detail)
	}

	clean := s.simple(siteprotocol.OpCleanup, attempt)
	want(t, clean, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	removed := detail[siteprotocol.CleanupDetail](t, clean).Removed
	if len(removed) != 2 || removed[0].UID != string(job.UID) || removed[1].UID != ws.UID {
		t.Fatalf("cleanup removed %+v", removed)
	}
	if n := len(s.jobsOf(attempt)); n != 0 {
		t.Fatalf("%d Jobs left after cleanup", n)
	}
	if _, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(testContext(t), ws.ClaimName, metav1.GetOptions{}); err == nil {
		t.Fatal("the workspace claim survived cleanup")
	}
	gone := s.simple(siteprotocol.OpObserve, attempt)
	want(t, gone, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
	// cleanup again answers the same removed references.
	again := s.simple(siteprotocol.OpCleanup, attempt)
	if string(again.Detail) != string(clean.Detail) {
		t.Fatalf("cleanup repeated: %s, first %s", again.Detail, clean.Detail)
	}
}

// Two Runs that each fit the namespace quota alone (1 of 1.5 cores) but not
// together, started at once: both Jobs are created, exactly one gets a Pod,
// the other's Pod is refused by the quota ("exceeded quota", FailedCreate)
// and observe reports it queued, never failed; when the first finishes the
// second gets its Pod with the Run's full time limit on the Pod. The quota
// is never exceeded: at no time do two Pods hold it. Real: ResourceQuota
// admission and controller, the Job controller's backoff, the scheduler.
// Simulated by KWOK: Nodes and kubelet — each Pod "runs" 30 seconds, then
// exits 0; activeDeadlineSeconds is asserted on the Pod spec because KWOK
// does not enforce it.
func TestTwoRunsThatFitTheQuotaOnlyAloneOneRunsTheOtherQueuesThenRunsWithItsFullTimeLimit(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "30"}})
	ctx := testContext(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "project-cpu"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1500m")}},
	}
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotas := cache.NewListWatchFromClient(s.e.Client.CoreV1().RESTClient(), "resourcequotas", s.ns, fields.Everything())
	kubetest.Until(t, long, "quota usage recorded", quotas, func(q *corev1.ResourceQuota) bool {
		_, ok := q.Status.Used[corev1.ResourceRequestsCPU]
		return ok
	})
	a, b := uuid.NewString(), uuid.NewString()
	want(t, s.prepare(a), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.prepare(b), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)

	// Count Pods holding the quota (not finished) over the whole test.
	maxHolding := make(chan int, 1)
	stop := make(chan struct{})
	go watchHolding(s, stop, maxHolding)

	const limit = 600
	want(t, s.start(a, 1000, limit), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	want(t, s.start(b, 1000, limit), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)

	refused := s.e.WaitForEvent(long, "a Pod create refused by the quota", func(ev *corev1.Event) bool {
		return ev.InvolvedObject.Kind == "Job" && ev.Reason == "FailedCreate" && strings.Contains(ev.Message, "exceeded quota")
	})
	first, second := a, b
	if refused.InvolvedObject.Name == domain.AttemptObjectName(a, "") {
		first, second = b, a
	}
	t.Logf("%s runs; %s waits: %s", first, second, refused.Message)
	s.waitPodRunning(first)
	waiting := detail[siteprotocol.ObserveDetail](t, s.simple(siteprotocol.OpObserve, second))
	if waiting.State != siteprotocol.StateQueued || waiting.Reason != "FailedCreate" || !strings.Contains(waiting.Message, "exceeded quota") {
		t.Fatalf("the second Run while the quota refuses its Pod: %+v; want queued because of the quota", waiting)
	}
	if st := state(t, s.simple(siteprotocol.OpObserve, first)); st != siteprotocol.StateRunning {
		t.Fatalf("the first Run is %s, want running", st)
	}
	// Until the first has finished, the second stays queued (never failed).
	s.observeUntil(first, "succeeded", func(r siteprotocol.Result) bool {
		if st := state(t, s.simple(siteprotocol.OpObserve, second)); st == siteprotocol.StateFailed {
			t.Fatalf("the waiting Run was reported failed")
		}
		return state(t, r) == siteprotocol.StateSucceeded
	})
	pod := s.waitPodRan(second)
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d != limit {
		t.Fatalf("the second Run's Pod has activeDeadlineSeconds %v; want its full time limit %d", d, limit)
	}
	s.observeUntil(second, "succeeded", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateSucceeded })
	close(stop)
	if n := <-maxHolding; n != 1 {
		t.Fatalf("at most %d Pods held the quota at once; want exactly 1", n)
	}
	for _, attempt := range []string{a, b} {
		if n := len(s.jobsOf(attempt)); n != 1 {
			t.Fatalf("attempt %s has %d Jobs", attempt, n)
		}
	}
}

// watchHolding reports the most Pods that were at once neither Succeeded
// nor Failed, until stop is closed.
func watchHolding(s *site, stop <-chan struct{}, out chan<- int) {
	informer := cache.NewSharedInformer(s.e.Pods(""), &corev1.Pod{}, 0)
	most := 0
	count := func() {
		n := 0
		for _, o := range informer.GetStore().List() {
			if p := o.(*corev1.Pod); p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				n++
			}
		}
		most = max(most, n)
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { count() },
		UpdateFunc: func(any, any) { count() },
	})
	informer.Run(stop)
	out <- most
}

// A namespace quota on the count of Jobs at its current usage refuses the
// Job create itself: start is refused native-request-denied with no native
// reference and nothing is left behind. Real: ResourceQuota admission.
// KWOK is not involved (no Pod is ever created).
func TestAnObjectCountQuotaRefusesTheJobCreateAsNativeRequestDeniedWithNoReference(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{})
	ctx := testContext(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-jobs"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}},
	}
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotas := cache.NewListWatchFromClient(s.e.Client.CoreV1().RESTClient(), "resourcequotas", s.ns, fields.Everything())
	kubetest.Until(t, long, "quota status recorded", quotas, func(q *corev1.ResourceQuota) bool {
		_, ok := q.Status.Hard["count/jobs.batch"]
		return ok
	})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	r := s.start(attempt, 500, 60)
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
	if len(r.NativeRefs) != 0 || !strings.Contains(r.Message, "exceeded quota") {
		t.Fatalf("refusal %q with references %v", r.Message, r.NativeRefs)
	}
	if n := len(s.jobsOf(attempt)); n != 0 {
		t.Fatalf("%d Jobs exist after the refusal", n)
	}
	want(t, s.simple(siteprotocol.OpObserve, attempt), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotStarted)
}

// A Job whose Pod exits non-zero is observed failed with the Job's own
// reason (BackoffLimitExceeded: backoffLimit 0, Execution owns retries)
// and the container's exit code. Simulated by KWOK: the Pod "fails" with
// exit code 1 (fail annotation).
func TestAFailingJobIsObservedFailedWithTheJobsReason(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationFail: "true"}})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.start(attempt, 500, 60), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	r := s.observeUntil(attempt, "failed", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateFailed })
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	if d := detail[siteprotocol.ObserveDetail](t, r); d.Reason != batchv1.JobReasonBackoffLimitExceeded || d.ExitCode == nil || *d.ExitCode != 1 {
		t.Fatalf("failed: %s; want reason %s and exit code 1", r.Detail, batchv1.JobReasonBackoffLimitExceeded)
	}
}
