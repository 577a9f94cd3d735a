package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"

	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/auditlog"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/irismodel"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// The ClusterServingRuntimes the demo's Runtime pins per model format
// (--serving-runtimes): huggingFaceRuntime, the local cluster's stand-in
// for KServe's huggingface server (the httpservice image, an echo), and
// sklearnRuntime, whose sklearnserver image loads a member's scikit-learn
// model from the workspace (deploy/localcluster/README.md#the-real-nodes-model-server).
// The inference step serves the member's model on sklearnRuntime.
const (
	huggingFaceRuntime = "metallo-httpservice"
	sklearnRuntime     = "metallo-sklearnserver"
	// sklearnServerImage names the sklearnserver image in the real node's
	// images (cluster.json).
	sklearnServerImage = "sklearnserver"
)

// servingRuntimes is the Runtime's --serving-runtimes (format=runtime,…).
const servingRuntimes = "huggingface=" + huggingFaceRuntime + ",sklearn=" + sklearnRuntime

// kserveController is the user KServe's controller acts as in the local
// cluster: its own service account (deploy/localcluster/README.md), so the
// audit log tells what it created from what a member created.
const kserveController = "system:serviceaccount:kserve:kserve-controller-manager"

// demoModelArgs are the inference Attempts' saved model arguments, which
// the runtime's --model_name=<name> precedes: the model's directory in the
// checked-out workspace (the checkout is repo/ of the workspace, mounted at
// /workspace).
var demoModelArgs = []string{"--model_dir=/workspace/repo/" + irismodel.Dir}

var (
	inferenceServices      = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}
	clusterServingRuntimes = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1alpha1", Resource: "clusterservingruntimes"}
)

// inferenceService is the demo's inference service
// (docs/site-runtime.md#inference-services-on-kserve): an Attempt of
// family inference, model format sklearn, prepared at the repository's
// exact commit — the workspace helper checks the member's model (an LFS
// object) out into its workspace —, started — the InferenceService
// created as the member —, observed until KServe's own controller has
// made its predictor on the real node and reports it Ready (healthy), its
// predictor's log read and the model asked for predictions of known iris
// samples through the stream as the member (read-logs, proxy), cancelled
// and observed gone. A second Attempt at the branch head, whose checkout
// lacks the model, is observed until its model server has exited: failed /
// ModelLoadFailed with the container's real exit code. Both are cleaned up.
// Its commands go to the same stream as the others'.
func (d *demo) inferenceService(ctx context.Context, ns, project, member, binding string) error {
	d.section("An inference service on KServe: the member's model from its LFS workspace, Ready through KServe's controller, asked through the stream; a commit without it fails to load")
	dyn, err := dynamic.NewForConfig(d.adminCfg)
	if err != nil {
		return err
	}
	image, rtArgs, err := d.sklearnRuntimeImage(ctx, dyn)
	if err != nil {
		return err
	}
	d.say("the Runtime pins --serving-runtimes %s; this step serves format sklearn on %s,", servingRuntimes, sklearnRuntime)
	d.say("image %s (the local cluster's scikit-learn model server, Debian's python3-sklearn), args %q", image, rtArgs)

	var sents []sent
	attemptOf := func() func(siteprotocol.Operation, any) (siteprotocol.Result, error) {
		run, attempt := uuid.NewString(), uuid.NewString()
		return func(op siteprotocol.Operation, payload any) (siteprotocol.Result, error) {
			s, err := d.send(ctx, siteprotocol.FamilyInference, run, attempt, member, project, binding, op, payload)
			if err == nil {
				sents = append(sents, s)
			}
			return s.result, err
		}
	}
	prepare := func(commit string) map[string]any {
		return map[string]any{"workspace_size_bytes": 64 << 20, "service_kind": "inference", "port": 8080,
			"repository": d.git.repositoryAt(commit),
			"model":      map[string]any{"format": irismodel.Format, "args": demoModelArgs},
			"demand":     map[string]int64{"cpu": 200, "memory": 256 << 20}}
	}
	do := attemptOf()
	r, err := do(siteprotocol.OpPrepare, prepare(d.git.exact))
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("prepare (inference)", r, err)
	}
	d.say("prepare checked \"model v1\" (%s) out into the Attempt's workspace with the workspace helper, as the batch prepare did,", d.git.exact[:12])
	d.say("%s included (an LFS object), rendered the InferenceService from KServe v0.16.0's types and saved it in services.sqlite", irismodel.Path)
	start, err := do(siteprotocol.OpStart, nil)
	if err != nil || start.Outcome != siteprotocol.OutcomeSucceeded || len(start.NativeRefs) != 1 || start.NativeRefs[0].Kind != domain.KindInferenceService {
		return failed("start (inference)", start, err)
	}
	ref := start.NativeRefs[0]
	began := time.Now()
	if err := observeHealthy(ctx, do, "inference", 90); err != nil {
		return err
	}
	d.say("healthy %s after start: KServe reports the InferenceService Ready", time.Since(began).Round(time.Second))
	predictor, err := d.showInferenceService(ctx, dyn, ref, image)
	if err != nil {
		return err
	}
	if err := d.readPredictorLog(ctx, do, ref); err != nil {
		return err
	}
	if err := d.askModel(ctx, do, ref, predictor); err != nil {
		return err
	}
	if r, err := do(siteprotocol.OpCancel, nil); err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("cancel (inference)", r, err)
	}
	r, err = do(siteprotocol.OpObserve, nil)
	if err != nil || r.Reason != siteprotocol.ReasonNativeMissing {
		return failed("observe after cancel (inference)", r, err)
	}
	if _, err := d.admin.AppsV1().Deployments(ref.Namespace).Get(ctx, predictor, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("the predictor Deployment %s after cancel: %v (want it gone)", predictor, err)
	}
	d.say("cancel deleted the InferenceService by its UID, in the foreground, as the Runtime; KServe's controller removed its")
	d.say("finalizer and the garbage collector the predictor it owned; observe reports it gone")
	if r, err := do(siteprotocol.OpCleanup, nil); err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("cleanup (inference)", r, err)
	}
	d.say("cleanup removed the Attempt's workspace")

	bad := attemptOf()
	if err := d.modelLoadFailure(ctx, bad, prepare(d.git.head)); err != nil {
		return err
	}
	for _, s := range sents {
		rec, err := d.acknowledged(ctx, s.id)
		if err != nil {
			return err
		}
		if rec.Digest != s.result.Digest {
			return fmt.Errorf("command %d: the recorded result changed", s.sequence)
		}
	}
	d.say("its %d results acknowledged by the execution role (exact bytes, digest-checked)", len(sents))
	return nil
}

// sklearnRuntimeImage reads the ClusterServingRuntime sklearnRuntime from
// the API server: it must serve format sklearn with the real node's
// sklearnserver image (the one cluster.json names, when it names one). It
// returns the image and the runtime's arguments.
func (d *demo) sklearnRuntimeImage(ctx context.Context, dyn dynamic.Interface) (string, []string, error) {
	rt, err := dyn.Resource(clusterServingRuntimes).Get(ctx, sklearnRuntime, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("ClusterServingRuntime %s (installed by make cluster-up with the real node): %w", sklearnRuntime, err)
	}
	containers, _, _ := unstructured.NestedSlice(rt.Object, "spec", "containers")
	formats, _, _ := unstructured.NestedSlice(rt.Object, "spec", "supportedModelFormats")
	var image, format string
	var args []string
	if len(containers) == 1 {
		c, _ := containers[0].(map[string]any)
		image, _, _ = unstructured.NestedString(c, "image")
		args, _, _ = unstructured.NestedStringSlice(c, "args")
	}
	if len(formats) == 1 {
		f, _ := formats[0].(map[string]any)
		format, _, _ = unstructured.NestedString(f, "name")
	}
	known := d.realNode.Images[sklearnServerImage]
	if format != irismodel.Format || image == "" || (known != "" && image != known) || !strings.Contains(image, "/"+sklearnServerImage+"@sha256:") {
		return "", nil, fmt.Errorf("ClusterServingRuntime %s serves %q with %q, not format %s with the real node's %s image %q (make cluster-down, then make cluster-up)",
			sklearnRuntime, format, image, irismodel.Format, sklearnServerImage, known)
	}
	return image, args, nil
}

// modelLoadFailure prepares and starts, by do, an inference Attempt whose
// checkout lacks the model (payload), observes it until failed, checks
// ModelLoadFailed and the model server's exit code (3, the sklearnserver's
// for a model it cannot load) against the predictor Pod's own container
// status on the real node, and cleans it up.
func (d *demo) modelLoadFailure(ctx context.Context, do func(siteprotocol.Operation, any) (siteprotocol.Result, error), payload map[string]any) error {
	r, err := do(siteprotocol.OpPrepare, payload)
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("prepare (inference without its model)", r, err)
	}
	d.say("a second Attempt at \"model v2\" (%s), whose checkout has no %s: prepared, then started", d.git.head[:12], irismodel.Path)
	start, err := do(siteprotocol.OpStart, nil)
	if err != nil || start.Outcome != siteprotocol.OutcomeSucceeded || len(start.NativeRefs) != 1 {
		return failed("start (inference without its model)", start, err)
	}
	ref := start.NativeRefs[0]
	st, err := observeUntil(ctx, do, "the inference service without its model did not fail", 90, siteprotocol.StateFailed, siteprotocol.StateHealthy)
	if err != nil {
		return err
	}
	if st.Reason != string(kservev1beta1.ModelLoadFailed) || st.ExitCode == nil || *st.ExitCode != sklearnModelExit {
		return fmt.Errorf("observe of the Attempt without its model: %+v; want failed / %s with exit code %d", st, kservev1beta1.ModelLoadFailed, sklearnModelExit)
	}
	// The same exit, from the predictor Pod's own status on the real node.
	predictor := ref.Name + kubeinference.PredictorSuffix
	dep, err := d.admin.AppsV1().Deployments(ref.Namespace).Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the predictor Deployment %s: %w", predictor, err)
	}
	pods, err := d.admin.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
	if err != nil {
		return err
	}
	var seen string
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if t == nil {
				t = cs.LastTerminationState.Terminated
			}
			if cs.Name == kubeinference.PredictorContainer && t != nil && t.ExitCode == *st.ExitCode && p.Spec.NodeName == d.realNode.Name {
				seen = fmt.Sprintf("Pod %s on %s: container %s terminated %s, exit code %d, %d restarts, termination message %q",
					p.Name, p.Spec.NodeName, cs.Name, t.Reason, t.ExitCode, cs.RestartCount, strings.TrimSpace(t.Message))
			}
		}
	}
	if seen == "" {
		return fmt.Errorf("no predictor Pod of %s on the real node shows the exit code %d observe answered", ref.Name, *st.ExitCode)
	}
	d.say("observe: %s / %s, exit code %d, finished %s:", st.State, st.Reason, *st.ExitCode, st.FinishedAt)
	d.say("  %s", st.Message)
	d.say("the API server's own record of it: %s", seen)
	r, err = do(siteprotocol.OpCleanup, nil)
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("cleanup (inference without its model)", r, err)
	}
	d.say("no KWOK node or annotation in either: the model server ran, and exited, in containerd on the real node; cleaned up")
	return nil
}

// sklearnModelExit is the sklearnserver's exit status for a model it
// cannot load (deploy/images/sklearnserver).
const sklearnModelExit = 3

// showInferenceService shows, from the API server itself, the
// InferenceService the start created and what KServe's controller made of
// it: who created each (the audit log), the predictor Deployment's
// owner, its Pod on the real node and the Pod's arguments under the
// private inference argument rule (the runtime's image). It returns the
// predictor's name.
func (d *demo) showInferenceService(ctx context.Context, dyn dynamic.Interface, ref siteprotocol.NativeRef, image string) (string, error) {
	isvc, err := dyn.Resource(inferenceServices).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if string(isvc.GetUID()) != ref.UID {
		return "", fmt.Errorf("InferenceService %s has uid %s; the start result names %s", ref.Name, isvc.GetUID(), ref.UID)
	}
	mode, _, _ := unstructured.NestedString(isvc.Object, "status", "deploymentMode")
	url, _, _ := unstructured.NestedString(isvc.Object, "status", "url")
	d.say("InferenceService %s/%s uid %s: deployment mode %s, annotation %s=%s, cluster-local URL %s", ref.Namespace, ref.Name, ref.UID,
		mode, kubeinference.AnnotationDeploymentMode, isvc.GetAnnotations()[kubeinference.AnnotationDeploymentMode], url)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	audit := &auditlog.Log{Path: d.audit}
	ev, err := audit.Creation(actx, "inferenceservices", ref.Namespace, ref.Name)
	if err != nil {
		return "", err
	}
	sa, _, _ := unstructured.NestedString(isvc.Object, "spec", "predictor", "serviceAccountName")
	member := kubeconfig.ServiceAccountUser(ref.Namespace, sa)
	if ev.Actor() != member || ev.User.Username != siteagent.RuntimeUser() {
		return "", fmt.Errorf("audit log: the InferenceService was created by %q as %q; want %s impersonated by the Runtime", ev.User.Username, ev.Actor(), member)
	}
	d.say("audit log: created by %s, authenticated as %s (the Runtime impersonating the member)", ev.Actor(), ev.User.Username)

	predictor := ref.Name + kubeinference.PredictorSuffix
	dep, err := d.admin.AppsV1().Deployments(ref.Namespace).Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the predictor Deployment %s: %w", predictor, err)
	}
	owner := metav1.GetControllerOf(dep)
	if owner == nil || owner.Kind != domain.KindInferenceService || string(owner.UID) != ref.UID {
		return "", fmt.Errorf("the predictor Deployment %s is controlled by %+v, not InferenceService %s", predictor, owner, ref.UID)
	}
	svc, err := d.admin.CoreV1().Services(ref.Namespace).Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the predictor Service %s: %w", predictor, err)
	}
	for _, res := range []string{"deployments", "services"} {
		ev, err := audit.Creation(actx, res, ref.Namespace, predictor)
		if err != nil {
			return "", err
		}
		if ev.Actor() != kserveController {
			return "", fmt.Errorf("audit log: %s %s was created by %q; want KServe's controller %s", res, predictor, ev.Actor(), kserveController)
		}
	}
	d.say("KServe's controller (%s, per the audit log) made the Deployment and Service %s,", kserveController, predictor)
	d.say("controlled by the InferenceService (uid %s); the admission policies admitted them for it; Service selector %v", owner.UID, svc.Spec.Selector)

	pods, err := d.admin.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
	if err != nil {
		return "", err
	}
	var ready []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName != d.realNode.Name {
			return "", fmt.Errorf("the predictor Pod %s is on %q, not the real node %s", p.Name, p.Spec.NodeName, d.realNode.Name)
		}
		var c *corev1.Container
		for i, k := range p.Spec.Containers {
			if k.Name == "kserve-container" {
				c = &p.Spec.Containers[i]
			}
		}
		if c == nil || c.Image != image {
			return "", fmt.Errorf("the predictor Pod %s has no kserve-container of the runtime's image %s: %+v", p.Name, image, p.Spec.Containers)
		}
		if err := domain.CheckInferenceArgs(c.Args, ref.Name, irismodel.Format, demoModelArgs); err != nil {
			return "", fmt.Errorf("the predictor Pod %s's arguments %q break the private inference argument rule: %w", p.Name, c.Args, err)
		}
		d.say("Pod %s on %s, the real node (IP %s), service account %s; kserve-container args %q:", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Spec.ServiceAccountName, c.Args)
		d.say("exactly --model_name=<name>, then the saved model arguments (the private inference argument rule holds)")
		ready = append(ready, p.Name)
	}
	if len(ready) != 1 {
		return "", fmt.Errorf("want one predictor Pod, got %v", ready)
	}
	if dep.Status.AvailableReplicas < 1 {
		return "", fmt.Errorf("the predictor Deployment %s has no available replica", predictor)
	}
	probe := kserveProbe(dep)
	if probe == "" {
		return "", fmt.Errorf("the predictor Deployment %s's kserve-container has no HTTP readiness probe", predictor)
	}
	d.say("the kubelet found it ready at %s (the runtime's readiness probe, templated by KServe)", probe)
	return predictor, nil
}

// kserveProbe describes the predictor's kserve-container readiness probe
// (the runtime's, templated by KServe); empty when it has no HTTP one.
func kserveProbe(dep *appsv1.Deployment) string {
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "kserve-container" && c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
			return fmt.Sprintf("GET %s on port %s", c.ReadinessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Port.String())
		}
	}
	return ""
}

// readPredictorLog reads the predictor's log tail through the command
// stream, as the member (read-logs, docs/site-runtime.md#private-reads):
// the Runtime checks the binding, a fresh execution.read answer, the Pod →
// ReplicaSet → predictor Deployment → InferenceService UID chain and the
// Pod's arguments under the private inference argument rule, then answers
// the log's last bytes of kserve-container exactly; they equal what
// pods/log gives the administrator.
func (d *demo) readPredictorLog(ctx context.Context, do func(siteprotocol.Operation, any) (siteprotocol.Result, error), ref siteprotocol.NativeRef) error {
	r, err := do(siteprotocol.OpReadLogs, map[string]any{"tail_bytes": 1 << 16})
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded || len(r.NativeRefs) != 2 {
		return failed("read-logs (inference)", r, err)
	}
	rd, err := siteprotocol.DecodeDetail[siteprotocol.ReadLogsDetail](r)
	if err != nil {
		return err
	}
	got, err := base64.StdEncoding.DecodeString(rd.ContentBase64)
	if err != nil {
		return err
	}
	pod := r.NativeRefs[1]
	d.say("read-logs: Pod %s, container %s, %d bytes, truncated %v; decoded:", pod.Name, rd.Container, len(got), rd.Truncated)
	for _, line := range strings.Split(strings.TrimRight(string(got), "\n"), "\n") {
		d.say("  | %s", line)
	}
	logs, err := d.admin.CoreV1().Pods(ref.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: kubeinference.PredictorContainer}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("pods/log: %w", err)
	}
	// The server names the model directory it resolved, always under /workspace.
	start := "sklearnserver: model " + ref.Name + " (LogisticRegression) from /workspace/"
	if rd.Container != kubeinference.PredictorContainer || rd.Truncated || !bytes.HasPrefix(logs, got) || !strings.Contains(string(got), start) {
		return fmt.Errorf("read-logs answered %q of %s; pods/log holds %q", got, rd.Container, logs)
	}
	d.say("the bytes pods/log gives the administrator (read after; the server logs each readiness probe): the model server's")
	d.say("start line, naming its model, the estimator it loaded and the workspace directory it loaded it from")
	return nil
}

// askModel asks the model for predictions through the command stream, as
// the member (proxy, docs/site-runtime.md#private-reads): the Runtime
// checks the Attempt's Pods as for read-logs and KServe's predictor
// Service live — controlled by the recorded InferenceService by UID,
// ClusterIP, selecting exactly the predictor Deployment's Pods — and sends
// one KServe v1 predict through the API server's service proxy, dropping
// the member's Authorization header; the member's model answers the iris
// classes of the data set's first sample of each class, [0,1,2].
func (d *demo) askModel(ctx context.Context, do func(siteprotocol.Operation, any) (siteprotocol.Result, error), ref siteprotocol.NativeRef, predictor string) error {
	predict, err := json.Marshal(map[string]any{"instances": irismodel.Samples()})
	if err != nil {
		return err
	}
	path := "/v1/models/" + ref.Name + ":predict"
	pr, err := do(siteprotocol.OpProxy, map[string]any{"method": "POST", "path": path, "body_base64": base64.StdEncoding.EncodeToString(predict),
		"headers": map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer not-forwarded"}}})
	if err != nil || pr.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("proxy (inference)", pr, err)
	}
	pd, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](pr)
	if err != nil {
		return err
	}
	if pd.Status != http.StatusOK {
		return fmt.Errorf("the model answered %d through the stream", pd.Status)
	}
	answer, err := base64.StdEncoding.DecodeString(pd.BodyBase64)
	if err != nil {
		return err
	}
	svc, err := d.admin.CoreV1().Services(ref.Namespace).Get(ctx, predictor, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the predictor Service %s: %w", predictor, err)
	}
	if len(pr.NativeRefs) == 0 || pr.NativeRefs[0].Name != predictor || pr.NativeRefs[0].UID != string(svc.UID) {
		return fmt.Errorf("the proxy went through %+v, not KServe's predictor Service %s (uid %s)", pr.NativeRefs, predictor, svc.UID)
	}
	d.say("proxy: POST %s through the stream, as the member, via KServe's Service %s (uid %s),", path, predictor, svc.UID)
	d.say("  %s", predict)
	d.say("the data set's first sample of each class; the model answered %d with headers %v:", pd.Status, pd.Headers)
	var got struct {
		Predictions []int `json:"predictions"`
	}
	if err := json.Unmarshal(answer, &got); err != nil {
		return fmt.Errorf("the model answered %q: %w", answer, err)
	}
	if !slices.Equal(got.Predictions, irismodel.Classes()) {
		return fmt.Errorf("the model answered %s; want the classes %v", answer, irismodel.Classes())
	}
	d.say("  | %s", strings.TrimSpace(string(answer)))
	d.say("predictions %v: the classes of those samples, from the member's model loaded off its workspace (the member's", got.Predictions)
	d.say("Authorization header was dropped before the request left the Runtime)")
	return nil
}

// send appends one command of family to the stream as the execution
// service and waits for its acknowledged result, narrating it: every
// step's commands go through it.
func (d *demo) send(ctx context.Context, family siteprotocol.Family, run, attempt, member, project, binding string, op siteprotocol.Operation, payload any) (sent, error) {
	c := map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"member_id": member, "project_id": project, "family": family, "run_id": run, "attempt_id": attempt,
		"account_ref": map[string]any{"binding_id": binding, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	var receipt siteprotocol.AppendReceipt
	if _, _, err := d.call(ctx, http.MethodPost, "/execution/v1/streams/"+environment+"/commands", d.keys["service:execution"], c, &receipt); err != nil {
		return sent{}, err
	}
	id, _ := c["id"].(string)
	r, err := d.acknowledged(ctx, id)
	if err != nil {
		return sent{}, err
	}
	d.say("#%d %-11s → %s / %s: %s %s", receipt.Sequence, op, r.Outcome, r.Reason, r.Message, compact(r.Detail))
	return sent{id: id, op: op, sequence: receipt.Sequence, result: r}, nil
}
