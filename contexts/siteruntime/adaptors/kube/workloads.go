package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
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
	return &Workloads{config: cfg, client: cs, dynamic: dyn, poll: 250 * time.Millisecond, members: map[string]dynamic.Interface{}, chains: PodChains()}, nil
}

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

func (w *Workloads) get(ctx context.Context, kind, namespace, name string) (*unstructured.Unstructured, bool, error) {
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
	u, found, err := w.get(ctx, obj.Kind, obj.Namespace, obj.Name)
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
	u, found, err := w.get(ctx, ref.Kind, ref.Namespace, ref.Name)
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

// ObserveJob reads the Job ref names, its Pods and (while it has no Pod)
// its events as the Runtime and reports JobObservation of them. When that
// quotes a quota refusal ("exceeded quota: <name>, …"), the quota is read
// too: if it is gone, or the refused request fits its hard limits and
// usage as they are now, the refusal no longer holds and is not quoted
// (queued, saying the quota now has room and the Job controller creates
// the Pod at its next try). found is false when no Job with ref's name and
// UID exists.
func (w *Workloads) ObserveJob(ctx context.Context, ref siteprotocol.NativeRef) (application.Observation, bool, error) {
	job, err := w.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return application.Observation{}, false, nil
	}
	if err != nil {
		return application.Observation{}, false, err
	}
	if string(job.UID) != ref.UID {
		return application.Observation{}, false, nil
	}
	pods, err := w.client.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + ref.UID})
	if err != nil {
		return application.Observation{}, false, err
	}
	var events []corev1.Event
	if _, finished := terminalCondition(job); !finished && len(pods.Items) == 0 {
		list, err := w.client.CoreV1().Events(ref.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", ref.UID).String(),
		})
		if err != nil {
			return application.Observation{}, false, err
		}
		events = list.Items
	}
	obs := JobObservation(job, pods.Items, events)
	if obs.Reason == "FailedCreate" {
		if obs, err = w.quotaNow(ctx, ref.Namespace, obs, quotaOver); err != nil {
			return application.Observation{}, false, err
		}
	}
	return obs, true, nil
}

// quotaOver is obs once the quota refusal it quotes no longer holds: the
// Run is queued until the Job controller's next try creates the Pod.
func quotaOver(obs application.Observation, why string) application.Observation {
	obs.Reason = ""
	obs.Message = "no Pod of the Job yet: its last Pod create was refused by the namespace quota, but " + why +
		"; the Job controller creates the Pod at its next try"
	return obs
}

// JobObservation is the state of job, with its Pods and events, as observe
// reports it (docs/site-runtime.md#quota-means-queued). Every field comes
// from the current objects or the Job's newest event, never from an
// earlier reading:
//
//   - succeeded or failed from the Job's Complete or Failed condition, with
//     the condition's reason and message; a failed Job whose Pod names why it
//     failed (the kubelet's DeadlineExceeded, Evicted) reports the Pod's
//     reason, the Job's following in the message. A finished Job reports the
//     exit code of its container ContainerName in the Pod that terminated
//     last (absent when no Pod's termination is known any more);
//   - running while one of its Pods runs;
//   - queued otherwise: with a Pod that is not running yet, that Pod's
//     PodScheduled condition when it is false (e.g. Unschedulable); with no
//     Pod, the Job's newest event when it is a refused Pod create
//     (FailedCreate, e.g. "exceeded quota"): once a Pod exists, that refusal
//     is over and never quoted again.
//
// started_at is the Job's status.startTime and finished_at its terminal
// condition's lastTransitionTime, each set once by the Job controller, so
// every observe of the Job (and its recorded terminal state) reports the
// same times.
func JobObservation(job *batchv1.Job, pods []corev1.Pod, events []corev1.Event) application.Observation {
	started := timestamp(job.Status.StartTime)
	if c, ok := terminalCondition(job); ok {
		obs := application.Observation{Reason: c.Reason, Message: c.Message, StartedAt: started, FinishedAt: timestamp(&c.LastTransitionTime)}
		p, code := lastTermination(pods)
		if p != nil {
			obs.ExitCode = &code
		}
		if c.Type == batchv1.JobComplete {
			obs.State = siteprotocol.StateSucceeded
			return obs
		}
		obs.State = siteprotocol.StateFailed
		if p != nil && p.Status.Reason != "" {
			obs.Reason = p.Status.Reason
			obs.Message = fmt.Sprintf("Pod %s: %s (Job: %s: %s)", p.Name, p.Status.Message, c.Reason, c.Message)
		}
		return obs
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			return application.Observation{State: siteprotocol.StateRunning, StartedAt: started}
		}
	}
	obs := application.Observation{State: siteprotocol.StateQueued, StartedAt: started, Message: "no Pod of the Job is running yet"}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		obs.Message = fmt.Sprintf("Pod %s is pending", p.Name)
		if c, ok := unscheduled(p); ok {
			obs.Reason, obs.Message = c.Reason, fmt.Sprintf("Pod %s: %s", p.Name, c.Message)
		}
		return obs
	}
	if len(pods) > 0 {
		return obs
	}
	// No Pod: a Pod refused by the namespace quota; the Job controller
	// retries, the Run waits (queued, never failed). The newest event says
	// whether its last attempt was refused.
	var latest *corev1.Event
	for i := range events {
		if e := &events[i]; latest == nil || !eventTime(e).Before(eventTime(latest)) {
			latest = e
		}
	}
	if latest != nil && latest.Reason == "FailedCreate" {
		obs.Reason, obs.Message = latest.Reason, latest.Message
	}
	return obs
}

// terminalCondition returns the Job's true Complete or Failed condition.
func terminalCondition(job *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}

// lastTermination returns the Pod whose container ContainerName
// terminated last, and that termination's exit code (nil when none did).
func lastTermination(pods []corev1.Pod) (*corev1.Pod, int32) {
	var last *corev1.Pod
	var at time.Time
	var code int32
	for i := range pods {
		for _, s := range pods[i].Status.ContainerStatuses {
			if s.Name != ContainerName || s.State.Terminated == nil {
				continue
			}
			if t := s.State.Terminated.FinishedAt.Time; last == nil || t.After(at) {
				last, at, code = &pods[i], t, s.State.Terminated.ExitCode
			}
		}
	}
	return last, code
}

// eventTime is when the event last occurred: its series' last observation,
// its lastTimestamp, or its eventTime.
func eventTime(e *corev1.Event) time.Time {
	var t time.Time
	for _, c := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

func timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Interface checks.
var (
	_ application.NativeObjects = (*Workloads)(nil)
	_ application.BatchNatives  = (*Workloads)(nil)
	_ application.BatchSpecs    = (*Renderer)(nil)
)
