package kubetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// newInferenceService is a huggingface InferenceService in KServe's Standard mode on the local
// cluster's huggingface ClusterServingRuntime, with one argument of its own; annotations reach
// its predictor's Pods (KWOK reads them).
func newInferenceService(name string, annotations map[string]string) *unstructured.Unstructured {
	ann := map[string]any{kubetest.KServeDeploymentMode: "Standard"}
	for k, v := range annotations {
		ann[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.kserve.io/v1beta1",
		"kind":       "InferenceService",
		"metadata":   map[string]any{"name": name, "annotations": ann},
		"spec": map[string]any{"predictor": map[string]any{
			"minReplicas": int64(1),
			"model": map[string]any{
				"modelFormat": map[string]any{"name": "huggingface"},
				"runtime":     kubetest.HuggingFaceRuntime,
				"storageUri":  "pvc://models/tiny-llm",
				"args":        []any{"--max_model_len=512"},
				"resources": map[string]any{
					"requests": map[string]any{"cpu": "1", "memory": "2Gi"},
					"limits":   map[string]any{"cpu": "1", "memory": "2Gi"},
				},
			},
		}},
	}}
}

func createInferenceService(t *testing.T, e *kubetest.Env, isvc *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).Create(ctx(t), isvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create InferenceService %s: %v", isvc.GetName(), err)
	}
	return out
}

// inferenceServices lists and watches the test namespace's InferenceServices.
func inferenceServices(e *kubetest.Env) cache.ListerWatcher {
	ri := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: ri.Watch,
	}
}

func waitForInferenceService(t *testing.T, e *kubetest.Env, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return kubetest.Until(t, long, fmt.Sprintf("InferenceService %s: %s", name, what), inferenceServices(e), func(u *unstructured.Unstructured) bool {
		return u.GetName() == name && cond(u)
	})
}

// isvcCondition is the status of the InferenceService's condition (Ready, PredictorReady, ...).
func isvcCondition(u *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			return s, r
		}
	}
	return "", ""
}

func str(u *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, path...)
	return s
}

func statusJSON(u *unstructured.Unstructured) string {
	b, _ := json.Marshal(u.Object["status"])
	return string(b)
}

// checkOwnedByInferenceService fails unless meta has exactly one controller owner reference,
// to the InferenceService.
func checkOwnedByInferenceService(t *testing.T, what string, meta metav1.Object, isvc *unstructured.Unstructured) {
	t.Helper()
	ref := metav1.GetControllerOf(meta)
	if ref == nil || ref.APIVersion != "serving.kserve.io/v1beta1" || ref.Kind != "InferenceService" ||
		ref.Name != isvc.GetName() || ref.UID != isvc.GetUID() {
		t.Fatalf("%s: want a controller owner reference to InferenceService %s (uid %s), got %+v", what, isvc.GetName(), isvc.GetUID(), meta.GetOwnerReferences())
	}
}

// An InferenceService created by the administrator in a fresh namespace is reconciled by
// KServe's own controller (v0.16.0, Standard mode) into the Deployment and the Service
// <name>-predictor, each with a controller owner reference to it and created by the controller's
// service account (audit log); the predictor's kserve-container runs the huggingface runtime's
// arguments, then the InferenceService's own. It becomes Ready once its Pod is Ready, and one
// whose Pod never becomes Ready stays not Ready with its predictor unavailable. Real: KServe's
// reconciler and webhooks, the Deployment controller, the scheduler, RBAC, audit. Simulated:
// KWOK makes the Pods Running and Ready (or, annotated never-ready, not Ready); no model server
// runs.
func TestKServeReconcilesInferenceServiceIntoPredictorReadyWithItsPod(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	isvc := createInferenceService(t, e, newInferenceService("tiny-llm", nil))
	createInferenceService(t, e, newInferenceService("never-ready", map[string]string{kubetest.AnnotationNeverReady: "true"}))

	// KServe marks the model Loaded in the reconcile after the one that found it Ready.
	ready := waitForInferenceService(t, e, "tiny-llm", "Ready and Loaded", func(u *unstructured.Unstructured) bool {
		s, _ := isvcCondition(u, "Ready")
		return s == "True" && str(u, "status", "modelStatus", "states", "targetModelState") == "Loaded"
	})
	if mode := str(ready, "status", "deploymentMode"); mode != "Standard" {
		t.Errorf("status.deploymentMode: want Standard, got %q", mode)
	}
	if f := ready.GetFinalizers(); len(f) != 1 || f[0] != kubetest.KServeFinalizer {
		t.Errorf("finalizers: want [%s], got %v", kubetest.KServeFinalizer, f)
	}

	d, err := e.Client.AppsV1().Deployments(e.Namespace).Get(c, "tiny-llm-predictor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("predictor Deployment: %v", err)
	}
	checkOwnedByInferenceService(t, "Deployment tiny-llm-predictor", d, isvc)
	if d.Status.AvailableReplicas != 1 {
		t.Errorf("Deployment tiny-llm-predictor: want 1 available replica when the InferenceService is Ready, got %+v", d.Status)
	}
	var server *corev1.Container
	for i, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == "kserve-container" {
			server = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if server == nil {
		t.Fatalf("Deployment tiny-llm-predictor: no kserve-container in %+v", d.Spec.Template.Spec.Containers)
	}
	wantArgs := []string{"--model_name=tiny-llm", "--backend=huggingface", "--max_model_len=512"}
	if strings.Join(server.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("kserve-container args: want %q, got %q", wantArgs, server.Args)
	}

	svc, err := e.Client.CoreV1().Services(e.Namespace).Get(c, "tiny-llm-predictor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("predictor Service: %v", err)
	}
	checkOwnedByInferenceService(t, "Service tiny-llm-predictor", svc, isvc)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector["app"] != "isvc.tiny-llm-predictor" {
		t.Errorf("Service tiny-llm-predictor: want ClusterIP selecting app=isvc.tiny-llm-predictor, got %s %v", svc.Spec.Type, svc.Spec.Selector)
	}

	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(c, metav1.ListOptions{LabelSelector: "app=isvc.tiny-llm-predictor"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("predictor Pods: want 1, got %d (err %v)", len(pods.Items), err)
	}
	podReady := false
	for _, cond := range pods.Items[0].Status.Conditions {
		podReady = podReady || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
	}
	if !podReady {
		t.Errorf("the InferenceService is Ready but its Pod %s is not", pods.Items[0].Name)
	}

	for _, r := range []string{"deployments", "services"} {
		if got := e.WhoCreated(r, e.Namespace, "tiny-llm-predictor").Actor(); got != kubetest.KServeController {
			t.Errorf("audit: %s tiny-llm-predictor created by %q, want KServe's controller %q", r, got, kubetest.KServeController)
		}
	}
	if got := e.WhoCreated("inferenceservices", e.Namespace, "tiny-llm").Actor(); got != kubetest.AdminUser {
		t.Errorf("audit: InferenceService created by %q, want %q", got, kubetest.AdminUser)
	}

	// The never-ready predictor: its Pod runs but is not Ready, so KServe reports PredictorReady
	// False and the InferenceService not Ready.
	kubetest.Until(t, long, "the never-ready predictor's Pod Running", e.Pods(""), func(p *corev1.Pod) bool {
		return p.Labels["app"] == "isvc.never-ready-predictor" && p.Status.Phase == corev1.PodRunning
	})
	unready := waitForInferenceService(t, e, "never-ready", "PredictorReady False", func(u *unstructured.Unstructured) bool {
		s, _ := isvcCondition(u, "PredictorReady")
		return s == "False"
	})
	if s, _ := isvcCondition(unready, "Ready"); s == "True" {
		t.Errorf("InferenceService never-ready is Ready: %s", statusJSON(unready))
	}
	nd, err := e.Client.AppsV1().Deployments(e.Namespace).Get(c, "never-ready-predictor", metav1.GetOptions{})
	if err != nil || nd.Status.AvailableReplicas != 0 {
		t.Errorf("Deployment never-ready-predictor: want 0 available replicas, got %+v (err %v)", nd.Status, err)
	}
}

// A predictor whose kserve-container terminates with reason Error is reported by KServe itself:
// modelStatus FailedToLoad, transitionStatus BlockedByFailedLoad, lastFailureInfo ModelLoadFailed
// with the exit code, and the InferenceService not Ready. Real: KServe's reconciler, which reads
// the Pod's container status. Simulated: KWOK runs the Pod, Ready, for one second, then
// terminates its containers with exit code 1 and reason Error (AnnotationFail).
func TestKServeReportsFailedToLoadWhenPredictorContainerEndsWithError(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	createInferenceService(t, e, newInferenceService("crashes", map[string]string{kubetest.AnnotationFail: "true"}))

	// KServe may record FailedToLoad in a reconcile that still saw the Deployment available; the
	// next one, on the Deployment's loss of its available replica, makes it not Ready.
	failed := waitForInferenceService(t, e, "crashes", "FailedToLoad and not Ready", func(u *unstructured.Unstructured) bool {
		s, _ := isvcCondition(u, "Ready")
		return str(u, "status", "modelStatus", "states", "targetModelState") == "FailedToLoad" && s == "False"
	})
	if got := str(failed, "status", "modelStatus", "transitionStatus"); got != "BlockedByFailedLoad" {
		t.Errorf("transitionStatus: want BlockedByFailedLoad, got %q", got)
	}
	info, _, _ := unstructured.NestedMap(failed.Object, "status", "modelStatus", "lastFailureInfo")
	if info["reason"] != "ModelLoadFailed" || fmt.Sprint(info["exitCode"]) != "1" {
		t.Errorf("lastFailureInfo: want reason ModelLoadFailed, exitCode 1, got %v", info)
	}
	if s, reason := isvcCondition(failed, "PredictorReady"); s != "False" {
		t.Errorf("PredictorReady: want False, got %q %q (%s)", s, reason, statusJSON(failed))
	}
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx(t), metav1.ListOptions{LabelSelector: "app=isvc.crashes-predictor"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("predictor Pods: want 1, got %d (err %v)", len(pods.Items), err)
	}
	for _, cs := range pods.Items[0].Status.ContainerStatuses {
		if cs.Name == "kserve-container" && (cs.State.Terminated == nil || cs.State.Terminated.Reason != "Error") {
			t.Errorf("kserve-container: want terminated with reason Error, got %+v", cs.State)
		}
	}
}

// KServe's validating webhook refuses an update that changes serving.kserve.io/deploymentMode
// once the controller recorded the mode, with KServe's own message; the object is unchanged.
// Real: the API server calling KServe's webhook over TLS (certificate from the cluster CA).
func TestKServeWebhookRefusesDeploymentModeChange(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	createInferenceService(t, e, newInferenceService("fixed-mode", nil))
	waitForInferenceService(t, e, "fixed-mode", "deployment mode recorded", func(u *unstructured.Unstructured) bool {
		return str(u, "status", "deploymentMode") == "Standard"
	})
	ri := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace)
	patch := []byte(`{"metadata":{"annotations":{"serving.kserve.io/deploymentMode":"Knative"}}}`)
	_, err := ri.Patch(c, "fixed-mode", types.MergePatchType, patch, metav1.PatchOptions{})
	want := `admission webhook "inferenceservice.kserve-webhook-server.validator" denied the request: update rejected: deploymentMode cannot be changed from 'Standard' to 'Knative'`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("change deploymentMode: want %q, got %v", want, err)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("change deploymentMode: want 403 Forbidden, got %v", err)
	}
	got, err := ri.Get(c, "fixed-mode", metav1.GetOptions{})
	if err != nil || got.GetAnnotations()[kubetest.KServeDeploymentMode] != "Standard" {
		t.Fatalf("after the refused update: want the annotation Standard, got %v (err %v)", got.GetAnnotations(), err)
	}
}

// The clean-up of a test namespace removes its InferenceServices through KServe's controller,
// and finalizes as the cluster administrator one that hangs: an object created with the legacy
// annotation RawDeployment, which KServe records as Standard, so that its webhook refuses every
// update of it, the controller's own finalizer removal included (KServe #5885; the audit log
// shows the refused patch). Real: KServe's controller, webhook and finalizer; the audit log.
func TestCleanupRemovesInferenceServicesAndFinalizesLegacyOnesThatHang(t *testing.T) {
	t.Parallel()
	var ns string
	var e *kubetest.Env
	t.Run("test", func(t *testing.T) {
		e = kubetest.New(t)
		ns = e.Namespace
		createInferenceService(t, e, newInferenceService("standard", nil))
		legacy := newInferenceService("legacy", nil)
		legacy.SetAnnotations(map[string]string{kubetest.KServeDeploymentMode: "RawDeployment"})
		createInferenceService(t, e, legacy)
		for _, name := range []string{"standard", "legacy"} {
			waitForInferenceService(t, e, name, "Ready", func(u *unstructured.Unstructured) bool {
				s, _ := isvcCondition(u, "Ready")
				return s == "True"
			})
		}
		got := waitForInferenceService(t, e, "legacy", "mode recorded", func(u *unstructured.Unstructured) bool { return true })
		if !kubetest.LegacyDeploymentMode(got) || str(got, "status", "deploymentMode") != "Standard" {
			t.Fatalf("legacy InferenceService: want annotation RawDeployment recorded as Standard, got %v %q", got.GetAnnotations(), str(got, "status", "deploymentMode"))
		}
		// KServe's controller cannot remove its finalizer from the deleted legacy object: its
		// patch is refused by KServe's webhook.
		bg := metav1.DeletePropagationBackground
		if err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(ns).Delete(ctx(t), "legacy", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		refused, err := e.AuditLog().Find(c, func(ev kubetest.AuditEvent) bool {
			r := ev.ObjectRef
			return ev.Verb == "patch" && r != nil && r.Resource == "inferenceservices" && r.Namespace == ns &&
				r.Name == "legacy" && ev.Actor() == kubetest.KServeController && ev.Code() == 403
		})
		if err != nil {
			t.Fatalf("want KServe's controller's finalizer removal refused (403) in the audit log: %v", err)
		}
		t.Logf("refused at %s: %s", refused.Received.Format(time.RFC3339Nano), refused.RequestURI)
		hung, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(ns).Get(ctx(t), "legacy", metav1.GetOptions{})
		if err != nil || hung.GetDeletionTimestamp() == nil || len(hung.GetFinalizers()) == 0 {
			t.Fatalf("legacy InferenceService: want it deleted and still holding KServe's finalizer, got %v (err %v)", hung, err)
		}
	})
	if t.Failed() {
		return
	}
	// The sub-test's clean-up ran: no InferenceService is left, and the namespace is going.
	c := ctx(t)
	left, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(ns).List(c, metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Fatalf("after clean-up: want no InferenceService in %s, got %d (err %v)", ns, len(left.Items), err)
	}
	namespaces := cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "namespaces", "", fields.OneTermEqualSelector("metadata.name", ns))
	kubetest.UntilGone(t, long, "namespace "+ns, namespaces, &corev1.Namespace{}, "", ns)
	// The harness finalized the legacy object as the administrator and left the other one to
	// KServe's controller (it fails the test when it has to finalize one that is not legacy).
	c2, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	byAdmin := func(name string) func(kubetest.AuditEvent) bool {
		return func(ev kubetest.AuditEvent) bool {
			r := ev.ObjectRef
			return ev.Verb == "patch" && r != nil && r.Resource == "inferenceservices" && r.Namespace == ns &&
				r.Name == name && ev.Actor() == kubetest.AdminUser && ev.Code() == 200
		}
	}
	if _, err := e.AuditLog().Find(c2, byAdmin("legacy")); err != nil {
		t.Errorf("want the administrator's patch of the legacy InferenceService in the audit log: %v", err)
	}
	events, err := e.AuditLog().Events()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if byAdmin("standard")(ev) {
			t.Errorf("the harness patched InferenceService standard, which KServe's controller finalizes: %+v", ev)
		}
	}
}
