package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// isvcOptions shape a test Site of inference services.
type isvcOptions struct {
	siteOptions
	// podAnnotations go on every predictor component (KWOK's fail stage).
	podAnnotations map[string]string
	// servingRuntimes are the pinned ServingRuntimes by model format
	// (--serving-runtimes; huggingface on kubetest.HuggingFaceRuntime when
	// empty).
	servingRuntimes map[string]string
}

// newIsvcSite is newSite whose registry also routes family inference to an
// inference family's Executor over services.sqlite, acting with the Runtime's own
// token, and whose workload commands are of family inference.
func newIsvcSite(t testing.TB, o isvcOptions) *site {
	t.Helper()
	s := newSite(t, o.siteOptions)
	s.family = siteprotocol.FamilyInference
	s.inference(o)
	return s
}

// inference (re)builds the inference executor (a Runtime restart keeps the
// journal and the cluster), with its private reads as the runtime role
// composes them: the InferenceService's Pod chain on the workload client,
// read-logs and proxy through it, and read-file (siteOptions.fileReads).
func (s *site) inference(o isvcOptions) {
	s.t.Helper()
	workloads, err := kube.New(s.e.ServiceAccountConfig(siteagent.RuntimeNamespace, siteagent.RuntimeAccount))
	if err != nil {
		s.t.Fatal(err)
	}
	perms, err := permissions.NewPolicy(s.policy, systemClock{}, time.Minute)
	if err != nil {
		s.t.Fatal(err)
	}
	access := application.NewAccess(s.journal, workloads, perms, systemClock{})
	s.renderer.InferencePodAnnotations = o.podAnnotations
	runtimes := o.servingRuntimes
	if len(runtimes) == 0 {
		runtimes = map[string]string{"huggingface": kubetest.HuggingFaceRuntime}
	}
	exec, err := inference.NewExecutor(access, kubeinference.New(workloads), kubeinference.NewRenderer(s.renderer), s.journal.Services(), nil,
		application.ExecutorConfig{DeletionWait: o.deletionWait}, inference.Config{ServingRuntimes: runtimes})
	if err != nil {
		s.t.Fatal(err)
	}
	exec.WithReads(workloads).WithProxy(workloads)
	if o.grants != nil {
		exec.WithCheckout(o.grants, s.renderer, workloads, application.CheckoutConfig{Image: s.image, Timeout: time.Minute, Wait: 2 * time.Minute, CAConfigMap: o.checkoutCA})
	}
	if o.fileReads != nil {
		cfg := *o.fileReads
		cfg.Image = s.image
		exec.WithFileReads(s.renderer, workloads, cfg)
	}
	if s.registry, err = application.NewRegistry(append(application.NewMemberExecutor(s.journal, nil).Registrations(), exec.Registrations()...)...); err != nil {
		s.t.Fatal(err)
	}
}

// caseModelArgs are the saved model arguments of testdata/inference-huggingface.yaml.
var caseModelArgs = []string{
	"--model_id=hf-internal-testing/tiny-random-BertForSequenceClassification",
	"--model_revision=4d5a3af95422fc0ebf732796c685c586b6d7420b",
	"--task=sequence_classification",
}

func isvcPrepare() map[string]any {
	return map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "inference", "port": 8080,
		"model":  map[string]any{"format": "huggingface", "args": caseModelArgs},
		"demand": map[string]int64{"cpu": 1000, "memory": 2 << 30}}
}

// TestTheRenderedInferenceServiceHasTheShapeOfTheCase renders an inference
// Attempt and compares it with testdata/inference-huggingface.yaml field by
// field: name, Standard mode, identity labels, cluster-local visibility,
// the member's account, model format, pinned runtime, the saved args only,
// requests = limits = demand; Pod Security restricted; and the claim at /workspace. No cluster.
func TestTheRenderedInferenceServiceHasTheShapeOfTheCase(t *testing.T) {
	var want kservev1beta1.InferenceService
	raw := inferenceCaseBytes(t)
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatal(err)
	}
	id := application.ObjectIdentity{RunID: want.Labels[kube.LabelRun], AttemptID: want.Labels[kube.LabelAttempt], MemberID: want.Labels[kube.LabelMember],
		ProjectID: want.Labels[kube.LabelProject], CommandID: want.Labels[kube.LabelCommand]}
	r := kube.NewRenderer(nil, nil)
	obj, err := kubeinference.NewRenderer(r).RenderInferenceService(application.InferenceServiceSpec{Identity: id, Namespace: want.Namespace,
		ServiceAccount: want.Spec.Predictor.ServiceAccountName, DeploymentMode: application.DeploymentModeStandard, ModelFormat: "huggingface",
		Runtime: kubetest.HuggingFaceRuntime, Args: caseModelArgs, Demand: map[string]int64{"cpu": 1000, "memory": 2 << 30},
		WorkspaceClaim: domain.AttemptObjectName(id.AttemptID, domain.SuffixWorkspace)})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := kubeinference.NewRenderer(r).RenderInferenceService(application.InferenceServiceSpec{Identity: id, Namespace: want.Namespace,
		ServiceAccount: want.Spec.Predictor.ServiceAccountName, DeploymentMode: application.DeploymentModeStandard, ModelFormat: "huggingface",
		Runtime: kubetest.HuggingFaceRuntime, Args: caseModelArgs, Demand: map[string]int64{"cpu": 1000, "memory": 2 << 30},
		WorkspaceClaim: domain.AttemptObjectName(id.AttemptID, domain.SuffixWorkspace)})
	if string(again.Spec) != string(obj.Spec) {
		t.Fatal("rendering is not deterministic")
	}
	var got kservev1beta1.InferenceService
	if err := json.Unmarshal(obj.Spec, &got); err != nil {
		t.Fatal(err)
	}
	if obj.Kind != domain.KindInferenceService || got.Name != want.Name || got.Namespace != want.Namespace || got.APIVersion != want.APIVersion || got.Kind != want.Kind {
		t.Fatalf("identity %s %s/%s %s", obj.Kind, got.Namespace, got.Name, got.APIVersion)
	}
	if got.Annotations[kubeinference.AnnotationDeploymentMode] != "Standard" || got.Labels[kubeinference.LabelVisibility] != kubeinference.VisibilityClusterLocal {
		t.Fatalf("annotations %v labels %v", got.Annotations, got.Labels)
	}
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, the case has %q", k, got.Labels[k], v)
		}
	}
	p, wp := got.Spec.Predictor, want.Spec.Predictor
	if p.ServiceAccountName != wp.ServiceAccountName || p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
		t.Fatalf("service account %q automount %v", p.ServiceAccountName, p.AutomountServiceAccountToken)
	}
	if !reflect.DeepEqual(p.SecurityContext, wp.SecurityContext) || p.Model == nil || !reflect.DeepEqual(p.Model.SecurityContext, wp.Model.SecurityContext) {
		t.Fatalf("securityContext %+v, the case has %+v", p.SecurityContext, wp.SecurityContext)
	}
	m, wm := p.Model, wp.Model
	if m == nil || m.ModelFormat.Name != wm.ModelFormat.Name || m.Runtime == nil || *m.Runtime != *wm.Runtime || !slices.Equal(m.Args, wm.Args) {
		t.Fatalf("model %+v", m)
	}
	for name, q := range wm.Resources.Requests {
		if g := m.Resources.Requests[name]; g.Cmp(q) != 0 {
			t.Errorf("request %s = %s, the case has %s", name, g.String(), q.String())
		}
		if g := m.Resources.Limits[name]; g.Cmp(q) != 0 {
			t.Errorf("limit %s = %s, the case has %s", name, g.String(), q.String())
		}
	}
	if len(m.VolumeMounts) != 1 || m.VolumeMounts[0].MountPath != kube.WorkspacePath || len(p.Volumes) != 1 ||
		p.Volumes[0].PersistentVolumeClaim == nil || p.Volumes[0].PersistentVolumeClaim.ClaimName != domain.AttemptObjectName(id.AttemptID, "-ws") {
		t.Fatalf("workspace: mounts %+v volumes %+v", m.VolumeMounts, p.Volumes)
	}
	var tree map[string]any
	_ = json.Unmarshal(obj.Spec, &tree)
	if _, ok := tree["status"]; ok {
		t.Fatal("the rendered bytes carry a status")
	}
	if _, err := kubeinference.NewRenderer(r).RenderInferenceService(application.InferenceServiceSpec{Identity: id, Demand: map[string]int64{"cpu": 1, "memory": 1, "gpu.amd": 1}}); err == nil {
		t.Fatal("a GPU demand without a configured resource was rendered")
	}
}

func inferenceCaseBytes(t *testing.T) []byte {
	t.Helper()
	u := inferenceCase(t, "project-0a1b2c3d")
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// InferenceServiceObservation's rules on KServe's status, with and without
// the predictor Deployment's observation. No cluster.
func TestInferenceServiceObservationFollowsKServesStatusAndThePredictor(t *testing.T) {
	isvc := func(status string) *kservev1beta1.InferenceService {
		var i kservev1beta1.InferenceService
		if err := json.Unmarshal([]byte(`{"metadata":{"name":"attempt-x"},"status":`+status+`}`), &i); err != nil {
			t.Fatal(err)
		}
		return &i
	}
	ready := isvc(`{"conditions":[{"type":"PredictorReady","status":"True"},{"type":"Ready","status":"True"}]}`)
	failed := isvc(`{"conditions":[{"type":"Ready","status":"False"}],"modelStatus":{"transitionStatus":"BlockedByFailedLoad",
		"states":{"activeModelState":"","targetModelState":"FailedToLoad"},
		"lastFailureInfo":{"reason":"ModelLoadFailed","message":"container exited","exitCode":1,"time":"2026-12-02T05:00:00Z"}}}`)
	waiting := isvc(`{"conditions":[{"type":"PredictorReady","status":"False","reason":"MinimumReplicasUnavailable","message":"Deployment does not have minimum availability."},{"type":"Ready","status":"False"}]}`)
	quota := &application.Observation{State: siteprotocol.StateQueued, Reason: kube.ReasonFailedCreate, Message: "exceeded quota: q"}
	denied := &application.Observation{State: siteprotocol.StateFailed, Reason: kube.ReasonFailedCreate, Message: "denied request"}
	for name, c := range map[string]struct {
		isvc      *kservev1beta1.InferenceService
		predictor *application.Observation
		state     siteprotocol.State
		reason    string
	}{
		"ready":                {ready, nil, siteprotocol.StateHealthy, ""},
		"failed to load":       {failed, quota, siteprotocol.StateFailed, "ModelLoadFailed"},
		"quota wait":           {waiting, quota, siteprotocol.StateQueued, kube.ReasonFailedCreate},
		"admission denial":     {waiting, denied, siteprotocol.StateFailed, kube.ReasonFailedCreate},
		"available, not ready": {waiting, &application.Observation{State: siteprotocol.StateHealthy}, siteprotocol.StateRunning, ""},
		"no predictor yet":     {waiting, nil, siteprotocol.StateQueued, "MinimumReplicasUnavailable"},
		"nothing reported yet": {isvc(`{}`), nil, siteprotocol.StateQueued, ""},
		"invalid spec":         {isvc(`{"modelStatus":{"transitionStatus":"InvalidSpec","lastFailureInfo":{"reason":"NoSupportingRuntime"}}}`), nil, siteprotocol.StateFailed, "NoSupportingRuntime"},
		"blocked without info": {isvc(`{"modelStatus":{"transitionStatus":"BlockedByFailedLoad"}}`), nil, siteprotocol.StateFailed, "BlockedByFailedLoad"},
	} {
		o := kubeinference.InferenceServiceObservation(c.isvc, c.predictor, nil)
		if o.State != c.state || o.Reason != c.reason {
			t.Errorf("%s: %s (%s) %q, want %s (%s)", name, o.State, o.Reason, o.Message, c.state, c.reason)
		}
	}
	o := kubeinference.InferenceServiceObservation(failed, nil, nil)
	if o.ExitCode == nil || *o.ExitCode != 1 || o.Message != "container exited" || o.FinishedAt != "2026-12-02T05:00:00Z" {
		t.Fatalf("failure detail %+v", o)
	}
}

// A predictor Pod whose kserve-container exited in error — terminated
// with reason Error, or in CrashLoopBackOff after such an exit — is
// failed / ModelLoadFailed with that exit code, message and time before
// KServe's controller reports it (KServe's own rule, read at observe
// time); a container that ran and exited 0, one running again, another
// container's exit, or a Ready InferenceService are not. No cluster.
func TestInferenceServiceObservationReadsAPredictorThatExitedInError(t *testing.T) {
	var waiting kservev1beta1.InferenceService
	_ = json.Unmarshal([]byte(`{"metadata":{"name":"attempt-x"},"status":{"conditions":[{"type":"PredictorReady","status":"False","reason":"MinimumReplicasUnavailable"},{"type":"Ready","status":"False"}]}}`), &waiting)
	var ready kservev1beta1.InferenceService
	_ = json.Unmarshal([]byte(`{"metadata":{"name":"attempt-x"},"status":{"conditions":[{"type":"PredictorReady","status":"True"},{"type":"Ready","status":"True"}]}}`), &ready)
	at := metav1.NewTime(time.Date(2026, 12, 8, 1, 2, 3, 0, time.UTC))
	exited := &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "cannot load the model", FinishedAt: at}
	pod := func(name string, cs corev1.ContainerStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	running := &application.Observation{State: siteprotocol.StateRunning, Message: "a Pod runs"}
	for name, c := range map[string]struct {
		cs     corev1.ContainerStatus
		state  siteprotocol.State
		reason string
	}{
		"terminated in error": {corev1.ContainerStatus{Name: kubeinference.PredictorContainer, State: corev1.ContainerState{Terminated: exited}}, siteprotocol.StateFailed, "ModelLoadFailed"},
		"crash loop": {corev1.ContainerStatus{Name: kubeinference.PredictorContainer, RestartCount: 2, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: exited}}, siteprotocol.StateFailed, "ModelLoadFailed"},
		"exited 0": {corev1.ContainerStatus{Name: kubeinference.PredictorContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}, siteprotocol.StateRunning, ""},
		"running again": {corev1.ContainerStatus{Name: kubeinference.PredictorContainer, RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: exited}}, siteprotocol.StateRunning, ""},
		"another container": {corev1.ContainerStatus{Name: "sidecar", State: corev1.ContainerState{Terminated: exited}}, siteprotocol.StateRunning, ""},
	} {
		o := kubeinference.InferenceServiceObservation(&waiting, running, []corev1.Pod{pod("p-"+name, c.cs)})
		if o.State != c.state || o.Reason != c.reason {
			t.Errorf("%s: %s (%s) %q, want %s (%s)", name, o.State, o.Reason, o.Message, c.state, c.reason)
		}
		if c.reason == "ModelLoadFailed" && (o.ExitCode == nil || *o.ExitCode != 3 || o.FinishedAt != "2026-12-08T01:02:03Z" ||
			!strings.Contains(o.Message, "exited with status 3") || !strings.HasSuffix(o.Message, ": cannot load the model")) {
			t.Errorf("%s: detail %+v", name, o)
		}
	}
	crashed := pod("p", corev1.ContainerStatus{Name: kubeinference.PredictorContainer, State: corev1.ContainerState{Terminated: exited}})
	if o := kubeinference.InferenceServiceObservation(&ready, running, []corev1.Pod{crashed}); o.State != siteprotocol.StateHealthy {
		t.Errorf("a Ready InferenceService with an exited Pod: %+v", o)
	}
}

// An inference service is created as the member from what prepare saved;
// KServe's own controller reconciles it into the predictor Deployment and
// Service attempt-<attempt>-predictor (controller owner references to the
// InferenceService, created by the controller's identity per the audit
// log), which the admission policies admit; observe reports healthy once
// KServe reports Ready; cancel removes the InferenceService by its UID and
// KServe's garbage leaves nothing. Real: the API server, RBAC,
// impersonation, admission policies, KServe's controller and webhooks, the
// Deployment and ReplicaSet controllers. Simulated by KWOK: the Node.
func TestAnInferenceServiceIsCreatedAsTheMemberReconciledByKServeAndBecomesHealthy(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{})
	attempt := uuid.NewString()
	prep := s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare()))
	want(t, prep, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	r := s.simple(siteprotocol.OpStart, attempt)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	name := domain.AttemptObjectName(attempt, "")
	u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(u.GetUID()) || r.NativeRefs[0].Kind != domain.KindInferenceService {
		t.Fatalf("refs %+v, live uid %s", r.NativeRefs, u.GetUID())
	}
	if u.GetAnnotations()[kube.AnnotationSpecDigest] != detail[siteprotocol.PrepareDetail](t, prep).SpecDigest {
		t.Fatal("the InferenceService does not carry the saved spec digest")
	}
	if who := s.e.WhoCreated("inferenceservices", s.ns, name); who.Actor() != s.memberUser() {
		t.Fatalf("the InferenceService was created by %s, want the member %s", who.Actor(), s.memberUser())
	}
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	predictor := name + kubeinference.PredictorSuffix
	dep, err := s.e.Client.AppsV1().Deployments(s.ns).Get(testContext(t), predictor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := s.e.Client.CoreV1().Services(s.ns).Get(testContext(t), predictor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []metav1.Object{dep, svc} {
		c := metav1.GetControllerOf(o)
		if c == nil || c.Kind != domain.KindInferenceService || string(c.UID) != string(u.GetUID()) {
			t.Fatalf("%s's controller is %+v, not the InferenceService %s", o.GetName(), c, u.GetUID())
		}
		if o.GetLabels()[kube.LabelMember] != s.member || o.GetLabels()[kube.LabelAttempt] != attempt {
			t.Fatalf("%s carries labels %v", o.GetName(), o.GetLabels())
		}
	}
	if dep.Spec.Template.Spec.ServiceAccountName != "member-"+s.member {
		t.Fatalf("the predictor runs as %s", dep.Spec.Template.Spec.ServiceAccountName)
	}
	for _, kind := range []string{"deployments", "services"} {
		if who := s.e.WhoCreated(kind, s.ns, predictor); who.Actor() != kubetest.KServeController {
			t.Fatalf("the predictor's %s was created by %s, want KServe's controller", kind, who.Actor())
		}
	}
	c := s.simple(siteprotocol.OpCancel, attempt)
	want(t, c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if _, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(testContext(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the InferenceService is still there after cancel: %v", err)
	}
	want(t, s.simple(siteprotocol.OpObserve, attempt), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
}

// A predictor whose container fails (the KWOK fail stage: kserve-container
// terminates with reason Error): KServe reports FailedToLoad, and observe
// answers failed with ModelLoadFailed and the exit code. Real: KServe's
// controller; simulated by KWOK: the Node and the container's end.
func TestAFailingPredictorIsObservedFailedModelLoadFailed(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{podAnnotations: map[string]string{"localcluster.metallo.dev/fail": "true"}})
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	r := s.observeUntil(attempt, "failed", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateFailed })
	d := detail[siteprotocol.ObserveDetail](t, r)
	if d.Reason != string(kservev1beta1.ModelLoadFailed) || d.ExitCode == nil {
		t.Fatalf("observe %s", r.Detail)
	}
	u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(testContext(t), domain.AttemptObjectName(attempt, ""), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var isvc kservev1beta1.InferenceService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &isvc); err != nil {
		t.Fatal(err)
	}
	if st := isvc.Status.ModelStatus.ModelRevisionStates; st == nil || st.TargetModelState != kservev1beta1.FailedToLoad {
		t.Fatalf("KServe's model status %+v", isvc.Status.ModelStatus)
	}
}

// A namespace quota that refuses the predictor's Pod: KServe reports only
// PredictorReady False (MinimumReplicasUnavailable), so observe reads the
// predictor Deployment KServe made and answers queued, quoting the quota's
// refusal ("exceeded quota"), never failed; once the quota is raised the
// Pod is created and the service becomes healthy when KServe reports it
// Ready. Real: ResourceQuota admission, KServe's controller, the Deployment
// and ReplicaSet controllers. Simulated by KWOK: the Node.
func TestAQuotaRefusingThePredictorPodIsQueuedAndHealthyOnceRaised(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{})
	s.quota(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "project-cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("100m")}}}, corev1.ResourceRequestsCPU)
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	notFailed := func(r siteprotocol.Result) siteprotocol.State {
		st := state(t, r)
		if st == siteprotocol.StateFailed {
			t.Fatalf("a quota wait failed: %s", r.Detail)
		}
		return st
	}
	r := s.observeUntil(attempt, "queued on the quota", func(r siteprotocol.Result) bool {
		return notFailed(r) == siteprotocol.StateQueued && strings.Contains(detail[siteprotocol.ObserveDetail](t, r).Message, "exceeded quota")
	})
	if d := detail[siteprotocol.ObserveDetail](t, r); d.Reason != kube.ReasonFailedCreate {
		t.Fatalf("queued on the quota: %s", r.Detail)
	}
	// The Runtime reads the refusal from the ReplicaSet; KServe's controller
	// reports it on the InferenceService once it has seen the Deployment's
	// new status (until then PredictorReady is Unknown, NewReplicaSetCreated):
	// wait for KServe, and never see it Ready meanwhile.
	var c *apis.Condition
	err := kubetest.Poll(testContext(t), 250*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(ctx, domain.AttemptObjectName(attempt, ""), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var isvc kservev1beta1.InferenceService
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &isvc); err != nil {
			return false, err
		}
		c = isvc.Status.GetCondition(kservev1beta1.PredictorReady)
		if c != nil && c.Status == corev1.ConditionTrue {
			return false, fmt.Errorf("PredictorReady is True while the quota refuses the Pod")
		}
		return c != nil && c.Status == corev1.ConditionFalse, nil
	})
	if err != nil {
		t.Fatalf("KServe's PredictorReady while the quota refuses the Pod: %+v (%v)", c, err)
	}
	q, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Get(testContext(t), "project-cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse("2")
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Update(testContext(t), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return notFailed(r) == siteprotocol.StateHealthy })
}
