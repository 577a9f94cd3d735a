package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeapp "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

const serviceImage = "registry.example/app@sha256:3333333333333333333333333333333333333333333333333333333333333333"

// appOptions shape a test Site of application services.
type appOptions struct {
	siteOptions
	// podAnnotations go on every service Pod template (KWOK's never-ready).
	podAnnotations map[string]string
	// deadline is --progress-deadline (600 s when zero).
	deadline time.Duration
	// afterCreate, when set, runs after each create the executor makes
	// through the Kubernetes adaptor succeeds (with the created kind).
	afterCreate func(kind string)
}

// hookedWorkloads is the Kubernetes adaptor with a test's step after each
// successful create (appOptions.afterCreate).
type hookedWorkloads struct {
	*kube.Workloads
	after func(kind string)
}

func (h hookedWorkloads) Create(ctx context.Context, as domain.StartIdentity, obj application.NativeObject) (string, error) {
	uid, err := h.Workloads.Create(ctx, as, obj)
	if err == nil {
		h.after(obj.Kind)
	}
	return uid, err
}

// newAppSite is newSite whose registry also routes family application to
// the application family's Executor over services.sqlite, acting with the Runtime's
// own token, and whose workload commands are of family application.
func newAppSite(t testing.TB, o appOptions) *site {
	t.Helper()
	s := newSite(t, o.siteOptions)
	s.family = siteprotocol.FamilyApplication
	s.app(o)
	return s
}

// app (re)builds the application executor (a Runtime restart keeps the
// journal and the cluster).
func (s *site) app(o appOptions) {
	s.t.Helper()
	runtimeCfg := s.e.ServiceAccountConfig(siteagent.RuntimeNamespace, siteagent.RuntimeAccount)
	workloads, err := kube.New(runtimeCfg)
	if err != nil {
		s.t.Fatal(err)
	}
	perms, err := permissions.NewPolicy(s.policy, systemClock{}, time.Minute)
	if err != nil {
		s.t.Fatal(err)
	}
	access := application.NewAccess(s.journal, workloads, perms, systemClock{})
	s.renderer.ServicePodAnnotations = o.podAnnotations
	var native appservice.Natives = workloads
	if o.afterCreate != nil {
		native = hookedWorkloads{Workloads: workloads, after: o.afterCreate}
	}
	exec := appservice.NewExecutor(access, native, kubeapp.NewRenderer(s.renderer), s.journal.Services(), nil,
		application.ExecutorConfig{DeletionWait: o.deletionWait}, o.deadline).WithReads(workloads).WithProxy(workloads)
	if o.fileReads != nil {
		cfg := *o.fileReads
		cfg.Image = s.image
		exec.WithFileReads(s.renderer, workloads, cfg)
	}
	if s.registry, err = application.NewRegistry(append(application.NewMemberExecutor(s.journal, nil).Registrations(), exec.Registrations()...)...); err != nil {
		s.t.Fatal(err)
	}
}

func appPrepare(port int, readiness map[string]any) map[string]any {
	p := map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "application", "image": serviceImage, "port": port,
		"demand": map[string]int64{"cpu": 200, "memory": 128 << 20}}
	if readiness != nil {
		p["readiness"] = readiness
	}
	return p
}

func (s *site) prepareApp(attempt string) siteprotocol.Result {
	s.t.Helper()
	return s.execute(s.command(siteprotocol.OpPrepare, attempt, appPrepare(8080, map[string]any{"path": "/healthz", "period_seconds": 5})))
}

func (s *site) deploymentsOf(attempt string) []appsv1.Deployment {
	s.t.Helper()
	l, err := s.e.Client.AppsV1().Deployments(s.ns).List(testContext(s.t), listByAttempt(attempt))
	if err != nil {
		s.t.Fatal(err)
	}
	return l.Items
}

func (s *site) servicesOf(attempt string) []corev1.Service {
	s.t.Helper()
	l, err := s.e.Client.CoreV1().Services(s.ns).List(testContext(s.t), listByAttempt(attempt))
	if err != nil {
		s.t.Fatal(err)
	}
	return l.Items
}

// An application service is created as the member from what prepare
// saved, becomes healthy, and cancel removes its Deployment and Service by
// UID as the Runtime, also after the member's grants were removed. Real:
// the API server, RBAC, impersonation, admission policies, the Deployment
// and ReplicaSet controllers. Simulated by KWOK: the Node (the Pod is
// Running and Ready at once).
func TestAnApplicationServiceIsCreatedAsTheMemberBecomesHealthyAndCancelRemovesItByUID(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{})
	attempt := uuid.NewString()
	prep := s.prepareApp(attempt)
	want(t, prep, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	if n := len(s.deploymentsOf(attempt)); n != 0 {
		t.Fatalf("prepare created %d Deployments", n)
	}
	r := s.simple(siteprotocol.OpStart, attempt)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	deps, svcs := s.deploymentsOf(attempt), s.servicesOf(attempt)
	if len(deps) != 1 || len(svcs) != 1 || len(r.NativeRefs) != 2 || r.NativeRefs[0].UID != string(deps[0].UID) || r.NativeRefs[1].UID != string(svcs[0].UID) {
		t.Fatalf("%d Deployments, %d Services, refs %+v", len(deps), len(svcs), r.NativeRefs)
	}
	digest := detail[siteprotocol.PrepareDetail](t, prep).SpecDigest
	if deps[0].Annotations[kube.AnnotationSpecDigest] != digest || deps[0].Spec.Template.Annotations[kube.AnnotationSpecDigest] != digest {
		t.Fatalf("the Deployment and its Pod template carry %q and %q; prepare saved %s", deps[0].Annotations[kube.AnnotationSpecDigest],
			deps[0].Spec.Template.Annotations[kube.AnnotationSpecDigest], digest)
	}
	if svcs[0].Spec.Type != corev1.ServiceTypeClusterIP {
		t.Fatalf("Service type %s", svcs[0].Spec.Type)
	}
	for _, kind := range []string{"deployments", "services"} {
		if who := s.e.WhoCreated(kind, s.ns, domain.AttemptObjectName(attempt, "")); who.Actor() != s.memberUser() {
			t.Fatalf("%s created by %s, want the member %s", kind, who.Actor(), s.memberUser())
		}
	}
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	s.revokeMember()
	s.grant()
	c := s.simple(siteprotocol.OpCancel, attempt)
	want(t, c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if len(s.deploymentsOf(attempt)) != 0 || len(s.servicesOf(attempt)) != 0 {
		t.Fatal("cancel left the Deployment or the Service")
	}
	want(t, s.simple(siteprotocol.OpObserve, attempt), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
}

// quota creates q in the namespace and waits until its status is recorded.
func (s *site) quota(q *corev1.ResourceQuota, key corev1.ResourceName) {
	s.t.Helper()
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Create(testContext(s.t), q, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	quotas := cache.NewListWatchFromClient(s.e.Client.CoreV1().RESTClient(), "resourcequotas", s.ns, fields.Everything())
	kubetest.Until(s.t, long, "quota status recorded", quotas, func(got *corev1.ResourceQuota) bool {
		_, ok := got.Status.Hard[key]
		return got.Name == q.Name && ok
	})
}

// A namespace quota that refuses the service's Pod keeps observe queued
// past a 3-second progress deadline (the Deployment reports
// ProgressDeadlineExceeded meanwhile); once the quota is raised the
// service becomes healthy. Real: ResourceQuota admission, the Deployment
// and ReplicaSet controllers. Simulated by KWOK: the Node.
func TestAQuotaWaitIsQueuedPastTheProgressDeadlineAndHealthyOnceRaised(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{deadline: 3 * time.Second})
	s.quota(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "project-cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("100m")}}}, corev1.ResourceRequestsCPU)
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	deps := cache.NewListWatchFromClient(s.e.Client.AppsV1().RESTClient(), "deployments", s.ns, fields.Everything())
	kubetest.Until(t, long, "the progress deadline passed under quota", deps, func(d *appsv1.Deployment) bool {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == kube.ReasonProgressDeadlineExceeded {
				return true
			}
		}
		return false
	})
	r := s.simple(siteprotocol.OpObserve, attempt)
	if d := detail[siteprotocol.ObserveDetail](t, r); d.State != siteprotocol.StateQueued || !strings.Contains(d.Message, "exceeded quota") {
		t.Fatalf("past the deadline under quota: %s", r.Detail)
	}
	q, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Get(testContext(t), "project-cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse("1")
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Update(testContext(t), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool {
		st := state(t, r)
		if st == siteprotocol.StateFailed {
			t.Fatalf("a quota wait failed: %s", r.Detail)
		}
		return st == siteprotocol.StateHealthy
	})
}

// A Pod that never becomes Ready fails the service at the progress
// deadline: failed, reason ProgressDeadlineExceeded. Simulated by KWOK:
// the never-ready annotation keeps the Pod Running and not Ready.
func TestAPodThatNeverBecomesReadyFailsAtProgressDeadlineExceeded(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{deadline: 3 * time.Second, podAnnotations: map[string]string{kubetest.AnnotationNeverReady: "true"}})
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	r := s.observeUntil(attempt, "failed", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateFailed })
	if d := detail[siteprotocol.ObserveDetail](t, r); d.Reason != kube.ReasonProgressDeadlineExceeded {
		t.Fatalf("failed: %s; want reason %s", r.Detail, kube.ReasonProgressDeadlineExceeded)
	}
}

// A count quota refusing the Service after the Deployment was created:
// the Deployment is deleted by its UID, start is refused
// native-request-denied with no native reference, nothing of the Attempt
// exists. Real: ResourceQuota admission.
func TestAServiceRefusedByACountQuotaLeavesNothingOfTheAttempt(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{})
	s.quota(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-services"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/services": resource.MustParse("0")}}}, "count/services")
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	r := s.simple(siteprotocol.OpStart, attempt)
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
	if len(r.NativeRefs) != 0 || !strings.Contains(r.Message, "exceeded quota") {
		t.Fatalf("refusal %q with references %v", r.Message, r.NativeRefs)
	}
	if len(s.deploymentsOf(attempt)) != 0 || len(s.servicesOf(attempt)) != 0 {
		t.Fatal("something of the refused Attempt exists")
	}
}

// crashedAppStart leaves what a Runtime killed inside start's Deployment
// create leaves: prepared, the Deployment's record in phase creating, and
// — made by someone — a Deployment under the name: the saved one changed
// by mutate. spec edits the saved specification first (nil: as rendered).
func crashedAppStart(t *testing.T, s *site, spec func([]byte) []byte, mutate func(*appsv1.Deployment)) (*domain.Pending, *appsv1.Deployment) {
	t.Helper()
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	p := s.command(siteprotocol.OpStart, attempt, nil)
	recs, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	rec := *domain.FindRecord(recs, domain.KindDeployment)
	if spec != nil {
		rec.Spec = spec(rec.Spec)
	}
	rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = domain.PhaseCreating, p.Command.ID, p.Sequence, ""
	if err := s.journal.Services().SaveRecord(testContext(t), rec); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := json.Unmarshal(rec.Spec, &dep); err != nil {
		t.Fatal(err)
	}
	digest := siteprotocol.Digest(rec.Spec)
	dep.Annotations = map[string]string{kube.AnnotationSpecDigest: digest}
	dep.Spec.Template.Annotations = map[string]string{kube.AnnotationSpecDigest: digest}
	if mutate != nil {
		mutate(&dep)
	}
	created, err := s.e.Client.AppsV1().Deployments(s.ns).Create(testContext(t), &dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, created
}

// appRecoveryRefuses: recovery of the uncertain start does not adopt a
// Deployment whose field differs from the saved specification; the worker
// is told the native state is unexplained naming the field, nothing is
// deleted and the record is unchanged.
func appRecoveryRefuses(t *testing.T, field string, mutate func(*appsv1.Deployment)) {
	t.Helper()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true, scheduling: appScheduling}})
	p, created := crashedAppStart(t, s, nil, mutate)
	_, err := s.registry.Recover(testContext(t), p)
	if !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), field) {
		t.Fatalf("recovery: want unexplained native state naming %s, got %v", field, err)
	}
	deps := s.deploymentsOf(p.Command.AttemptID)
	if len(deps) != 1 || deps[0].UID != created.UID || deps[0].DeletionTimestamp != nil || len(s.servicesOf(p.Command.AttemptID)) != 0 {
		t.Fatalf("the unexplained Deployment must stay untouched and nothing else be created: %d Deployments", len(deps))
	}
}

// appScheduling is a Site's dedicated pool (no KWOK Node carries it: the
// Pods of these Deployments stay pending, which recovery does not read).
var appScheduling = kube.Scheduling{NodeSelector: map[string]string{"pool.example.org/apps": "true"},
	Tolerations: []corev1.Toleration{{Key: "pool.example.org/apps", Operator: corev1.TolerationOpExists}}}

func appContainer(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[0] }

// One test per rendered field: recovery refuses to adopt a Deployment
// whose image, resources, service account, volumes, port, readiness probe,
// progress deadline, scheduling or selector differ. Real: the API server
// (its defaults are on the live object). KWOK: irrelevant.
func TestRecoveryRefusesADeploymentWhoseImageDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "image", func(d *appsv1.Deployment) {
		appContainer(d).Image = "registry.example/other@sha256:" + strings.Repeat("4", 64)
	})
}

func TestRecoveryRefusesADeploymentWhoseResourcesDiffer(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "resources", func(d *appsv1.Deployment) {
		appContainer(d).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	})
}

func TestRecoveryRefusesADeploymentWhoseServiceAccountDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "serviceAccountName", func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "default" })
}

func TestRecoveryRefusesADeploymentWhoseVolumesDiffer(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "volumes", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	})
}

func TestRecoveryRefusesADeploymentWhosePortDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "containerPort", func(d *appsv1.Deployment) { appContainer(d).Ports[0].ContainerPort = 9090 })
}

func TestRecoveryRefusesADeploymentWhoseReadinessProbeDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "readinessProbe", func(d *appsv1.Deployment) { appContainer(d).ReadinessProbe.HTTPGet.Path = "/other" })
}

func TestRecoveryRefusesADeploymentWhoseProgressDeadlineDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "progressDeadlineSeconds", func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr(int32(60)) })
}

func TestRecoveryRefusesADeploymentWhoseSchedulingDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "nodeSelector", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"pool.example.org/apps": "false"}
	})
}

func TestRecoveryRefusesADeploymentWhoseSelectorDiffers(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, "selector", func(d *appsv1.Deployment) {
		delete(d.Spec.Selector.MatchLabels, kube.LabelCommand)
	})
}

// withSavedDelay spells the readiness probe's initialDelaySeconds out in a
// saved specification, as an earlier rendering did.
func withSavedDelay(delay string) func([]byte) []byte {
	return func(spec []byte) []byte {
		return []byte(strings.Replace(string(spec), `"readinessProbe":{`, `"readinessProbe":{"initialDelaySeconds":`+delay+`,`, 1))
	}
}

// The omitted default: a saved initialDelaySeconds: 0, which the API
// server leaves out of the live Deployment, is adopted; a saved nonzero
// delay the live probe lacks is not. Real: the API server's omission.
func TestRecoveryAdoptsTheOmittedZeroInitialDelayAndRefusesAMissingNonzeroOne(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true}})
	p, created := crashedAppStart(t, s, withSavedDelay("0"), nil)
	if created.Spec.Template.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds != 0 {
		t.Fatal("the live probe has a delay")
	}
	a, err := s.registry.Recover(testContext(t), p)
	if err != nil {
		t.Fatalf("the omitted zero delay: %v", err)
	}
	r := s.result(p, a)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if r.NativeRefs[0].UID != string(created.UID) {
		t.Fatalf("adopted %s, the live Deployment is %s", r.NativeRefs[0].UID, created.UID)
	}

	p, created = crashedAppStart(t, s, withSavedDelay("4"), func(d *appsv1.Deployment) { appContainer(d).ReadinessProbe.InitialDelaySeconds = 0 })
	if _, err := s.registry.Recover(testContext(t), p); !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), "initialDelaySeconds") {
		t.Fatalf("a missing nonzero delay: %v", err)
	}
	if deps := s.deploymentsOf(p.Command.AttemptID); len(deps) != 1 || deps[0].UID != created.UID {
		t.Fatal("the refused Deployment was touched")
	}
}

// An application prepare refused invalid-payload for a GPU demand the Site
// has no resource for creates no workspace claim, so a corrected prepare
// of the same Attempt succeeds. Real: the API server, RBAC, impersonation,
// admission policies.
func TestAnApplicationPrepareRefusedForItsDemandCreatesNoClaim(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{})
	attempt := uuid.NewString()
	bad := appPrepare(8080, map[string]any{"path": "/healthz"})
	bad["demand"] = map[string]int64{"cpu": 1, "memory": 1, "gpu.amd": 1}
	r := s.execute(s.command(siteprotocol.OpPrepare, attempt, bad))
	if r.Outcome != siteprotocol.OutcomeRefused || r.Reason != siteprotocol.ReasonInvalidPayload {
		t.Fatalf("prepare %s/%s: %s", r.Outcome, r.Reason, r.Message)
	}
	claims, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.ns).List(testContext(t), listByAttempt(attempt))
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 {
		t.Fatalf("a refused prepare left %d workspace claims", len(claims.Items))
	}
	if r := s.prepareApp(attempt); r.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("the corrected prepare %s/%s: %s", r.Outcome, r.Reason, r.Message)
	}
}

// After a start and a cancel of an application Attempt, another start is
// attempt-conflict saying the Deployment was created and is removed,
// naming no command (a refusal names nothing of another member:
// docs/site-runtime.md#one-lifecycle-for-every-family), and creates
// nothing. Real: the API server, RBAC, impersonation, admission policies,
// the Deployment controller. Simulated by KWOK: the Node.
func TestAStartAfterACancelIsAttemptConflictSayingTheDeploymentWasRemoved(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{})
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	cancel := s.command(siteprotocol.OpCancel, attempt, nil)
	want(t, s.execute(cancel), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	r := s.simple(siteprotocol.OpStart, attempt)
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if !strings.Contains(r.Message, "removed (or being removed)") || strings.Contains(r.Message, cancel.Command.ID) {
		t.Fatalf("message %q does not say the Deployment was removed, or names the cancel %s", r.Message, cancel.Command.ID)
	}
	if d, v := s.deploymentsOf(attempt), s.servicesOf(attempt); len(d)+len(v) != 0 {
		t.Fatalf("a refused start left %d Deployments and %d Services", len(d), len(v))
	}
}

// A member's grant withdrawn between the Deployment create and the Service
// create (its RoleBinding removed once the Deployment exists): the Service
// create as the member is refused by RBAC (native-request-denied), the
// Runtime deletes the Deployment by its UID as itself, and nothing of the
// Attempt is left; the start is refused with no native reference. Real:
// the API server, RBAC, impersonation, admission, the Deployment
// controller's foreground deletion. KWOK: the Node.
func TestAGrantWithdrawnBetweenTheDeploymentAndTheServiceLeavesNothingOfTheAttempt(t *testing.T) {
	t.Parallel()
	var s *site
	withdrawn := false
	s = newAppSite(t, appOptions{afterCreate: func(kind string) {
		if kind == domain.KindDeployment && !withdrawn {
			withdrawn = true
			s.revokeMember()
		}
	}})
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	r := s.simple(siteprotocol.OpStart, attempt)
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
	if !withdrawn || len(r.NativeRefs) != 0 || !strings.Contains(r.Message, "deleted by its UID") {
		t.Fatalf("refusal %q with references %v (grant withdrawn: %v)", r.Message, r.NativeRefs, withdrawn)
	}
	if len(s.deploymentsOf(attempt)) != 0 || len(s.servicesOf(attempt)) != 0 {
		t.Fatal("something of the refused Attempt exists")
	}
	recs, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	if d := domain.FindRecord(recs, domain.KindDeployment); d == nil || d.Phase != domain.PhaseRemoved || d.UID == "" {
		t.Fatalf("Deployment record %+v, want removed with its UID", d)
	}
	if v := domain.FindRecord(recs, domain.KindService); v == nil || v.Phase != domain.PhaseRefused || v.UID != "" {
		t.Fatalf("Service record %+v, want refused without a UID", v)
	}
}

// crashedServiceCreate leaves what a Runtime killed inside start's Service
// create leaves: the Deployment created as saved and its record, the
// Service's record in phase creating, and — made by someone — a Service
// under the name: the saved one changed by mutate.
func crashedServiceCreate(t *testing.T, s *site, mutate func(*corev1.Service)) (*domain.Pending, *appsv1.Deployment, *corev1.Service) {
	t.Helper()
	p, dep := crashedAppStart(t, s, nil, nil)
	recs, err := s.journal.Services().Records(testContext(t), p.Command.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	rec := *domain.FindRecord(recs, domain.KindService)
	rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = domain.PhaseCreating, p.Command.ID, p.Sequence, ""
	if err := s.journal.Services().SaveRecord(testContext(t), rec); err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := json.Unmarshal(rec.Spec, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{kube.AnnotationSpecDigest: siteprotocol.Digest(rec.Spec)}
	if mutate != nil {
		mutate(&svc)
	}
	created, err := s.e.Client.CoreV1().Services(s.ns).Create(testContext(t), &svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, dep, created
}

// serviceRecoveryRefuses: recovery of a start killed in its Service
// create adopts the matching Deployment but not a Service whose field
// differs from the saved specification: the native state is unexplained
// naming the field, and neither object is deleted.
func serviceRecoveryRefuses(t *testing.T, field string, mutate func(*corev1.Service)) {
	t.Helper()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true, scheduling: appScheduling}})
	p, dep, svc := crashedServiceCreate(t, s, mutate)
	_, err := s.registry.Recover(testContext(t), p)
	if !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), field) {
		t.Fatalf("recovery: want unexplained native state naming %s, got %v", field, err)
	}
	t.Logf("recovery refused: %v", err)
	deps, svcs := s.deploymentsOf(p.Command.AttemptID), s.servicesOf(p.Command.AttemptID)
	if len(deps) != 1 || deps[0].UID != dep.UID || deps[0].DeletionTimestamp != nil {
		t.Fatalf("the Deployment must stay untouched: %d Deployments", len(deps))
	}
	if len(svcs) != 1 || svcs[0].UID != svc.UID || svcs[0].DeletionTimestamp != nil {
		t.Fatalf("the unexplained Service must stay untouched: %d Services", len(svcs))
	}
}

// One test per rendered Service field: recovery refuses to adopt a Service
// whose port, target port, selector or type differ; none is deleted.
// Real: the API server (its defaults, the cluster IP among them, are on
// the live object). KWOK: irrelevant.
func TestRecoveryRefusesAServiceWhosePortDiffers(t *testing.T) {
	t.Parallel()
	serviceRecoveryRefuses(t, "spec.ports[0].port:", func(v *corev1.Service) { v.Spec.Ports[0].Port = 9090 })
}

func TestRecoveryRefusesAServiceWhoseTargetPortDiffers(t *testing.T) {
	t.Parallel()
	serviceRecoveryRefuses(t, "spec.ports[0].targetPort:", func(v *corev1.Service) { v.Spec.Ports[0].TargetPort = intstr.FromInt32(9090) })
}

func TestRecoveryRefusesAServiceWhoseSelectorDiffers(t *testing.T) {
	t.Parallel()
	serviceRecoveryRefuses(t, "spec.selector.", func(v *corev1.Service) { v.Spec.Selector = map[string]string{kube.LabelAttempt: "another"} })
}

func TestRecoveryRefusesAServiceWhoseTypeDiffers(t *testing.T) {
	t.Parallel()
	serviceRecoveryRefuses(t, "spec.type:", func(v *corev1.Service) { v.Spec.Type = corev1.ServiceTypeNodePort })
}

func TestRecoveryAdoptsAServiceThatMatchesWithTheServersDefaults(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true, scheduling: appScheduling}})
	p, dep, svc := crashedServiceCreate(t, s, nil)
	a, err := s.registry.Recover(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	r := s.result(p, a)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if len(r.NativeRefs) != 2 || r.NativeRefs[0].UID != string(dep.UID) || r.NativeRefs[1].UID != string(svc.UID) {
		t.Fatalf("refs %+v, want the live Deployment %s and Service %s", r.NativeRefs, dep.UID, svc.UID)
	}
}

// A field the Runtime rendered that the live object lacks, other than the
// omitted zero delay: a Deployment without one of its identity labels is
// not adopted; nothing is deleted. Real: the API server.
func TestRecoveryRefusesADeploymentMissingARenderedLabel(t *testing.T) {
	t.Parallel()
	appRecoveryRefuses(t, kube.LabelCommand, func(d *appsv1.Deployment) { delete(d.Labels, kube.LabelCommand) })
}

// Another UID: a start recorded its Service's UID, and the name now holds
// another Service (deleted and made again out of band); recovery of the
// start stops as unexplained instead of answering the recorded UID, and
// deletes nothing (a namespace the admission policies do not guard, so
// the test can make the other Service). Real: the API server, RBAC,
// impersonation.
func TestRecoveryOfARecordedStartRefusesAnObjectOfAnotherUID(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true}})
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	p := s.command(siteprotocol.OpStart, attempt, nil)
	want(t, s.execute(p), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	old := s.servicesOf(attempt)[0]
	if err := s.e.Client.CoreV1().Services(s.ns).Delete(testContext(t), old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Labels: old.Labels, Annotations: old.Annotations},
		Spec: corev1.ServiceSpec{Type: old.Spec.Type, Selector: old.Spec.Selector, Ports: old.Spec.Ports}}
	made, err := s.e.Client.CoreV1().Services(s.ns).Create(testContext(t), &again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.registry.Recover(testContext(t), p)
	if !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), string(made.UID)) {
		t.Fatalf("recovery: want unexplained native state naming uid %s, got %v", made.UID, err)
	}
	if svcs := s.servicesOf(attempt); len(svcs) != 1 || svcs[0].UID != made.UID || svcs[0].DeletionTimestamp != nil {
		t.Fatal("the Service of another UID was touched")
	}
	if len(s.deploymentsOf(attempt)) != 1 {
		t.Fatal("the Deployment was touched")
	}
}
