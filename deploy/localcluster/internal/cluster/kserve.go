package cluster

// KServe in the local cluster: KServe's own InferenceService controller and admission webhooks
// (the kserve-controller binary, built from ../../kserve), run as KServe's service account in
// Standard (raw) mode, with what they read, all taken from the kserve module at the version the
// main module requires (nothing of it is copied into the repository). See README.md, "KServe".

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

const (
	// kserveComponent is the process name of KServe's controller (logs/, run/).
	kserveComponent = "kserve-controller"
	// kserveNamespace is where KServe's controller, its ConfigMap and its service account live
	// (constants.KServeNamespace).
	kserveNamespace = "kserve"
	// kserveServiceAccount is the controller's identity, as in KServe's config/rbac.
	kserveServiceAccount = "kserve-controller-manager"
	// kserveWebhookName names KServe's InferenceService webhook configurations.
	kserveWebhookName = "inferenceservice.serving.kserve.io"
	// kserveDefaulter is the one webhook of KServe's MutatingWebhookConfiguration that runs here
	// (its Pod mutator does not).
	kserveDefaulter = "inferenceservice.kserve-webhook-server.defaulter"
	// huggingFaceRuntime is the ClusterServingRuntime for the huggingface model format.
	huggingFaceRuntime = "kserve-huggingfaceserver"
	// httpServiceRuntime is the ClusterServingRuntime of the real node: the httpservice image
	// (deploy/images) as the huggingface format's model server, by the KServe v1 protocol.
	httpServiceRuntime = "metallo-httpservice"
	// httpServiceImage names the httpservice image in the real node's images.
	httpServiceImage = "httpservice"
	// sklearnServerRuntime is the ClusterServingRuntime of the sklearn format on the real
	// node: the sklearnserver image (deploy/images), a test fixture that loads a member's
	// model.joblib from the workspace and speaks the KServe v1 protocol.
	sklearnServerRuntime = "metallo-sklearnserver"
	// sklearnServerImage names the sklearnserver image in the real node's images.
	sklearnServerImage = "sklearnserver"
	// kserveTokenLifetime is how long the controller's service-account token is valid.
	kserveTokenLifetime = 365 * 24 * time.Hour
)

// kserveCRDs are the CustomResourceDefinitions of config/crd/full that the InferenceService
// controller and its webhooks read: InferenceServices; ServingRuntimes and
// ClusterServingRuntimes (watched at start, read to pick a runtime); TrainedModels (listed
// before the controller removes its finalizer from a deleted InferenceService);
// ClusterStorageContainers (read for an InferenceService with storageUris).
var kserveCRDs = []string{
	"serving.kserve.io_inferenceservices.yaml",
	"serving.kserve.io_servingruntimes.yaml",
	"serving.kserve.io_clusterservingruntimes.yaml",
	"serving.kserve.io_trainedmodels.yaml",
	"serving.kserve.io_clusterstoragecontainers.yaml",
}

// kserveRBAC are the files of KServe's config/rbac that give its controller manager its
// identity and permissions.
var kserveRBAC = []string{
	"service_account.yaml", "role.yaml", "role_binding.yaml",
	"leader_election_role.yaml", "leader_election_role_binding.yaml",
}

// kserveSetup is what startKServe needs from up.
type kserveSetup struct {
	dir, binDir, server string
	module              kserveModule
	ap                  *applier
	cs                  kubernetes.Interface
	step                func(format string, args ...any)
}

// kserveState is where the running controller serves.
type kserveState struct {
	webhook, health string
}

// startKServe installs what KServe's controller reads, starts it and returns once its webhooks
// answer the API server.
func startKServe(ctx context.Context, k kserveSetup) (kserveState, error) {
	mod := k.module
	var crds []*unstructured.Unstructured
	for _, f := range kserveCRDs {
		objs, err := readYAMLFile(filepath.Join(mod.dir, "config", "crd", "full", f))
		if err != nil {
			return kserveState{}, err
		}
		crds = append(crds, objs...)
	}
	if err := k.ap.apply(ctx, crds); err != nil {
		return kserveState{}, fmt.Errorf("CRDs: %w", err)
	}
	k.step("installed KServe's CRDs from %s", mod.path)

	objs, err := kserveObjects(mod)
	if err != nil {
		return kserveState{}, err
	}
	if err := k.ap.apply(ctx, objs); err != nil {
		return kserveState{}, err
	}
	k.step("installed KServe's inferenceservice-config (Standard), RBAC and ClusterServingRuntime %s", huggingFaceRuntime)

	kdir := filepath.Join(k.dir, "kserve")
	if err := os.MkdirAll(kdir, 0o700); err != nil {
		return kserveState{}, err
	}
	secs := int64(kserveTokenLifetime / time.Second)
	tr, err := k.cs.CoreV1().ServiceAccounts(kserveNamespace).CreateToken(ctx, kserveServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return kserveState{}, fmt.Errorf("token of service account %s/%s: %w", kserveNamespace, kserveServiceAccount, err)
	}
	caPEM, err := os.ReadFile(filepath.Join(k.dir, "pki", "ca.crt"))
	if err != nil {
		return kserveState{}, err
	}
	kubeconfig := filepath.Join(kdir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, k.server, caPEM, "system:serviceaccount:"+kserveNamespace+":"+kserveServiceAccount, tr.Status.Token); err != nil {
		return kserveState{}, err
	}
	if err := writeWebhookCert(filepath.Join(k.dir, "pki"), kdir); err != nil {
		return kserveState{}, fmt.Errorf("webhook certificate: %w", err)
	}

	ports, err := freePorts(2)
	if err != nil {
		return kserveState{}, err
	}
	st := kserveState{
		webhook: fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		health:  fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
	}
	if err := start(k.dir, kserveComponent, filepath.Join(k.binDir, kserveComponent),
		"--kubeconfig="+kubeconfig,
		"--webhook-host=127.0.0.1",
		"--webhook-port="+strconv.Itoa(ports[0]),
		"--cert-dir="+kdir,
		"--health-probe-addr="+strings.TrimPrefix(st.health, "http://"),
		"--metrics-addr=0",
	); err != nil {
		return kserveState{}, err
	}
	k.step("KServe's controller started (webhook %s)", st.webhook)
	if err := waitFor(ctx, "KServe's controller /readyz", k.dir, []string{"apiserver", kserveComponent}, func(ctx context.Context) error {
		return kserveReady(ctx, st.health)
	}); err != nil {
		return kserveState{}, err
	}

	hooks, err := kserveWebhooks(mod, st.webhook, caPEM)
	if err != nil {
		return kserveState{}, err
	}
	if err := k.ap.apply(ctx, hooks); err != nil {
		return kserveState{}, err
	}
	// The API server picks webhook configurations up through an informer: ready once KServe's
	// validator refuses what only it refuses (a dot in the name; dry run, nothing is stored).
	if err := waitFor(ctx, "KServe's webhooks to answer the API server", k.dir, []string{"apiserver", kserveComponent}, func(ctx context.Context) error {
		return kserveWebhookAnswers(ctx, k.ap)
	}); err != nil {
		return kserveState{}, err
	}
	k.step("KServe's webhooks answer the API server")
	return st, nil
}

// kserveModule is the kserve module in the module cache.
type kserveModule struct {
	path, version, dir string
}

// downloadKServe finds the kserve module (module@version) in the module cache, downloading it
// when needed.
func downloadKServe(ctx context.Context, module string) (kserveModule, error) {
	dir, err := moduleDir(ctx, module)
	if err != nil {
		return kserveModule{}, err
	}
	_, version, _ := strings.Cut(module, "@")
	return kserveModule{path: module, version: version, dir: dir}, nil
}

// kserveObjects are the objects KServe's controller reads at start and at each reconcile: its
// namespace, the inferenceservice-config ConfigMap with Standard as the default deployment
// mode and kserveDomainTemplate, its service account with KServe's RBAC, and the
// ClusterServingRuntime of the huggingface format.
func kserveObjects(mod kserveModule) ([]*unstructured.Unstructured, error) {
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kserveNamespace},
	}}
	objs := []*unstructured.Unstructured{ns}

	cms, err := readYAMLFile(filepath.Join(mod.dir, "config", "configmap", "inferenceservice.yaml"))
	if err != nil {
		return nil, err
	}
	for _, cm := range cms {
		if cm.GetKind() != "ConfigMap" || cm.GetName() != "inferenceservice-config" {
			continue
		}
		// KServe ships Serverless (Knative) as the default; the local cluster has no Knative.
		if err := unstructured.SetNestedField(cm.Object, `{"defaultDeploymentMode": "Standard"}`, "data", "deploy"); err != nil {
			return nil, err
		}
		if err := shortDomainLabels(cm); err != nil {
			return nil, err
		}
		cm.SetNamespace(kserveNamespace)
		objs = append(objs, cm)
	}
	if len(objs) != 2 {
		return nil, fmt.Errorf("no ConfigMap inferenceservice-config in %s/config/configmap", mod.path)
	}

	for _, f := range kserveRBAC {
		rbac, err := readYAMLFile(filepath.Join(mod.dir, "config", "rbac", f))
		if err != nil {
			return nil, err
		}
		for _, o := range rbac {
			// KServe's kustomization sets the namespace of its namespaced objects and of the
			// service-account subjects of its bindings.
			switch o.GetKind() {
			case "ServiceAccount", "Role", "RoleBinding":
				o.SetNamespace(kserveNamespace)
			}
			if subjects, ok, _ := unstructured.NestedSlice(o.Object, "subjects"); ok {
				for _, s := range subjects {
					if m, ok := s.(map[string]any); ok && m["kind"] == "ServiceAccount" && m["namespace"] == nil {
						m["namespace"] = kserveNamespace
					}
				}
				_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
			}
			objs = append(objs, o)
		}
	}

	runtimes, err := readYAMLFile(filepath.Join(mod.dir, "config", "runtimes", huggingFaceRuntime+".yaml"))
	if err != nil {
		return nil, err
	}
	if len(runtimes) != 1 || runtimes[0].GetName() != huggingFaceRuntime {
		return nil, fmt.Errorf("%s/config/runtimes/%s.yaml: want one ClusterServingRuntime %s", mod.path, huggingFaceRuntime, huggingFaceRuntime)
	}
	rt := runtimes[0]
	if err := huggingFaceArgs(rt, mod.version); err != nil {
		return nil, err
	}
	return append(objs, rt), nil
}

// kserveDomainTemplate puts the component and its namespace into DNS labels of their own.
// KServe's default, "{{ .Name }}-{{ .Namespace }}.{{ .IngressDomain }}", makes one label of
// "<isvc>-predictor-<namespace>", which must not exceed 63 characters even for a cluster-local
// InferenceService (KServe computes every component's URL from it and fails the reconcile
// otherwise): attempt-<uuid>-predictor alone is 54.
const kserveDomainTemplate = "{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}"

// shortDomainLabels sets the ingress configuration's domainTemplate to kserveDomainTemplate.
func shortDomainLabels(cm *unstructured.Unstructured) error {
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "ingress")
	var ingress map[string]any
	if err := json.Unmarshal([]byte(raw), &ingress); err != nil {
		return fmt.Errorf("inferenceservice-config ingress: %w", err)
	}
	ingress["domainTemplate"] = kserveDomainTemplate
	b, err := json.MarshalIndent(ingress, "", "  ")
	if err != nil {
		return err
	}
	return unstructured.SetNestedField(cm.Object, string(b), "data", "ingress")
}

// huggingFaceArgs gives the huggingface runtime's kserve-container KServe's release image
// (KServe's kustomization substitutes it) and the arguments --model_name={{.Name}}
// --backend=huggingface: the runtime's own prefix before an InferenceService's arguments.
func huggingFaceArgs(rt *unstructured.Unstructured, version string) error {
	containers, _, _ := unstructured.NestedSlice(rt.Object, "spec", "containers")
	for _, c := range containers {
		m, ok := c.(map[string]any)
		if !ok || m["name"] != "kserve-container" {
			continue
		}
		args, _, _ := unstructured.NestedStringSlice(m, "args")
		if len(args) == 0 || args[0] != "--model_name={{.Name}}" {
			return fmt.Errorf("ClusterServingRuntime %s: kserve-container args %q do not begin with --model_name={{.Name}}", rt.GetName(), args)
		}
		out := []any{"--model_name={{.Name}}", "--backend=huggingface"}
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "--backend=") {
				out = append(out, a)
			}
		}
		m["args"] = out
		m["image"] = "kserve/huggingfaceserver:" + version
		return unstructured.SetNestedSlice(rt.Object, containers, "spec", "containers")
	}
	return fmt.Errorf("ClusterServingRuntime %s has no kserve-container", rt.GetName())
}

// kserveWebhooks are KServe's InferenceService webhook configurations from config/webhook,
// pointed at the controller on loopback (the API server dials it there) and trusting the cluster
// CA: the validating one whole, and of the mutating one only the InferenceService defaulter.
func kserveWebhooks(mod kserveModule, server string, caPEM []byte) ([]*unstructured.Unstructured, error) {
	objs, err := readYAMLFile(filepath.Join(mod.dir, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	caBundle := base64.StdEncoding.EncodeToString(caPEM)
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() != kserveWebhookName {
			continue
		}
		mutating := o.GetKind() == "MutatingWebhookConfiguration"
		if !mutating && o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		var kept []any
		for _, h := range hooks {
			m, ok := h.(map[string]any)
			if !ok || (mutating && m["name"] != kserveDefaulter) {
				continue
			}
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			if path == "" {
				return nil, fmt.Errorf("%s %s webhook %v has no service path", o.GetKind(), o.GetName(), m["name"])
			}
			m["clientConfig"] = map[string]any{"url": server + path, "caBundle": caBundle}
			kept = append(kept, m)
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("%s %s: no webhook to keep", o.GetKind(), o.GetName())
		}
		if err := unstructured.SetNestedSlice(o.Object, kept, "webhooks"); err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(o.Object, "metadata", "creationTimestamp")
		out = append(out, o)
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("%s/config/webhook/manifests.yaml: want KServe's mutating and validating %s, found %d", mod.path, kserveWebhookName, len(out))
	}
	return out, nil
}

// kserveReady asks the controller's health probe whether its webhook server serves.
func kserveReady(ctx context.Context, health string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, health+"/readyz", nil)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/readyz: %s", health, resp.Status)
	}
	return nil
}

// inferenceServices is the InferenceService resource.
var inferenceServices = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}

// kserveWebhookAnswers tells whether KServe's validator answers the API server: a dry-run create
// of an InferenceService whose name has a dot, which the API server accepts and KServe refuses.
func kserveWebhookAnswers(ctx context.Context, ap *applier) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
		"metadata": map[string]any{"name": "webhook.probe", "namespace": kserveNamespace},
		"spec": map[string]any{"predictor": map[string]any{"model": map[string]any{
			"modelFormat": map[string]any{"name": "huggingface"}, "storageUri": "pvc://probe/model",
		}}},
	}}
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := ap.dyn.Resource(inferenceServices).Namespace(kserveNamespace).Create(c, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return errors.New("the API server does not call KServe's validator yet")
	}
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `admission webhook "inferenceservice.kserve-webhook-server.validator" denied the request`) {
		return nil
	}
	return fmt.Errorf("dry-run create: %w", err)
}

// writeWebhookCert writes tls.crt and tls.key into dir: a serving certificate for 127.0.0.1,
// signed by the cluster CA in pki.
func writeWebhookCert(pki, dir string) error {
	return signLeaf(pki, dir, "tls", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kserve-webhook-server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	})
}

// httpServiceRuntimeObject is the ClusterServingRuntime httpServiceRuntime: KServe's
// huggingface runtime's shape (format huggingface, the arguments --model_name={{.Name}}
// --backend=huggingface, KServe's container security context) with the real node's httpservice
// image by digest as its kserve-container, which speaks the KServe v1 protocol of the model its
// --model_name= names (deploy/images/README.md). It is never auto-selected: only an
// InferenceService that names it (the Runtime's --serving-runtimes) runs on it. KServe renders
// the container as a template, so the readiness probe asks the model itself:
// GET /v1/models/<InferenceService name> on the image's port 8080.
func httpServiceRuntimeObject(image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
		"metadata": map[string]any{"name": httpServiceRuntime},
		"spec": map[string]any{
			"supportedModelFormats": []any{map[string]any{"name": "huggingface", "version": "1", "autoSelect": false}},
			"protocolVersions":      []any{"v1"},
			"containers": []any{map[string]any{
				"name":  "kserve-container",
				"image": image,
				"args":  []any{"--model_name={{.Name}}", "--backend=huggingface"},
				"env":   []any{map[string]any{"name": "PORT", "value": "8080"}},
				"readinessProbe": map[string]any{
					"httpGet":       map[string]any{"path": "/v1/models/{{.Name}}", "port": int64(8080)},
					"periodSeconds": int64(2), "timeoutSeconds": int64(1), "failureThreshold": int64(3),
				},
				"securityContext": map[string]any{
					"allowPrivilegeEscalation": false, "privileged": false, "runAsNonRoot": true,
					"capabilities": map[string]any{"drop": []any{"ALL"}},
				},
			}},
		},
	}}
}

// sklearnServerRuntimeObject is the ClusterServingRuntime sklearnServerRuntime: format
// sklearn (not auto-selected), the argument --model_name={{.Name}} only (the InferenceService's
// saved model arguments, --model_dir=/workspace/…, follow it), the real node's sklearnserver
// image by digest as its kserve-container, KServe's container security context, and a
// readiness probe asking the model itself: GET /v1/models/<InferenceService name> on port
// 8080. The server exits 3 when it cannot load the model (deploy/images/README.md).
func sklearnServerRuntimeObject(image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
		"metadata": map[string]any{"name": sklearnServerRuntime},
		"spec": map[string]any{
			"supportedModelFormats": []any{map[string]any{"name": "sklearn", "version": "1", "autoSelect": false}},
			"protocolVersions":      []any{"v1"},
			"containers": []any{map[string]any{
				"name":  "kserve-container",
				"image": image,
				"args":  []any{"--model_name={{.Name}}"},
				"env":   []any{map[string]any{"name": "PORT", "value": "8080"}},
				"readinessProbe": map[string]any{
					"httpGet":       map[string]any{"path": "/v1/models/{{.Name}}", "port": int64(8080)},
					"periodSeconds": int64(2), "timeoutSeconds": int64(1), "failureThreshold": int64(3),
				},
				"securityContext": map[string]any{
					"allowPrivilegeEscalation": false, "privileged": false, "runAsNonRoot": true,
					"capabilities": map[string]any{"drop": []any{"ALL"}},
				},
			}},
		},
	}}
}

// applyHTTPServiceRuntime installs (or updates) the real node's ClusterServingRuntimes:
// httpServiceRuntime with its httpservice image and sklearnServerRuntime with its
// sklearnserver image; a runtime whose image is missing (no real node, or a manifest without
// it) is not installed, and it says so.
func applyHTTPServiceRuntime(ctx context.Context, ap *applier, images map[string]string) error {
	for _, rt := range []struct {
		name, image, format string
		object              func(string) *unstructured.Unstructured
	}{
		{httpServiceRuntime, httpServiceImage, "huggingface", httpServiceRuntimeObject},
		{sklearnServerRuntime, sklearnServerImage, "sklearn", sklearnServerRuntimeObject},
	} {
		image := images[rt.image]
		if image == "" {
			logf("no %s image on the real node: ClusterServingRuntime %s not installed", rt.image, rt.name)
			continue
		}
		if err := ap.apply(ctx, []*unstructured.Unstructured{rt.object(image)}); err != nil {
			return fmt.Errorf("ClusterServingRuntime %s: %w", rt.name, err)
		}
		logf("installed ClusterServingRuntime %s (format %s, not auto-selected): %s", rt.name, rt.format, image)
	}
	return nil
}
