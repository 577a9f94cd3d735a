package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// FieldManager is the field manager of every create.
const FieldManager = "metallo-runtime"

// The user extra the Runtime adds to every request it makes as a member
// (client-go impersonation, header Impersonate-Extra-<key>): the
// admission policy metallo-member-creates of deploy/cluster admits a
// create as a member in a Site project namespace only when
// request.userInfo.extra carries it. Setting it needs the RBAC verb
// impersonate on userextras/<key> (group authentication.k8s.io), which
// only the Runtime's ClusterRole metallo-runtime-extra grants, so a
// member's own token cannot carry it (deploy/cluster/README.md).
const (
	CreatedThroughExtra   = "execution.pharos.dev/created-through"
	CreatedThroughRuntime = "site-runtime"
)

// ImpersonateMember returns a copy of cfg whose requests act as user
// (a member's service account, system:serviceaccount:<namespace>:
// member-<party>) with the Runtime's user extra CreatedThroughExtra.
// cfg's identity needs impersonate on the service account and on that
// extra.
func ImpersonateMember(cfg *rest.Config, user string) *rest.Config {
	c := kubeconfig.Impersonate(cfg, user)
	c.Impersonate.Extra = map[string][]string{CreatedThroughExtra: {CreatedThroughRuntime}}
	return c
}

// kindResource is how the adaptor reaches one native kind.
type kindResource struct {
	gvr schema.GroupVersionResource
	// managed is true for kinds the Runtime creates (as the member) and
	// deletes (as itself); the others it only reads.
	managed bool
}

// resources is the adaptor's table of native kinds, for every family
// (docs/site-runtime.md#one-lifecycle-for-every-family): batch's Jobs, the
// application family's Deployments and Services, every family's workspace
// claims, the inference family's KServe InferenceServices, and the
// ReplicaSets a Deployment owns (read only: the Deployment controller
// creates and deletes them).
var resources = map[string]kindResource{
	domain.KindJob:        {gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, managed: true},
	domain.KindWorkspace:  {gvr: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, managed: true},
	domain.KindDeployment: {gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, managed: true},
	domain.KindService:    {gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, managed: true},
	domain.KindReplicaSet: {gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}},
	// A repository checkout's credential Secret and helper Pod
	// (docs/site-runtime.md#the-workspace-helper).
	domain.KindSecret: {gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, managed: true},
	domain.KindPod:    {gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, managed: true},
	domain.KindInferenceService: {gvr: schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"},
		managed: true},
}

// resourceOf returns the resource of a kind the Runtime creates and
// deletes.
func resourceOf(kind string) (schema.GroupVersionResource, bool) {
	r, ok := resources[kind]
	return r.gvr, ok && r.managed
}

// readableOf returns the resource of a kind the Runtime reads.
func readableOf(kind string) (schema.GroupVersionResource, bool) {
	r, ok := resources[kind]
	return r.gvr, ok
}

// Workloads is application.NativeObjects (and each family's observer) on a Kubernetes cluster. Its
// own identity (the Runtime's service account, with the cluster role
// metallo-runtime) reads namespaces, reads and deletes objects; creates
// impersonate system:serviceaccount:<namespace>:member-<party> with the
// Runtime's user extra (ImpersonateMember), so the member's own grants
// and the admission policies decide them and the audit log names the
// member as the creator.
type Workloads struct {
	config  *rest.Config
	client  kubernetes.Interface
	dynamic dynamic.Interface
	poll    time.Duration

	mu      sync.Mutex
	members map[string]dynamic.Interface
	// chains are the private reads' Pod chains by recorded kind
	// (PodChains, WithPodChain).
	chains map[string]PodChain
	// services are the proxies' Services by recorded kind
	// (WithServiceOf).
	services map[string]ServiceOf
}

// New returns Workloads acting as cfg's identity. cfg's QPS and Burst are
// the client-side rate limit (requests per second, and the burst above
// it) of the Runtime's own client and of each member's impersonating
// client; unset (zero) they are 50 and 100, the defaults of the Runtime's
// --kube-api-qps and --kube-api-burst.
func New(cfg *rest.Config) (*Workloads, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS <= 0 {
		cfg.QPS = 50
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 100
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &Workloads{config: cfg, client: cs, dynamic: dyn, poll: 250 * time.Millisecond, members: map[string]dynamic.Interface{}, chains: PodChains(),
		services: map[string]ServiceOf{}}, nil
}

// Client is the Runtime's own typed client (its identity, its rate
// limit), for the families' observations (adaptors/kube/families).
func (w *Workloads) Client() kubernetes.Interface { return w.client }

// NamespaceProject returns the namespace's project-id label. A namespace
// the Runtime may not read (the Site agent binds the Runtime's role only
// in project namespaces) is not a project namespace: labelled is false.
func (w *Workloads) NamespaceProject(ctx context.Context, namespace string) (string, bool, error) {
	ns, err := w.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	p, ok := ns.Labels[NamespaceProjectLabel]
	return p, ok, nil
}

func (w *Workloads) member(as domain.StartIdentity) (dynamic.Interface, error) {
	user := kubeconfig.ServiceAccountUser(as.Namespace, as.Account)
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.members[user]; ok {
		return c, nil
	}
	c, err := dynamic.NewForConfig(ImpersonateMember(w.config, user))
	if err != nil {
		return nil, fmt.Errorf("client impersonating %s: %w", user, err)
	}
	w.members[user] = c
	return c, nil
}

// Create creates obj as the member account of as, with the spec-digest
// annotation. A refusal by the API server (403: RBAC, an object-count
// quota, an admission policy; 422; a missing namespace) wraps
// application.ErrNativeRequestDenied; 409 AlreadyExists wraps
// application.ErrNativeExists; anything else leaves the effect uncertain.
func (w *Workloads) Create(ctx context.Context, as domain.StartIdentity, obj application.NativeObject) (string, error) {
	gvr, ok := resourceOf(obj.Kind)
	if !ok {
		return "", fmt.Errorf("%w: the Runtime does not create %s objects", application.ErrNativeRequestDenied, obj.Kind)
	}
	if obj.Namespace != as.Namespace {
		return "", fmt.Errorf("%w: %s %s is rendered for namespace %s, the member acts in %s", application.ErrNativeRequestDenied, obj.Kind, obj.Name, obj.Namespace, as.Namespace)
	}
	if err := w.enforcedShortfall(ctx, obj); err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(obj.Spec, &u.Object); err != nil {
		return "", fmt.Errorf("decode the rendered %s: %w", obj.Kind, err)
	}
	if err := stampSpecDigest(u, siteprotocol.Digest(obj.Spec)); err != nil {
		return "", fmt.Errorf("annotate the rendered %s: %w", obj.Kind, err)
	}
	if len(obj.Data) > 0 {
		// A Secret's content: never in the saved specification.
		data := map[string]any{}
		for k, v := range obj.Data {
			data[k] = base64.StdEncoding.EncodeToString(v)
		}
		u.Object["data"] = data
	}
	client, err := w.member(as)
	if err != nil {
		return "", err
	}
	created, err := client.Resource(gvr).Namespace(obj.Namespace).Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsAlreadyExists(err):
		return "", fmt.Errorf("%w: %v", application.ErrNativeExists, err)
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsNotFound(err), apierrors.IsBadRequest(err):
		return "", fmt.Errorf("%w: %v", application.ErrNativeRequestDenied, err)
	case err != nil:
		return "", err
	}
	return string(created.GetUID()), nil
}

// enforcedShortfall refuses, before any create, a specification whose
// Pods lack a field of Pod Security restricted (RestrictedShortfall: one
// saved before the Runtime rendered them) when its namespace's label
// pod-security.kubernetes.io/enforce is restricted: the API server would
// refuse its Pods, for a Job or a Deployment only after the object exists.
// The error wraps application.ErrNativeRequestDenied and
// application.ErrPodSecurityViolation, naming the missing field
// (docs/site-runtime.md#pod-security). A namespace the Runtime cannot read
// leaves the decision to the API server.
func (w *Workloads) enforcedShortfall(ctx context.Context, obj application.NativeObject) error {
	missing, err := RestrictedShortfall(obj.Kind, obj.Spec)
	if err != nil || missing == "" {
		return err
	}
	ns, err := w.client.CoreV1().Namespaces().Get(ctx, obj.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return fmt.Errorf("read namespace %s: %w", obj.Namespace, err)
	}
	if ns.Labels[NamespacePodSecurityEnforce] != PodSecurityRestricted {
		return nil
	}
	return fmt.Errorf("%w: %w: its saved specification has no %s, and namespace %s enforces Pod Security %s (%s=%s), which would refuse its Pods; nothing was created",
		application.ErrNativeRequestDenied, application.ErrPodSecurityViolation, missing, obj.Namespace, PodSecurityRestricted, NamespacePodSecurityEnforce, PodSecurityRestricted)
}

// stampSpecDigest sets the spec-digest annotation on u (every kind) and,
// for a Deployment, on its Pod template too, so every Pod of the
// Deployment names the specification it was rendered from.
func stampSpecDigest(u *unstructured.Unstructured, digest string) error {
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationSpecDigest] = digest
	u.SetAnnotations(ann)
	if u.GetKind() != domain.KindDeployment {
		return nil
	}
	tmpl, _, err := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
	if err != nil {
		return fmt.Errorf("read the Pod template's annotations: %w", err)
	}
	if tmpl == nil {
		tmpl = map[string]string{}
	}
	tmpl[AnnotationSpecDigest] = digest
	return unstructured.SetNestedStringMap(u.Object, tmpl, "spec", "template", "metadata", "annotations")
}

// GetByUID reads the object ref names with get (a typed client's Get of
// ref's namespace) as the Runtime: found is false when no object of ref's
// name and UID exists (none of the name, or another UID holds it).
func GetByUID[T metav1.Object](ctx context.Context, ref siteprotocol.NativeRef, get func(context.Context, string, metav1.GetOptions) (T, error)) (T, bool, error) {
	var none T
	obj, err := get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return none, false, nil
	case err != nil:
		return none, false, err
	case string(obj.GetUID()) != ref.UID:
		return none, false, nil
	}
	return obj, true, nil
}

// Get reads the object of a kind the Runtime reads under namespace/name
// as the Runtime; found is false when none exists.
func (w *Workloads) Get(ctx context.Context, kind, namespace, name string) (*unstructured.Unstructured, bool, error) {
	gvr, ok := readableOf(kind)
	if !ok {
		return nil, false, fmt.Errorf("the Runtime does not manage %s objects", kind)
	}
	u, err := w.dynamic.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return u, true, nil
}

// Workloads is the Kubernetes backend's adopt check and identity-bound
// delete of the shared lifecycle: the identity is metadata.uid, the scope
// the namespace.
var _ application.NativeIdentity = (*Workloads)(nil)

// Lookup reads the object under obj's name as the Runtime and compares it
// with obj's specification (Mismatch).
func (w *Workloads) Lookup(ctx context.Context, obj application.NativeObject) (application.LiveObject, bool, error) {
	u, found, err := w.Get(ctx, obj.Kind, obj.Namespace, obj.Name)
	if err != nil || !found {
		return application.LiveObject{}, found, err
	}
	m, err := Mismatch(obj.Spec, u.Object)
	if err != nil {
		return application.LiveObject{}, true, err
	}
	return application.LiveObject{UID: string(u.GetUID()), Deleting: u.GetDeletionTimestamp() != nil, Mismatch: m}, true, nil
}

// Delete deletes ref as the Runtime with Preconditions{UID} and foreground
// propagation: 404 is gone; 409 means the name may hold another object, so
// it is read again — another UID is Foreign (never touched), ours is
// deleted again.
func (w *Workloads) Delete(ctx context.Context, ref siteprotocol.NativeRef) (application.DeleteOutcome, error) {
	gvr, ok := resourceOf(ref.Kind)
	if !ok {
		return application.DeleteOutcome{}, fmt.Errorf("the Runtime does not manage %s objects", ref.Kind)
	}
	uid := types.UID(ref.UID)
	fg := metav1.DeletePropagationForeground
	for range 5 {
		err := w.dynamic.Resource(gvr).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &fg,
		})
		switch {
		case err == nil:
			return application.DeleteOutcome{}, nil
		case apierrors.IsNotFound(err):
			return application.DeleteOutcome{Gone: true}, nil
		case !apierrors.IsConflict(err):
			return application.DeleteOutcome{}, err
		}
		out, gone, err := w.stillThere(ctx, ref)
		if err != nil || gone {
			return out, err
		}
	}
	return application.DeleteOutcome{}, fmt.Errorf("delete %s %s/%s uid %s: conflicts without another object", ref.Kind, ref.Namespace, ref.Name, ref.UID)
}

// stillThere reads ref's name: gone is true when no object with ref.UID
// holds it (out then names a foreign holder).
func (w *Workloads) stillThere(ctx context.Context, ref siteprotocol.NativeRef) (out application.DeleteOutcome, gone bool, err error) {
	u, found, err := w.Get(ctx, ref.Kind, ref.Namespace, ref.Name)
	switch {
	case err != nil:
		return out, false, err
	case !found:
		return application.DeleteOutcome{Gone: true}, true, nil
	case string(u.GetUID()) != ref.UID:
		f := siteprotocol.NativeRef{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: string(u.GetUID())}
		return application.DeleteOutcome{Gone: true, Foreign: &f}, true, nil
	}
	return out, false, nil
}

// WaitGone polls (every 250 ms) until no object with ref.UID exists, or
// ctx ends (then it returns ctx.Err()). Each read runs under its own bound
// (getTimeout), not under ctx's deadline, so a read that client-go's rate
// limiter would delay past the wait's deadline is not mistaken for an API
// failure: only the wait's own end decides "still being deleted".
func (w *Workloads) WaitGone(ctx context.Context, ref siteprotocol.NativeRef) (application.DeleteOutcome, error) {
	const getTimeout = 10 * time.Second
	t := time.NewTicker(w.poll)
	defer t.Stop()
	for {
		getCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), getTimeout)
		out, gone, err := w.stillThere(getCtx, ref)
		cancel()
		if gone {
			return out, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return application.DeleteOutcome{}, ctx.Err()
			}
			return out, err
		}
		select {
		case <-ctx.Done():
			return application.DeleteOutcome{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Timestamp is t as observe reports times (RFC 3339, UTC); empty when t
// is unset.
func Timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Interface checks.
var (
	_ application.NativeObjects     = (*Workloads)(nil)
	_ application.ProjectNamespaces = (*Workloads)(nil)
	_ application.WorkspaceSpecs    = (*Renderer)(nil)
)
