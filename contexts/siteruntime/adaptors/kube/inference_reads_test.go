package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// argsCase is the inference arguments case
// (contexts/siteruntime/domain/testdata/inference-args.json): the
// InferenceService's name, the saved model arguments and every variant of
// a serving Pod's arguments, accepted or not.
type argsCase struct {
	Name     string   `json:"name"`
	Saved    []string `json:"saved"`
	Variants []struct {
		Case     string   `json:"case"`
		Accepted bool     `json:"accepted"`
		Args     []string `json:"args"`
	} `json:"variants"`
}

func inferenceArgsCase(t *testing.T) argsCase {
	t.Helper()
	raw, err := os.ReadFile("../../domain/testdata/inference-args.json")
	if err != nil {
		t.Fatal(err)
	}
	var c argsCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Variants) < 10 || !slices.Equal(c.Saved, caseModelArgs) {
		t.Fatalf("the case has %d variants and saved arguments %q; want the inference rendering case's %q", len(c.Variants), c.Saved, caseModelArgs)
	}
	return c
}

// predictorPod is a predictor Pod whose kserve-container has args.
func predictorPod(args []string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "storage-sidecar"}, {Name: kubeinference.PredictorContainer, Args: args}}}}
}

// The inference chain's Pod rule on every variant of the inference
// arguments case: the rendered InferenceService is the saved
// specification, and only the accepted variants pass; a Pod without
// kserve-container is a mismatch; a saved specification that is not an
// InferenceService with model arguments is an error, not a pass. No
// cluster.
func TestThePredictorPodRuleAppliesTheArgumentRuleToEveryVariantOfTheCase(t *testing.T) {
	c := inferenceArgsCase(t)
	attempt := strings.TrimPrefix(c.Name, "attempt-")
	id := application.ObjectIdentity{RunID: uuid.NewString(), AttemptID: attempt, MemberID: uuid.NewString(), ProjectID: uuid.NewString(), CommandID: uuid.NewString()}
	obj, err := kubeinference.NewRenderer(kube.NewRenderer(nil, nil)).RenderInferenceService(application.InferenceServiceSpec{Identity: id, Namespace: "project-x",
		ServiceAccount: "member-x", DeploymentMode: application.DeploymentModeStandard, ModelFormat: "huggingface", Runtime: kubetest.HuggingFaceRuntime,
		Args: c.Saved, Demand: map[string]int64{"cpu": 1000, "memory": 1 << 30}, WorkspaceClaim: domain.AttemptObjectName(attempt, domain.SuffixWorkspace)})
	if err != nil {
		t.Fatal(err)
	}
	root := siteprotocol.NativeRef{Kind: domain.KindInferenceService, Namespace: "project-x", Name: obj.Name, UID: "isvc-uid"}
	if root.Name != c.Name {
		t.Fatalf("rendered %s, the case names %s", root.Name, c.Name)
	}
	chain := kubeinference.PodChain()
	if chain.Main != kubeinference.PredictorContainer || !slices.Equal(chain.Links, []string{domain.KindReplicaSet, domain.KindDeployment, domain.KindInferenceService}) {
		t.Fatalf("chain %+v", chain)
	}
	for _, v := range c.Variants {
		m, err := chain.CheckPod(predictorPod(v.Args), root, obj.Spec)
		switch {
		case err != nil:
			t.Errorf("%s: %v", v.Case, err)
		case v.Accepted && m != "":
			t.Errorf("%s: refused: %s", v.Case, m)
		case !v.Accepted && !strings.Contains(m, "private inference argument rule"):
			t.Errorf("%s: %q passed (%q)", v.Case, v.Args, m)
		}
	}
	if m, err := chain.CheckPod(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Args: c.Variants[0].Args}}}}, root, obj.Spec); err != nil || !strings.Contains(m, "no container kserve-container") {
		t.Fatalf("a Pod without kserve-container: %q, %v", m, err)
	}
	for _, bad := range [][]byte{[]byte(`{"kind":`), []byte(`{"spec":{"predictor":{}}}`)} {
		if m, err := chain.CheckPod(predictorPod(c.Variants[0].Args), root, bad); err == nil {
			t.Fatalf("saved %s: no error (%q)", bad, m)
		}
	}
}

// startHealthyIsvc prepares and starts an inference Attempt and observes
// it until KServe reports it Ready; it returns the start's
// InferenceService reference.
func (s *site) startHealthyIsvc(attempt string) siteprotocol.NativeRef {
	s.t.Helper()
	want(s.t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	r := s.simple(siteprotocol.OpStart, attempt)
	want(s.t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool {
		return detail[siteprotocol.ObserveDetail](s.t, r).State == siteprotocol.StateHealthy
	})
	return r.NativeRefs[0]
}

// predictorPods waits until cond holds for the Attempt's Pods (the
// predictor's; no helper runs here) and returns them.
func (s *site) predictorPods(attempt, what string, cond func([]corev1.Pod) bool) []corev1.Pod {
	s.t.Helper()
	var pods []corev1.Pod
	if err := kubetest.Poll(testContext(s.t), 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		l, err := s.e.Client.CoreV1().Pods(s.ns).List(ctx, listByAttempt(attempt))
		if err != nil {
			return false, err
		}
		pods = l.Items
		return cond(pods), nil
	}); err != nil {
		s.t.Fatalf("attempt %s's predictor Pods never %s: %v (last %d Pods)", attempt, what, err, len(pods))
	}
	return pods
}

// wantMismatch wants a read refused native-identity-mismatch with nothing
// read, its message naming each of names.
func wantMismatch(t *testing.T, r siteprotocol.Result, names ...string) {
	t.Helper()
	wantNothingRead(t, r, siteprotocol.ReasonNativeIdentityMismatch)
	for _, n := range names {
		if !strings.Contains(r.Message, n) {
			t.Fatalf("message %q does not name %q", r.Message, n)
		}
	}
}

// predictGet is a proxy payload asking the model's readiness.
func predictGet(name string) map[string]any {
	return map[string]any{"method": "GET", "path": "/v1/models/" + name}
}

// On the local cluster, an inference Attempt KServe's controller made
// Ready: its own member's read-logs passes every check and reaches the
// predictor Pod's kserve-container (KWOK's Pod has no log: native-error);
// a second member of the same Project, with its own account, binding and
// execution.read, is refused attempt-conflict for read-logs and proxy;
// once the first member's grant is withdrawn from the policy file both
// are refused permission-denied at once; granted again, the read passes
// the checks again. Nothing is read or sent. Real: API server, RBAC,
// admission policies, KServe's controller, the policy file provider;
// simulated: the kubelet.
func TestInferenceReadsAreRefusedForAnotherMemberAndAfterTheGrantIsWithdrawn(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{})
	attempt := uuid.NewString()
	ref := s.startHealthyIsvc(attempt)
	own := s.readLogs(attempt, 1024)
	want(t, own, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if !strings.Contains(own.Message, "container kserve-container of Pod "+s.ns+"/"+ref.Name+kubeinference.PredictorSuffix) {
		t.Fatalf("the owner's read on KWOK: %s", own.Message)
	}

	other, otherBinding := uuid.NewString(), uuid.NewString()
	if err := siteagent.Member(testContext(t), s.e.Client, s.ns, other); err != nil {
		t.Fatal(err)
	}
	s.grantBoth(other, domain.ActionStart, domain.ActionRead, domain.ActionCancel)
	s.as(other, otherBinding, func() {
		r := s.execute(s.command(siteprotocol.OpBindMember, "", map[string]any{"party_id": other, "namespace": s.ns,
			"account": siteprotocol.MemberAccount(other), "binding_id": otherBinding, "revision": 1, "generation": 1}))
		want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied)
		wantNothingRead(t, s.readLogs(attempt, 1024), siteprotocol.ReasonAttemptConflict)
		wantNothingRead(t, s.proxyCmd(attempt, predictGet(ref.Name)), siteprotocol.ReasonAttemptConflict)
	})

	s.grant(domain.ActionStart, domain.ActionCancel) // execution.read withdrawn
	wantNothingRead(t, s.readLogs(attempt, 1024), siteprotocol.ReasonPermissionDenied)
	wantNothingRead(t, s.proxyCmd(attempt, predictGet(ref.Name)), siteprotocol.ReasonPermissionDenied)
	s.grant(domain.ActionStart, domain.ActionRead, domain.ActionCancel)
	want(t, s.readLogs(attempt, 1024), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
}

// A predictor whose Pod never becomes Ready has no ready endpoint: proxy
// fails endpoint-unavailable and nothing is sent. Real: API server,
// KServe's controller; simulated: the kubelet (KWOK keeps the Pod not
// Ready).
func TestProxyOfAPredictorWithoutAReadyPodIsEndpointUnavailable(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{podAnnotations: map[string]string{kubetest.AnnotationNeverReady: "true"}})
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)
	r := s.proxyCmd(attempt, map[string]any{"method": "POST", "path": "/v1/models/m:predict", "body_base64": "e30="})
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonEndpointUnavailable)
	if !strings.Contains(r.Message, "not Ready") {
		t.Fatalf("message %q", r.Message)
	}
}

// An inference Attempt's reads follow Pod → ReplicaSet → the predictor
// Deployment → the recorded InferenceService by UID: a ReplicaSet an
// administrator made (no controller) whose Pods carry the Attempt's
// labels refuses read-logs and proxy native-identity-mismatch, naming the
// ReplicaSet; so does a Deployment controlled by the recorded
// InferenceService (its UID) that is not its predictor
// attempt-<attempt>-predictor, naming both. Removed, the predictor's own
// Pod passes every check again (KWOK's Pod has no log: native-error).
// Real: API server, KServe's controller, the Deployment and ReplicaSet
// controllers, the garbage collector; simulated: the kubelet. Not guarded
// by the admission policies, which refuse the administrator's objects.
func TestInferenceReadsFollowThePredictorChainToTheRecordedInferenceService(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	ctx := testContext(t)
	attempt := uuid.NewString()
	ref := s.startHealthyIsvc(attempt)
	want(t, s.readLogs(attempt, 4096), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	predictor := ref.Name + kubeinference.PredictorSuffix
	dep, err := s.e.Client.AppsV1().Deployments(s.ns).Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged := func(name string) corev1.PodTemplateSpec {
		tpl := *dep.Spec.Template.DeepCopy()
		tpl.Labels["forged"] = name
		return tpl
	}
	gone := func(name string) {
		t.Helper()
		if err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
			l, err := s.e.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "forged=" + name})
			return err == nil && len(l.Items) == 0, nil
		}); err != nil {
			t.Fatalf("the Pods of %s stay: %v", name, err)
		}
	}
	fg := metav1.DeletePropagationForeground

	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-rs-" + attempt[:8], Labels: map[string]string{"forged": "rs"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"forged": "rs"}},
			Template: forged("rs")},
	}
	if _, err := s.e.Client.AppsV1().ReplicaSets(s.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the forged ReplicaSet's Pod", s.e.Pods(""), func(p *corev1.Pod) bool {
		c := metav1.GetControllerOf(p)
		return c != nil && c.Name == rs.Name
	})
	wantMismatch(t, s.readLogs(attempt, 4096), "ReplicaSet "+rs.Name)
	wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), "ReplicaSet "+rs.Name)
	if err := s.e.Client.AppsV1().ReplicaSets(s.ns).Delete(ctx, rs.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	gone("rs")

	other := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-" + attempt[:8], Labels: map[string]string{"forged": "deployment"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "serving.kserve.io/v1beta1", Kind: domain.KindInferenceService, Name: ref.Name,
				UID: types.UID(ref.UID), Controller: ptr(true)}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"forged": "deployment"}},
			Template: forged("deployment")},
	}
	if _, err := s.e.Client.AppsV1().Deployments(s.ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the other Deployment's Pod", s.e.Pods(""), func(p *corev1.Pod) bool {
		return p.Labels["forged"] == "deployment"
	})
	wantMismatch(t, s.readLogs(attempt, 4096), "Deployment "+other.Name, predictor)
	wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), "Deployment "+other.Name, predictor)
	if err := s.e.Client.AppsV1().Deployments(s.ns).Delete(ctx, other.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	gone("deployment")
	want(t, s.readLogs(attempt, 4096), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
}

// The recorded InferenceService deleted out of band and made again under
// its name (another UID; KServe's controller makes it a new predictor):
// read-logs and proxy are refused native-identity-mismatch, naming both
// UIDs, and read nothing. Real: API server, KServe's controller and
// webhooks, the garbage collector; simulated: the kubelet.
func TestInferenceReadsRefuseAnInferenceServiceMadeAgainUnderTheRecordedName(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	ctx := testContext(t)
	attempt := uuid.NewString()
	ref := s.startHealthyIsvc(attempt)
	isvcs := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns)
	live, err := isvcs.Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := isvcs.Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		_, err := isvcs.Get(ctx, ref.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the InferenceService stays: %v", err)
	}
	again := &unstructured.Unstructured{Object: map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "spec": live.Object["spec"]}}
	again.SetName(ref.Name)
	again.SetLabels(live.GetLabels())
	again.SetAnnotations(live.GetAnnotations())
	made, err := isvcs.Create(ctx, again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantMismatch(t, s.readLogs(attempt, 4096), string(made.GetUID()), ref.UID)
	wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), string(made.GetUID()), ref.UID)
}

// holdKServeServiceWrites installs, for the test's namespace, an admission
// policy of the test's own that refuses KServe's controller every create
// and update of a Service, and waits until the API server enforces it:
// KServe's controller would otherwise restore its predictor Service at
// once, and a change would not stay long enough to be read. It is
// removed when the test ends.
func (s *site) holdKServeServiceWrites() {
	s.t.Helper()
	ctx := testContext(s.t)
	name := "metallo-test-hold-" + s.ns
	policies := s.e.Client.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr(admissionv1.Fail),
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
		}}}},
		Validations: []admissionv1.Validation{{Expression: "request.userInfo.username != '" + kubetest.KServeController + "'",
			Message: "held by the test: KServe's controller may not write Services here"}},
	}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": s.ns}}},
	}}
	s.t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = policies.ValidatingAdmissionPolicyBindings().Delete(c, name, metav1.DeleteOptions{})
		_ = policies.ValidatingAdmissionPolicies().Delete(c, name, metav1.DeleteOptions{})
	})
	if _, err := policies.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	if _, err := policies.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	kserve := s.e.ClientFor(s.e.ImpersonateServiceAccount("kserve", "kserve-controller-manager"))
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hold-probe"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		_, err := kserve.CoreV1().Services(s.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "held by the test"), nil
	}); err != nil {
		s.t.Fatalf("the hold on KServe's Service writes is not enforced: %v", err)
	}
}

// proxy checks KServe's predictor Service live before anything is sent:
// its selector changed (the same Service, controlled by the InferenceService),
// its controller owner reference removed, and the Service made again
// under its name controlled by something else (the predictor Deployment)
// are each refused native-identity-mismatch, naming what differs; the
// Pods' read-logs is unaffected by the Service. KServe's controller is
// held off restoring the Service by an admission policy of the test's
// own (holdKServeServiceWrites). Real: API server, KServe's controller,
// the Deployment and ReplicaSet controllers; simulated: the kubelet (no
// request is sent: every case is decided before the send). Not guarded
// by the Site's admission policies, which refuse the administrator's
// changes.
func TestProxyRefusesAPredictorServiceThatIsNotKServesForTheRecordedInferenceService(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	ctx := testContext(t)
	attempt := uuid.NewString()
	ref := s.startHealthyIsvc(attempt)
	predictor := ref.Name + kubeinference.PredictorSuffix
	services := s.e.Client.CoreV1().Services(s.ns)
	svc, err := services.Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := metav1.GetControllerOf(svc); c == nil || string(c.UID) != ref.UID || svc.Spec.Selector["app"] != "isvc."+predictor || len(svc.Spec.Selector) != 1 {
		t.Fatalf("KServe's predictor Service: controller %+v, selector %v", c, svc.Spec.Selector)
	}
	s.holdKServeServiceWrites()
	update := func(edit func(*corev1.Service)) {
		t.Helper()
		cur, err := services.Get(ctx, predictor, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(cur)
		if _, err := services.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	update(func(c *corev1.Service) { c.Spec.Selector = map[string]string{kube.LabelAttempt: attempt} })
	wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), "selects", "isvc."+predictor)
	want(t, s.readLogs(attempt, 4096), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	update(func(c *corev1.Service) { c.Spec.Selector = svc.Spec.Selector })

	update(func(c *corev1.Service) { c.OwnerReferences = nil })
	wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), "no controller owner reference", ref.UID)

	if err := services.Delete(ctx, predictor, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		_, err := services.Get(ctx, predictor, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the predictor Service stays: %v", err)
	}
	dep, err := s.e.Client.AppsV1().Deployments(s.ns).Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: predictor, Labels: svc.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: svc.Spec.Selector, Ports: svc.Spec.Ports}}
	made, err := services.Create(ctx, again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), string(made.UID), "Deployment "+dep.Name, ref.UID)
}

// servingRuntimes is KServe's namespaced ServingRuntime resource.
var servingRuntimes = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1alpha1", Resource: "servingruntimes"}

// The private inference argument rule on the cluster, for every variant
// of the inference arguments case: the Attempt (named as the case's
// InferenceService) is prepared with the case's saved model arguments and
// made Ready by KServe's controller on the pinned runtime; then, for each
// variant, an administrator points the live InferenceService (the same
// UID) at a ServingRuntime of the namespace that adds no arguments of its
// own, with the variant as its model arguments, and KServe's controller
// rolls the predictor Deployment out to Pods whose kserve-container runs
// exactly those arguments. Every object of the chain stays exact, so only
// the rule decides: a rejected variant refuses read-logs and proxy
// native-identity-mismatch, naming the rule, with nothing read or sent;
// an accepted one passes every check (KWOK's Pod has no log:
// native-error). Real: API server, KServe's controller and webhooks, the
// Deployment and ReplicaSet controllers; simulated: the kubelet. Not
// guarded by the admission policies (the administrator changes the
// InferenceService).
func TestInferenceReadsRefuseAPredictorPodForEveryArgumentVariantTheRuleRejects(t *testing.T) {
	t.Parallel()
	c := inferenceArgsCase(t)
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	ctx := testContext(t)
	attempt := strings.TrimPrefix(c.Name, "attempt-")
	ref := s.startHealthyIsvc(attempt)
	if ref.Name != c.Name {
		t.Fatalf("the InferenceService is %s, the case's %s", ref.Name, c.Name)
	}
	pods := s.predictorPods(attempt, "one", func(p []corev1.Pod) bool { return len(p) == 1 })
	if err := domain.CheckInferenceArgs(containerArgs(t, pods[0]), ref.Name, domain.InferenceFormatHuggingFace, c.Saved); err != nil {
		t.Fatalf("KServe's own predictor Pod breaks the rule: %v", err)
	}

	rt := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
		"metadata": map[string]any{"name": "no-prefix"},
		"spec": map[string]any{
			"supportedModelFormats": []any{map[string]any{"name": "huggingface", "version": "1", "autoSelect": false}},
			"protocolVersions":      []any{"v1"},
			"containers":            []any{map[string]any{"name": kubeinference.PredictorContainer, "image": "registry.example/model-server@sha256:" + strings.Repeat("0", 64)}},
		}}}
	if _, err := s.e.Dynamic.Resource(servingRuntimes).Namespace(s.ns).Create(ctx, rt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	isvcs := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns)
	for _, v := range c.Variants {
		args := v.Args
		if args == nil {
			args = []string{}
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"predictor": map[string]any{"model": map[string]any{"runtime": "no-prefix", "args": args}}}})
		if _, err := isvcs.Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: %v", v.Case, err)
		}
		s.predictorPods(attempt, "all run "+fmt.Sprintf("%q", v.Args), func(p []corev1.Pod) bool {
			if len(p) == 0 {
				return false
			}
			for _, pod := range p {
				if !slices.Equal(containerArgs(t, pod), v.Args) {
					return false
				}
			}
			return true
		})
		live, err := isvcs.Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil || string(live.GetUID()) != ref.UID {
			t.Fatalf("%s: the InferenceService is %v (%v); want the recorded uid %s", v.Case, live, err, ref.UID)
		}
		if v.Accepted {
			r := s.readLogs(attempt, 1024)
			want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
			continue
		}
		wantMismatch(t, s.readLogs(attempt, 1024), "private inference argument rule")
		wantMismatch(t, s.proxyCmd(attempt, predictGet(ref.Name)), "private inference argument rule")
		t.Logf("%s: refused", v.Case)
	}
}

// containerArgs is the args of pod's kserve-container (nil without one).
func containerArgs(t *testing.T, pod corev1.Pod) []string {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == kubeinference.PredictorContainer {
			return c.Args
		}
	}
	t.Fatalf("Pod %s has no %s: %+v", pod.Name, kubeinference.PredictorContainer, pod.Spec.Containers)
	return nil
}
