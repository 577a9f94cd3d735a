package policytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Fixed conventions shared with the Runtime's Kubernetes adaptors
// (docs/site-runtime.md#native-naming-and-identity).
const (
	labelAccessPolicy = "execution.pharos.dev/access-policy"
	accessPolicy      = "pharos-site-runtime"
	labelProjectID    = "project-id"
	labelRun          = "execution.pharos.dev/run"
	labelAttempt      = "execution.pharos.dev/attempt"
	labelMember       = "execution.pharos.dev/member"
	labelProject      = "execution.pharos.dev/project"
	labelCommand      = "execution.pharos.dev/command"
	annotationDigest  = "execution.pharos.dev/spec-digest"

	runtimeNamespace = "metallo-runtime"
	runtimeAccount   = "runtime-k8s"
	memberRole       = "metallo-member"
	runtimeRole      = "metallo-runtime"
	// fieldManager is the one make cluster-up applies deploy/cluster with.
	fieldManager = "metallo-localcluster"
	// extraCreatedThrough=extraSiteRuntime is the user extra the Runtime adds when it
	// impersonates a member (metallo-member-creates, metallo-runtime-extra).
	extraCreatedThrough = "execution.pharos.dev/created-through"
	extraSiteRuntime    = "site-runtime"
	// siteClusterSelector selects what deploy/cluster's kustomization labels.
	siteClusterSelector = "app.kubernetes.io/part-of=metallo,app.kubernetes.io/component=site-cluster"
)

// long bounds every watch: generous, as the Job controller backs off for up to a minute.
const long = 2 * time.Minute

var runtimeUser = kubeconfig.ServiceAccountUser(runtimeNamespace, runtimeAccount)

// The Site's fixed platform image, as the Site agent names it in every project namespace
// (ConfigMap metallo-site, key platform-image; deploy/cluster/policies/workspace-helpers.yaml).
const (
	siteConfigMap = "metallo-site"
	platformImage = "registry.invalid/pharos-metallo/platform@sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return c
}

// repo returns the path of a directory of the repository (tests run in deploy/policytest).
func repo(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

// build runs kustomize on dir as `kubectl kustomize` would.
func build(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// buildInNamespace builds dir through an overlay that moves everything into namespace,
// leaving out the Namespace object.
func buildInNamespace(t testing.TB, dir, namespace string) []*unstructured.Unstructured {
	t.Helper()
	overlay := t.TempDir()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, abs)
	if err != nil {
		t.Fatal(err)
	}
	// The namespace transformer moves the RoleBinding subjects' service accounts too.
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
transformers:
- |-
  apiVersion: builtin
  kind: NamespaceTransformer
  metadata:
    name: into-test-namespace
    namespace: %s
  setRoleBindingSubjects: allServiceAccounts
`, rel, namespace)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(build(t, overlay), func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
}

// applier applies objects with server-side apply through the dynamic client.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t testing.TB, cfg *rest.Config) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a *applier) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, o.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// apply server-side applies o (forcing conflicts) with manager; dryRun asks the API server to
// validate and admit it without persisting anything.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured, manager string, dryRun bool) error {
	ri, err := a.resource(o)
	if err != nil {
		return err
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: manager, Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// Once per test binary: the cluster holds deploy/cluster and the Runtime's identity.
var (
	syncOnce sync.Once
	syncErr  error
)

// synced applies deploy/cluster and the Namespace, ServiceAccount, Role and RoleBinding of
// deploy/runtime to the cluster once per test binary, then waits until the API server has
// type-checked every policy's current generation.
func synced(t *testing.T, e *kubetest.Env) {
	t.Helper()
	syncOnce.Do(func() { syncErr = syncCluster(t, e) })
	if syncErr != nil {
		t.Fatalf("apply deploy/cluster and deploy/runtime's identity: %v", syncErr)
	}
}

func syncCluster(t *testing.T, e *kubetest.Env) error {
	c, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	a := newApplier(t, e.Config)
	cluster := build(t, repo("deploy", "cluster"))
	for _, o := range cluster {
		if err := a.apply(c, o, fieldManager, false); err != nil {
			return err
		}
	}
	if err := prune(c, a, cluster); err != nil {
		return err
	}
	identity := []string{"Namespace", "ServiceAccount", "Role", "RoleBinding"}
	for _, o := range build(t, repo("deploy", "runtime")) {
		if slices.Contains(identity, o.GetKind()) {
			if err := a.apply(c, o, "metallo-policytest", false); err != nil {
				return err
			}
		}
	}
	for _, o := range cluster {
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			waitTypeChecked(t, e, o.GetName())
		}
	}
	return nil
}

// prune deletes the cluster-scoped objects an earlier deploy/cluster applied and the working
// tree no longer holds (labelled by its kustomization, absent from the build), so a reused cluster
// runs no retired policy: server-side apply never deletes anything.
func prune(c context.Context, a *applier, cluster []*unstructured.Unstructured) error {
	kinds := map[string]*unstructured.Unstructured{}
	keep := map[string]bool{}
	for _, o := range cluster {
		kinds[o.GetKind()] = o
		keep[o.GetKind()+"/"+o.GetName()] = true
	}
	for kind, example := range kinds {
		ri, err := a.resource(example)
		if err != nil {
			return err
		}
		list, err := ri.List(c, metav1.ListOptions{LabelSelector: siteClusterSelector})
		if err != nil {
			return fmt.Errorf("list %s: %w", kind, err)
		}
		for _, o := range list.Items {
			if o.GetNamespace() != "" || keep[kind+"/"+o.GetName()] {
				continue
			}
			if err := ri.Delete(c, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete the retired %s %s: %w", kind, o.GetName(), err)
			}
		}
	}
	return nil
}

// waitTypeChecked watches the policy until the API server has type-checked its current
// generation, and returns it.
func waitTypeChecked(t testing.TB, e *kubetest.Env, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	lw := cache.NewListWatchFromClient(e.Client.AdmissionregistrationV1().RESTClient(), "validatingadmissionpolicies", "",
		fields.OneTermEqualSelector("metadata.name", name))
	return kubetest.Until(t, long, "policy "+name+" type-checked", lw, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil
	})
}

// site is one Site project namespace set up as the Site agent would, with two members.
type site struct {
	e         *kubetest.Env
	namespace string
	project   string
	// alice and bob are the party UUIDs of two members of the Project.
	alice, bob string

	mu      sync.Mutex
	runtime *rest.Config
	own     map[string]*rest.Config
}

// newSite makes the test's own namespace a Site project namespace.
func newSite(t *testing.T) *site {
	t.Helper()
	e := kubetest.New(t)
	synced(t, e)
	return siteIn(t, e, e.Namespace)
}

// siteIn makes the existing namespace a Site project namespace of a new Project with two members.
func siteIn(t *testing.T, e *kubetest.Env, namespace string) *site {
	t.Helper()
	s := &site{e: e, namespace: namespace, project: uuid.NewString(), alice: uuid.NewString(), bob: uuid.NewString(), own: map[string]*rest.Config{}}
	s.setUp(t)
	return s
}

// setUp labels the namespace and creates what the Site agent creates in it: a service account
// and a metallo-member RoleBinding per member, the Runtime's metallo-runtime RoleBinding and the
// ConfigMap metallo-site naming the platform image. It
// waits until RBAC grants them.
func (s *site) setUp(t *testing.T) {
	t.Helper()
	c := ctx(t)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{
		labelAccessPolicy: accessPolicy, labelProjectID: s.project,
	}}})
	if _, err := s.e.Client.CoreV1().Namespaces().Patch(c, s.namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label namespace %s: %v", s.namespace, err)
	}
	for _, m := range []string{s.alice, s.bob} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "member-" + m}}
		if _, err := s.e.Client.CoreV1().ServiceAccounts(s.namespace).Create(c, sa, metav1.CreateOptions{}); err != nil {
			t.Fatalf("service account member-%s: %v", m, err)
		}
		s.bind(t, "member-"+m, memberRole, rbacv1.Subject{Kind: "ServiceAccount", Name: "member-" + m, Namespace: s.namespace})
	}
	s.bind(t, runtimeRole, runtimeRole, rbacv1.Subject{Kind: "ServiceAccount", Name: runtimeAccount, Namespace: runtimeNamespace})
	// The Site's fixed platform image, the parameter of metallo-workspace-helpers.
	site := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: siteConfigMap}, Data: map[string]string{"platform-image": platformImage}}
	if _, err := s.e.Client.CoreV1().ConfigMaps(s.namespace).Create(c, site, metav1.CreateOptions{}); err != nil {
		t.Fatalf("configmap %s: %v", siteConfigMap, err)
	}
	for _, m := range []string{s.alice, s.bob} {
		s.waitAllowed(t, s.memberUser(m), authorizationv1.ResourceAttributes{Namespace: s.namespace, Verb: "create", Group: "batch", Resource: "jobs"})
		s.waitAllowed(t, runtimeUser, authorizationv1.ResourceAttributes{Namespace: s.namespace, Verb: "impersonate", Resource: "serviceaccounts", Name: "member-" + m})
	}
}

// bind creates the RoleBinding name to ClusterRole role for subject.
func (s *site) bind(t *testing.T, name, role string, subject rbacv1.Subject) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := s.e.Client.RbacV1().RoleBindings(s.namespace).Create(ctx(t), rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("role binding %s: %v", name, err)
	}
}

// grant gives user the verbs on the resources in the namespace through a Role of its own, so
// that a test can show that admission, not RBAC, refuses a request.
func (s *site) grant(t *testing.T, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	c := ctx(t)
	name := "extra-" + uuid.NewString()[:8]
	if _, err := s.e.Client.RbacV1().Roles(s.namespace).Create(c, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, account, _ := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}},
	}
	if _, err := s.e.Client.RbacV1().RoleBindings(s.namespace).Create(c, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				s.waitAllowed(t, user, authorizationv1.ResourceAttributes{Namespace: s.namespace, Verb: v, Group: r.APIGroups[0], Resource: res})
			}
		}
	}
}

// waitAllowed asks the RBAC authorizer until it grants the request: it sees new bindings
// through its informers, shortly after they are written, and offers nothing to watch.
func (s *site) waitAllowed(t *testing.T, user string, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	ns, _, _ := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	err := wait.PollUntilContextTimeout(ctx(t), 50*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &attrs,
		}}
		out, err := s.e.Client.AuthorizationV1().SubjectAccessReviews().Create(c, sar, metav1.CreateOptions{})
		return err == nil && out.Status.Allowed, err
	})
	if err != nil {
		t.Fatalf("RBAC never granted %s %+v: %v", user, attrs, err)
	}
}

// watch lists and watches the site namespace's objects of a core, batch, apps or discovery
// resource (one when name is set).
func (s *site) watch(resource, name string) cache.ListerWatcher {
	rc := s.e.Client.CoreV1().RESTClient()
	switch resource {
	case "jobs":
		rc = s.e.Client.BatchV1().RESTClient()
	case "deployments", "replicasets":
		rc = s.e.Client.AppsV1().RESTClient()
	case "endpointslices":
		rc = s.e.Client.DiscoveryV1().RESTClient()
	}
	sel := fields.Everything()
	if name != "" {
		sel = fields.OneTermEqualSelector("metadata.name", name)
	}
	return cache.NewListWatchFromClient(rc, resource, s.namespace, sel)
}

func (s *site) memberUser(member string) string {
	return kubeconfig.ServiceAccountUser(s.namespace, "member-"+member)
}

// runtimeConfig is the Runtime's own credential: a token of metallo-runtime/runtime-k8s.
func (s *site) runtimeConfig(t *testing.T) *rest.Config {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtime == nil {
		s.runtime = s.e.ServiceAccountConfig(runtimeNamespace, runtimeAccount)
	}
	return rest.CopyConfig(s.runtime)
}

// asRuntime is a client with the Runtime's own token.
func (s *site) asRuntime(t *testing.T) kubernetes.Interface {
	return s.e.ClientFor(s.runtimeConfig(t))
}

// viaRuntime is a client of the Runtime impersonating the member with its user extra, as the
// Runtime creates (the Runtime's own ImpersonateMember).
func (s *site) viaRuntime(t *testing.T, member string) kubernetes.Interface {
	return s.e.ClientFor(kube.ImpersonateMember(s.runtimeConfig(t), s.memberUser(member)))
}

// asMemberWithout is a client that acts as the member through cfg's impersonation without the
// Runtime's user extra.
func (s *site) asMemberWithout(cfg *rest.Config, member string) kubernetes.Interface {
	return s.e.ClientFor(kubeconfig.Impersonate(cfg, s.memberUser(member)))
}

// asMember is a client with the member's own service-account token (a member acting directly,
// e.g. from one of its Pods, where Kubernetes mounts that token).
func (s *site) asMember(t *testing.T, member string) kubernetes.Interface {
	t.Helper()
	s.mu.Lock()
	cfg, ok := s.own[member]
	if !ok {
		cfg = s.e.ServiceAccountConfig(s.namespace, "member-"+member)
		s.own[member] = cfg
	}
	s.mu.Unlock()
	return s.e.ClientFor(rest.CopyConfig(cfg))
}

// attempt is one Attempt of a member in the site's Project: the identities its objects carry.
type attempt struct {
	run, id, member, project, command string
}

func (s *site) attempt(member string) attempt {
	return attempt{run: uuid.NewString(), id: uuid.NewString(), member: member, project: s.project, command: uuid.NewString()}
}

func (a attempt) name() string       { return "attempt-" + a.id }
func (a attempt) claimName() string  { return a.name() + "-ws" }
func (a attempt) secretName() string { return a.name() + "-cred" }
func (a attempt) helperName() string { return a.name() + "-git" }

// labels are the identity labels of every object the Runtime creates for the Attempt.
func (a attempt) labels() map[string]string {
	return map[string]string{labelRun: a.run, labelAttempt: a.id, labelMember: a.member, labelProject: a.project, labelCommand: a.command}
}

func (a attempt) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: a.labels(), Annotations: map[string]string{annotationDigest: "sha256:" + strings.Repeat("0", 64)}}
}

// podSpec runs as the member and mounts the Attempt's workspace claim and credential.
func (a attempt) podSpec() corev1.PodSpec {
	one := resource.MustParse("100m")
	mem := resource.MustParse("64Mi")
	deadline := int64(600)
	return corev1.PodSpec{
		ServiceAccountName:    "member-" + a.member,
		RestartPolicy:         corev1.RestartPolicyNever,
		ActiveDeadlineSeconds: &deadline,
		Containers: []corev1.Container{{
			Name:    "main",
			Image:   "registry.invalid/pharos-metallo/batch@sha256:" + strings.Repeat("0", 64),
			Command: []string{"/bin/true"},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: one, corev1.ResourceMemory: mem},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: one, corev1.ResourceMemory: mem},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}},
		}},
		Volumes: []corev1.Volume{
			{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: a.claimName()}}},
		},
	}
}

// job is the Attempt's batch Job as the Runtime renders it (restartPolicy Never, backoffLimit 0,
// the time limit on the Pod), its Pod annotated to run runSeconds on KWOK.
func (a attempt) job(runSeconds string) *batchv1.Job {
	zero := int32(0)
	podMeta := a.meta("")
	podMeta.Annotations[kubetest.AnnotationRunSeconds] = runSeconds
	return &batchv1.Job{
		ObjectMeta: a.meta(a.name()),
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero,
			Template:     corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: a.podSpec()},
		},
	}
}

// helper is the Attempt's workspace helper Pod.
// helper is the Attempt's workspace helper Pod exactly as the Runtime renders it
// (kube.Renderer.RenderHelper: the platform image, the exact workspace-init command, the claim
// and the credential Secret as a volume).
func (a attempt) helper() *corev1.Pod {
	obj, err := kube.NewRenderer(nil, nil).RenderHelper(application.HelperSpec{
		Identity:  application.ObjectIdentity{RunID: a.run, AttemptID: a.id, MemberID: a.member, ProjectID: a.project, CommandID: a.command},
		Namespace: "", ServiceAccount: "member-" + a.member, Image: platformImage,
		WorkspaceClaim: a.claimName(), Credential: a.secretName(),
		Repository:     siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("c", 40)},
		SizeLimitBytes: 1 << 20, Timeout: 10 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	var p corev1.Pod
	if err := json.Unmarshal(obj.Spec, &p); err != nil {
		panic(err)
	}
	p.Annotations = a.meta("").Annotations
	return &p
}

// claim is the Attempt's fresh private workspace claim.
func (a attempt) claim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: a.meta(a.claimName()),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// credential is the Attempt's scoped repository credential.
func (a attempt) credential() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: a.meta(a.secretName()), Type: corev1.SecretTypeOpaque, StringData: map[string]string{"token": "scoped-" + a.id}}
}

// request is an API request made twice: first as a server-side dry run (dryRun holds
// metav1.DryRunAll), then for real (dryRun empty).
type request func(c context.Context, dryRun []string) error

// refused asserts that the request is refused by the named policy with its message.
func refused(t *testing.T, what, policy, message string, req request) {
	t.Helper()
	refusedBy(t, what+" (want a refusal by "+policy+": "+message+")", denial{policy, message}.matches, req)
}

// isRBACRefusal tells a 403 of the RBAC authorizer from an admission policy's.
func isRBACRefusal(err error) bool {
	return apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

// denial is a policy's refusal: its name and (a part of) its message.
type denial struct{ policy, message string }

func (d denial) matches(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+d.policy+"'") && strings.Contains(err.Error(), d.message)
}

// refusedByOneOf asserts that a request breaking the rules of several policies is refused by one
// of them: the API server evaluates every policy and reports one refusal, in no defined order.
func refusedByOneOf(t *testing.T, what string, req request, denials ...denial) {
	t.Helper()
	refusedBy(t, fmt.Sprintf("%s (want a refusal by one of %v)", what, denials), func(err error) bool {
		return slices.ContainsFunc(denials, func(d denial) bool { return d.matches(err) })
	}, req)
}

// refusedBy asserts that the request is refused with an error want accepts. Admission sees
// policies, their parameters and RBAC its bindings through informers, shortly after they are
// written, and offers nothing to watch: so the request is first made as a server-side dry run
// until it is refused so (persisting nothing either way), then made for real and must be refused
// the same way.
func refusedBy(t *testing.T, what string, want func(error) bool, req request) {
	t.Helper()
	var last error
	_ = wait.PollUntilContextTimeout(ctx(t), 50*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		if err := req(c, []string{metav1.DryRunAll}); c.Err() == nil {
			last = err
		}
		return want(last), nil
	})
	if !want(last) {
		t.Fatalf("%s: the dry run got %v", what, last)
	}
	if err := req(ctx(t), nil); !want(err) {
		t.Fatalf("%s: got %v", what, err)
	}
	t.Logf("%s: refused: %v", what, last)
}

// accepted asserts that the request is accepted, waiting (dry runs) as refused does for RBAC
// and admission to see what the test just wrote.
func accepted(t *testing.T, what string, req request) {
	t.Helper()
	acceptedDryRun(t, what, req)
	if err := req(ctx(t), nil); err != nil {
		t.Fatalf("%s: want it accepted, got %v", what, err)
	}
}

// acceptedDryRun asserts that the request made as a server-side dry run is accepted (RBAC and
// admission decide a dry run as the real request; nothing persists), waiting as accepted does.
func acceptedDryRun(t *testing.T, what string, req request) {
	t.Helper()
	last := errors.New("never tried")
	_ = wait.PollUntilContextTimeout(ctx(t), 50*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		if err := req(c, []string{metav1.DryRunAll}); c.Err() == nil {
			last = err
		}
		return last == nil, nil
	})
	if last != nil {
		t.Fatalf("%s: want it accepted, the dry run got %v", what, last)
	}
}

// createJob, createPod, createClaim and createSecret are requests to create the object with cs.
func createJob(cs kubernetes.Interface, ns string, j *batchv1.Job) request {
	return func(c context.Context, dryRun []string) error {
		_, err := cs.BatchV1().Jobs(ns).Create(c, j, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
}

func createPod(cs kubernetes.Interface, ns string, p *corev1.Pod) request {
	return func(c context.Context, dryRun []string) error {
		_, err := cs.CoreV1().Pods(ns).Create(c, p, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
}

func createClaim(cs kubernetes.Interface, ns string, p *corev1.PersistentVolumeClaim) request {
	return func(c context.Context, dryRun []string) error {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(c, p, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
}

func createSecret(cs kubernetes.Interface, ns string, s *corev1.Secret) request {
	return func(c context.Context, dryRun []string) error {
		_, err := cs.CoreV1().Secrets(ns).Create(c, s, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
}

// exactDelete deletes as the Runtime does: the exact UID precondition, foreground propagation.
func exactDelete(uid types.UID, dryRun []string) metav1.DeleteOptions {
	fg := metav1.DeletePropagationForeground
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &fg, DryRun: dryRun}
}
