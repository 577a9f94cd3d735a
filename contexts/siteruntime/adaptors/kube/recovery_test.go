package kube_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// crashedStart leaves the state a Runtime killed inside start's create
// leaves: the workspace prepared, the Job's record saved in phase creating
// with its rendered specification, and — made by someone — a Job under
// the deterministic name: the rendered Job changed by mutate (nil: as
// rendered). It returns the start command and the Job created.
func crashedStart(t *testing.T, s *site, mutate func(*batchv1.Job)) (*domain.Pending, *batchv1.Job) {
	t.Helper()
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	p := s.command(siteprotocol.OpStart, attempt, startPayload(500, 60))
	obj, job := s.renderJob(p)
	if err := s.journal.Batch().SaveRecord(testContext(t), domain.NativeRecord{AttemptID: attempt, Kind: obj.Kind, Namespace: obj.Namespace,
		Name: obj.Name, Phase: domain.PhaseCreating, CommandID: p.Command.ID, Sequence: p.Sequence, Spec: obj.Spec}); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(job)
	}
	created, err := s.e.Client.BatchV1().Jobs(s.ns).Create(testContext(t), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, created
}

// recoveryRefuses proves that recovery of an uncertain start does not
// adopt a Job under its name whose field differs from the saved
// specification: the worker is told the native state is unexplained
// (naming the field), the Job is not deleted and nothing is recorded.
func recoveryRefuses(t *testing.T, field string, mutate func(*batchv1.Job)) {
	t.Helper()
	// No access-policy label: the admission policies would refuse some of
	// these Jobs outright, and recovery must not depend on them.
	s := newSite(t, siteOptions{noPolicy: true})
	p, created := crashedStart(t, s, mutate)
	_, err := s.registry.Recover(testContext(t), p)
	if !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), field) {
		t.Fatalf("recovery: want unexplained native state naming %s, got %v", field, err)
	}
	jobs := s.jobsOf(p.Command.AttemptID)
	if len(jobs) != 1 || jobs[0].UID != created.UID || jobs[0].DeletionTimestamp != nil {
		t.Fatalf("the unexplained Job must stay untouched: %d Jobs", len(jobs))
	}
	recs, err := s.journal.Batch().Records(testContext(t), p.Command.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if r := domain.FindRecord(recs, domain.KindJob); r == nil || r.UID != "" || r.Phase != domain.PhaseCreating {
		t.Fatalf("the record changed: %+v", r)
	}
}

func container(j *batchv1.Job) *corev1.Container { return &j.Spec.Template.Spec.Containers[0] }

// Recovery refuses to adopt a Job whose image differs. KWOK: irrelevant
// (the Job's Pod may run on a fake Node meanwhile).
func TestRecoveryRefusesToAdoptAJobWhoseImageDiffers(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "containers[0].image", func(j *batchv1.Job) {
		container(j).Image = "registry.example/other@sha256:" + strings.Repeat("2", 64)
	})
}

// Recovery refuses to adopt a Job whose args differ (one more argument).
// Real: the API server. KWOK runs the Job's Pod on a fake Node meanwhile; nothing depends on it.
func TestRecoveryRefusesToAdoptAJobWhoseArgsDiffer(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "containers[0].args", func(j *batchv1.Job) {
		container(j).Args = append(container(j).Args, "--resume")
	})
}

// Recovery refuses to adopt a Job whose env differs (a changed value).
// Real: the API server. KWOK runs the Job's Pod on a fake Node meanwhile; nothing depends on it.
func TestRecoveryRefusesToAdoptAJobWhoseEnvDiffers(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "containers[0].env[1].value", func(j *batchv1.Job) {
		container(j).Env[1].Value = "8"
	})
}

// Recovery refuses to adopt a Job whose resources differ (a larger cpu
// limit).
// Real: the API server. KWOK runs the Job's Pod on a fake Node meanwhile; nothing depends on it.
func TestRecoveryRefusesToAdoptAJobWhoseResourcesDiffer(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "containers[0].resources.limits.cpu", func(j *batchv1.Job) {
		container(j).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	})
}

// Recovery refuses to adopt a Job whose Pods run as another service
// account.
// Real: the API server. KWOK runs the Job's Pod on a fake Node meanwhile; nothing depends on it.
func TestRecoveryRefusesToAdoptAJobWhoseServiceAccountDiffers(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "serviceAccountName", func(j *batchv1.Job) {
		j.Spec.Template.Spec.ServiceAccountName = siteprotocol.MemberAccount(uuid.NewString())
	})
}

// Recovery refuses to adopt a Job that mounts another volume besides the
// workspace claim.
// Real: the API server. KWOK runs the Job's Pod on a fake Node meanwhile; nothing depends on it.
func TestRecoveryRefusesToAdoptAJobWhoseVolumesDiffer(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "volumes", func(j *batchv1.Job) {
		spec := &j.Spec.Template.Spec
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	})
}

// Recovery refuses to adopt a Job without the identity labels (someone's
// Job under the deterministic name).
// Real: the API server. KWOK runs the Job's Pod on a fake Node meanwhile; nothing depends on it.
func TestRecoveryRefusesToAdoptAJobWithoutTheIdentityLabels(t *testing.T) {
	t.Parallel()
	recoveryRefuses(t, "metadata.labels", func(j *batchv1.Job) {
		j.Labels = map[string]string{"execution.pharos.dev/attempt": j.Labels["execution.pharos.dev/attempt"]}
	})
}

// Recovery adopts a Job that carries everything rendered — the API server
// and the Job controller added their defaults (selector, template labels,
// termination settings, pull policy…) — records its UID, and answers
// exactly what the create answers (state queued, the Job's UID). KWOK
// runs its Pod meanwhile; nothing depends on it.
func TestRecoveryAdoptsAJobThatCarriesEverythingRenderedDespiteServerDefaults(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{noPolicy: true})
	p, created := crashedStart(t, s, nil)
	a, err := s.registry.Recover(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	r := s.result(p, a)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(created.UID) || detail[siteprotocol.StateDetail](t, r).State != siteprotocol.StateQueued {
		t.Fatalf("adopted answer %s %v", r.Detail, r.NativeRefs)
	}
	// A second recovery answers the same bytes from the record.
	again, err := s.registry.Recover(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if s.result(p, again).Digest != r.Digest {
		t.Fatal("a second recovery answered differently")
	}
}

// Recovery adopts our Job also while it carries a deletion timestamp (the
// create happened; observe reports what became of it). A finalizer of the
// test holds the Job in deletion. KWOK is not involved.
func TestRecoveryAdoptsAMatchingJobBeingDeleted(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{noPolicy: true})
	p, created := crashedStart(t, s, func(j *batchv1.Job) { j.Finalizers = []string{"metallo.dev/test-hold"} })
	t.Cleanup(func() { releaseHold(t, s, created.Name) })
	if err := s.e.Client.BatchV1().Jobs(s.ns).Delete(testContext(t), created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := s.registry.Recover(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	r := s.result(p, a)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if r.NativeRefs[0].UID != string(created.UID) {
		t.Fatalf("adopted %v, want uid %s", r.NativeRefs, created.UID)
	}
}

func releaseHold(t *testing.T, s *site, name string) {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, _ = s.e.Client.BatchV1().Jobs(s.ns).Patch(testContext(t), name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// Recovery of an uncertain cancel finds our Job still being deleted (a
// finalizer holds it): it waits for it, bounded, then answers failed /
// deletion-pending; nothing is re-created, and once the Job is gone a
// cancel answers deleted. KWOK is not involved.
func TestRecoveryOfCancelWaitsForAJobBeingDeletedThenAnswersDeletionPending(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{noPolicy: true, deletionWait: 2 * time.Second})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.start(attempt, 500, 60)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	name := start.NativeRefs[0].Name
	patch := []byte(`{"metadata":{"finalizers":["metallo.dev/test-hold"]}}`)
	if _, err := s.e.Client.BatchV1().Jobs(s.ns).Patch(testContext(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseHold(t, s, name) })
	cancel := s.command(siteprotocol.OpCancel, attempt, nil)
	a, err := s.registry.Recover(testContext(t), cancel)
	if err != nil {
		t.Fatal(err)
	}
	r := s.result(cancel, a)
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeletionPending)
	jobs := s.jobsOf(attempt)
	if len(jobs) != 1 || string(jobs[0].UID) != start.NativeRefs[0].UID || jobs[0].DeletionTimestamp == nil {
		t.Fatalf("want our Job still being deleted, got %d Jobs", len(jobs))
	}
	releaseHold(t, s, name)
	want(t, s.simple(siteprotocol.OpCancel, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if n := len(s.jobsOf(attempt)); n != 0 {
		t.Fatalf("%d Jobs after the cancel", n)
	}
}

// cancel of a running Attempt deletes its Job as the Runtime itself —
// after the member's grants were removed — with the exact UID and
// foreground propagation: the Job carries the foregroundDeletion
// finalizer while the garbage collector removes its Pod first, and the
// audit log shows the Runtime's service account, not impersonating
// anyone. Real: RBAC, the runtime-deletes admission policy (a delete
// without the UID precondition is refused), the garbage collector, the
// audit log. Simulated by KWOK: the Pod "runs" (600 s) on a fake Node and
// is removed at once when deleted.
func TestCancelDeletesTheRunningJobByUIDInTheForegroundAsTheRuntimeAfterTheMembersGrantsWereRemoved(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "600"}})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.start(attempt, 500, 3600)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)
	s.observeUntil(attempt, "running", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateRunning })
	s.revokeMember()

	history, stop := recordJobs(t, s)
	r := s.simple(siteprotocol.OpCancel, attempt)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	d := detail[siteprotocol.CancelDetail](t, r)
	if d.State != siteprotocol.StateMissing || len(d.ForeignObjects) != 0 || len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != start.NativeRefs[0].UID {
		t.Fatalf("cancel answered %s %v", r.Detail, r.NativeRefs)
	}
	if n := len(s.jobsOf(attempt)); n != 0 {
		t.Fatalf("%d Jobs after cancel", n)
	}
	pods, err := s.e.Client.CoreV1().Pods(s.ns).List(testContext(t), listByAttempt(attempt))
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("Pods left after the foreground delete: %d (%v)", len(pods.Items), err)
	}
	foreground := slices.ContainsFunc(stop(), func(j batchv1.Job) bool {
		return string(j.UID) == start.NativeRefs[0].UID && j.DeletionTimestamp != nil && slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents)
	})
	if !foreground {
		t.Fatalf("the Job was never seen in foreground deletion (finalizer %s); seen: %d versions", metav1.FinalizerDeleteDependents, len(history()))
	}
	ev, err := s.e.AuditLog().Find(testContext(t), func(ev kubetest.AuditEvent) bool {
		o := ev.ObjectRef
		return ev.Verb == "delete" && o != nil && o.Resource == "jobs" && o.Namespace == s.ns && o.Name == start.NativeRefs[0].Name && ev.Code() == 200
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev.User.Username != siteagent.RuntimeUser() || ev.ImpersonatedUser != nil {
		t.Fatalf("the Job was deleted by %q impersonating %+v; want the Runtime itself", ev.User.Username, ev.ImpersonatedUser)
	}
	// A later observe reports the workload gone.
	want(t, s.simple(siteprotocol.OpObserve, attempt), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
}

// recordJobs keeps every version of the namespace's Jobs seen from now
// until stop is called; stop returns them.
func recordJobs(t *testing.T, s *site) (history func() []batchv1.Job, stop func() []batchv1.Job) {
	t.Helper()
	informer := cache.NewSharedInformer(s.e.Jobs(""), &batchv1.Job{}, 0)
	seen := make(chan batchv1.Job, 1024)
	keep := func(o any) {
		if j, ok := o.(*batchv1.Job); ok {
			seen <- *j.DeepCopy()
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: keep, UpdateFunc: func(_, o any) { keep(o) }})
	done := make(chan struct{})
	go informer.Run(done)
	if !cache.WaitForCacheSync(testContext(t).Done(), informer.HasSynced) {
		t.Fatal("the Job informer never synced")
	}
	var all []batchv1.Job
	drain := func() []batchv1.Job {
		for {
			select {
			case j := <-seen:
				all = append(all, j)
			default:
				return all
			}
		}
	}
	return drain, func() []batchv1.Job {
		close(done)
		return drain()
	}
}

// A Job recreated under the Attempt's name by someone else (as the member,
// by another client of the Runtime's identity, after the Runtime's Job was
// removed) has a new UID:
// cancel does not delete it and lists it in detail.foreign_objects. Real:
// the UID precondition (409) and its re-read. Simulated by KWOK: Pods.
func TestCancelLeavesAJobRecreatedUnderTheSameNameAndListsItAsForeign(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "600"}})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	p := s.command(siteprotocol.OpStart, attempt, startPayload(500, 600))
	start := s.execute(p)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	ours := start.NativeRefs[0]
	bg := metav1.DeletePropagationBackground
	if err := s.e.Client.BatchV1().Jobs(s.ns).Delete(testContext(t), ours.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	kubetest.UntilGone(t, long, "the Runtime's Job", s.e.Jobs(ours.Name), &batchv1.Job{}, s.ns, ours.Name)
	_, job := s.renderJob(p)
	foreign, err := s.e.ClientFor(s.memberConfig()).BatchV1().Jobs(s.ns).Create(testContext(t), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := s.simple(siteprotocol.OpCancel, attempt)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	d := detail[siteprotocol.CancelDetail](t, r)
	if len(d.ForeignObjects) != 1 || d.ForeignObjects[0].UID != string(foreign.UID) || d.ForeignObjects[0].Name != ours.Name {
		t.Fatalf("foreign objects %+v; want the recreated Job %s", d.ForeignObjects, foreign.UID)
	}
	still, err := s.e.Client.BatchV1().Jobs(s.ns).Get(testContext(t), ours.Name, metav1.GetOptions{})
	if err != nil || still.UID != foreign.UID || still.DeletionTimestamp != nil {
		t.Fatalf("the foreign Job was touched: %v", err)
	}
}
