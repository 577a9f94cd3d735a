// Package runtimepod installs the Site Runtime in the local cluster the way a Site's operator
// applies deploy/runtime (kubectl apply or Argo CD): a kustomize build of an overlay over
// deploy/localcluster/runtime, server-side applied, the install hook Job run to completion and
// deleted (HookSucceeded), then the Deployment. The demo (`make demo`, METALLO_DEMO_RUNTIME=pod)
// and the Runtime's Pod tests use it; see deploy/runtime/README.md and
// docs/operations.md#the-runtime-in-a-site-cluster.
package runtimepod

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Names of deploy/runtime's objects.
const (
	// Deployment is the Runtime's Deployment (and its Pods' app.kubernetes.io/name).
	Deployment = "metallo-runtime"
	// InstallJob is the install hook's Job.
	InstallJob = "metallo-runtime-install"
	// JournalsClaim is the PersistentVolumeClaim of the journals.
	JournalsClaim = "metallo-runtime-journals"
	// Record is the installation record's ConfigMap.
	Record = "runtime-installation"
	// placeholder is the base's image name the overlay replaces.
	placeholder = "registry.invalid/pharos-metallo/metallo"
)

// Overlay is the top kustomization over deploy/localcluster/runtime: what changes with each
// cluster and each Site API process.
type Overlay struct {
	// Base is the path of deploy/localcluster/runtime.
	Base string
	// Namespace is the Runtime's namespace (metallo-runtime).
	Namespace string
	// Image is the Runtime image by digest, name@sha256:<64 hex>.
	Image string
	// Environment and Authority are the Site API's environment and its HTTPS base URL on an
	// address the Pod reaches (the bridge's host address).
	Environment, Authority string
	// BatchImage is the batch image by digest.
	BatchImage string
	// CAPEM is the PEM bundle that issued the Site API's certificate (--ca-file).
	CAPEM []byte
	// Policy is the permission provider's policy file (docs/site-runtime.md#permission-providers).
	Policy []byte
	// RepositoryGrants is the repository grants file (docs/site-runtime.md#repository-grants);
	// nil writes an empty list.
	RepositoryGrants []byte
	// Literals are further KEY=value settings of the metallo-runtime ConfigMap (METALLO_* flags).
	Literals []string
	// Patches are further kustomize patch entries, YAML list items indented by zero ("- target: …").
	Patches string
}

// Render writes the overlay into dir (created if missing) and returns the objects of its
// kustomize build, in the build's order. It returns an error when the image is not by digest,
// a file cannot be written, or the build fails.
func (o Overlay) Render(dir string) ([]*unstructured.Unstructured, error) {
	name, digest, ok := strings.Cut(o.Image, "@")
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return nil, fmt.Errorf("runtimepod: the Runtime image %q is not by digest (name@sha256:…)", o.Image)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base, err := filepath.Abs(o.Base)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(abs, base)
	if err != nil {
		return nil, err
	}
	grants := o.RepositoryGrants
	if grants == nil {
		grants = []byte("[]\n")
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
- %s
images:
- name: %s
  newName: %s
  digest: %s
configMapGenerator:
- name: metallo-runtime
  behavior: merge
  options:
    disableNameSuffixHash: true
  literals:
  - METALLO_ENVIRONMENT=%s
  - METALLO_AUTHORITY=%s
  - METALLO_BATCH_IMAGE=%s
`, o.Namespace, rel, placeholder, name, digest, o.Environment, o.Authority, o.BatchImage)
	for _, l := range o.Literals {
		fmt.Fprintf(&b, "  - %s\n", l)
	}
	b.WriteString(`- name: metallo-site-api-ca
  files: [ca.crt]
- name: metallo-runtime-permissions
  files: [policy.yaml, grants.yaml]
`)
	if o.Patches != "" {
		b.WriteString("patches:\n" + o.Patches)
		if !strings.HasSuffix(o.Patches, "\n") {
			b.WriteString("\n")
		}
	}
	for file, content := range map[string][]byte{"ca.crt": o.CAPEM, "policy.yaml": o.Policy, "grants.yaml": grants, "kustomization.yaml": []byte(b.String())} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			return nil, err
		}
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("runtimepod: kustomize build of %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, res := range rm.Resources() {
		m, err := res.Map()
		if err != nil {
			return nil, err
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// Applier server-side applies objects of any kind, as one field manager.
type Applier struct {
	dyn          dynamic.Interface
	mapper       meta.RESTMapper
	fieldManager string
}

// NewApplier returns an Applier for the cluster of cfg.
func NewApplier(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), fieldManager: fieldManager}, nil
}

// Apply server-side applies o (forcing conflicts, strict field validation).
func (a *Applier) Apply(ctx context.Context, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: a.fieldManager, Force: &force, FieldValidation: "Strict"}); err != nil {
		return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// ApplyKinds applies the objects of each kind, kind by kind in the order given.
func (a *Applier) ApplyKinds(ctx context.Context, objs []*unstructured.Unstructured, kinds ...string) error {
	for _, kind := range kinds {
		for _, o := range objs {
			if o.GetKind() == kind {
				if err := a.Apply(ctx, o); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Install creates the install hook's Job in namespace and waits, within bound, until it
// completes; it then deletes the Job with its Pods (foreground, as Argo CD's HookSucceeded
// policy) and returns its Pods' log. It returns an error, with the log, when the Job fails or
// does not complete within bound.
func Install(ctx context.Context, cs kubernetes.Interface, namespace string, job *batchv1.Job, bound time.Duration) (string, error) {
	if _, err := cs.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	deadline := time.Now().Add(bound)
	for {
		j, err := cs.BatchV1().Jobs(namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if condition(j, batchv1.JobComplete) {
			break
		}
		if condition(j, batchv1.JobFailed) || time.Now().After(deadline) {
			return "", fmt.Errorf("install Job %s did not complete within %s (active %d, failed %d)\n%s", job.Name, bound, j.Status.Active, j.Status.Failed, JobLogs(ctx, cs, namespace, job.Name))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return "", err
		}
	}
	log := JobLogs(ctx, cs, namespace, job.Name)
	fg := metav1.DeletePropagationForeground
	if err := cs.BatchV1().Jobs(namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		return log, err
	}
	for {
		if _, err := cs.BatchV1().Jobs(namespace).Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
			return log, nil
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return log, err
		}
	}
}

func condition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// JobLogs is the log of the Job's finished Pods, each under a line naming the Pod, its node
// and phase (a listing error in its place).
func JobLogs(ctx context.Context, cs kubernetes.Interface, namespace, job string) string {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "--- %s on %q (%s)\n", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				fmt.Fprintf(&b, "%s: %s: %s\n", c.Type, c.Reason, c.Message)
			}
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			raw, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(&b, "(log: %v)\n", err)
			}
			b.Write(raw)
		}
	}
	return b.String()
}

// RunningPod waits, within bound, for a running Pod of the Deployment (its Pods'
// app.kubernetes.io/name) other than the one with UID not, whose one container runs, and
// returns it.
func RunningPod(ctx context.Context, cs kubernetes.Interface, namespace, deployment string, not types.UID, bound time.Duration) (*corev1.Pod, error) {
	deadline := time.Now().Add(bound)
	for {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + deployment})
		if err != nil {
			return nil, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.UID != not && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no running Pod of Deployment %s within %s", deployment, bound)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// Remove deletes what an install created in namespace, but the namespace, the service account
// and the RBAC objects (the cluster's other users keep them): the part-of=metallo Deployments
// and every Job (foreground), then, once their Pods are gone (bounded by ctx), every claim and
// the ConfigMaps for which configMap returns true, and waits (bounded by ctx) until the claims
// are gone.
func Remove(ctx context.Context, cs kubernetes.Interface, namespace string, configMap func(name string) bool) error {
	fg := metav1.DeletePropagationForeground
	del := metav1.DeleteOptions{PropagationPolicy: &fg}
	deps, err := cs.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=metallo"})
	if err != nil {
		return err
	}
	for _, d := range deps.Items {
		_ = cs.AppsV1().Deployments(namespace).Delete(ctx, d.Name, del)
	}
	jobs, err := cs.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, j := range jobs.Items {
		_ = cs.BatchV1().Jobs(namespace).Delete(ctx, j.Name, del)
	}
	for {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return fmt.Errorf("the Runtime's Pods are not gone: %w", err)
		}
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range claims.Items {
		_ = cs.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, c.Name, metav1.DeleteOptions{})
	}
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range cms.Items {
		if configMap(c.Name) {
			_ = cs.CoreV1().ConfigMaps(namespace).Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
	// A claim keeps its protection finalizer until no Pod uses it: wait until every claim is
	// gone, so that an install right after this one creates a fresh claim instead of
	// patching the terminating one (which then vanishes under the install Job).
	for {
		claims, err := cs.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(claims.Items) == 0 {
			return nil
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return fmt.Errorf("the Runtime's claims are not gone: %w", err)
		}
	}
}
