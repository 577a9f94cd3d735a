package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// PodChain is how a workload's Pods lead, by controller owner references,
// to the object the Runtime recorded (docs/site-runtime.md#private-reads).
type PodChain struct {
	// Links are the kinds from the Pod's controller up to the recorded
	// object, which is the last: a Job's Pods {Job}; a Deployment's
	// {ReplicaSet, Deployment}; an InferenceService's {ReplicaSet,
	// Deployment, InferenceService}. The objects between are read live,
	// never recorded (a Deployment's ReplicaSet; KServe's predictor
	// Deployment).
	Links []string
	// Names, when set, fixes the name of a link's object: the object of
	// that kind must be named the recorded object's name followed by the
	// suffix (KServe's predictor Deployment, <isvc>-predictor).
	Names map[string]string
	// Main is the workload's own container, read when a payload names none.
	Main string
	// CheckPod, when set, is a family's own rule on a Pod whose chain is
	// exact, against root (the recorded object) and saved (its saved
	// specification): an inference Pod's private argument rule. A
	// non-empty answer is the mismatch; an error is a failed check
	// (nothing is known).
	CheckPod func(pod *corev1.Pod, root siteprotocol.NativeRef, saved []byte) (string, error)
}

// PodChains are the chains of the recorded kinds whose Pods the private
// reads read: batch's Job and the application family's Deployment. A
// family adds its own (KServe's InferenceService: InferencePodChain, with
// the private argument rule) with Workloads.WithPodChain.
func PodChains() map[string]PodChain {
	return map[string]PodChain{
		domain.KindJob:        {Links: []string{domain.KindJob}, Main: ContainerName},
		domain.KindDeployment: {Links: []string{domain.KindReplicaSet, domain.KindDeployment}, Main: ContainerName},
	}
}

// WithPodChain adds (or replaces) the chain of a recorded kind; each link
// kind must be one the adaptor reads. It returns w.
func (w *Workloads) WithPodChain(kind string, c PodChain) *Workloads {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.chains[kind] = c
	return w
}

func (w *Workloads) chain(kind string) (PodChain, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.chains[kind]
	return c, ok
}

// WorkloadPod finds the Pod of root, the Attempt's recorded object whose
// saved specification is saved, as the Runtime (application.WorkloadPods):
// root's name must hold root.UID (another UID: the object was made again
// under the recorded name) and carry id's identity labels; every Pod
// labelled with the Attempt must have root's chain — each link the Pod's
// (then the object's) controller owner reference of the link's kind and
// API group, whose UID is the live UID of the object of that name (and
// the name the chain's Names fix), the last link root itself — every
// object of it the identity labels, and pass the chain's CheckPod. One
// Pod whose chain is broken refuses the read, even beside an exact one: a
// Pod the Runtime cannot explain is never read past. Of the exact Pods,
// readablePod's is read (the newest bound one not being deleted). Errors wrap
// application.ErrNativeIdentityMismatch, application.ErrWorkloadGone or
// application.ErrNoWorkloadPod as the port says.
func (w *Workloads) WorkloadPod(ctx context.Context, root siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity) (application.WorkloadPod, error) {
	chain, ok := w.chain(root.Kind)
	if !ok || len(chain.Links) == 0 || chain.Links[len(chain.Links)-1] != root.Kind {
		return application.WorkloadPod{}, fmt.Errorf("the Runtime reads no Pods of %s objects", root.Kind)
	}
	top, found, err := w.Get(ctx, root.Kind, root.Namespace, root.Name)
	switch {
	case err != nil:
		return application.WorkloadPod{}, fmt.Errorf("read %s %s/%s: %w", root.Kind, root.Namespace, root.Name, err)
	case !found:
		return application.WorkloadPod{}, fmt.Errorf("%w: %s %s/%s (uid %s) no longer exists", application.ErrWorkloadGone, root.Kind, root.Namespace, root.Name, root.UID)
	case string(top.GetUID()) != root.UID:
		return application.WorkloadPod{}, fmt.Errorf("%w: %s %s/%s has uid %s; the Runtime recorded uid %s (another object under the recorded name)",
			application.ErrNativeIdentityMismatch, root.Kind, root.Namespace, root.Name, top.GetUID(), root.UID)
	}
	if m := IdentityMismatch(top.GetLabels(), id); m != "" {
		return application.WorkloadPod{}, fmt.Errorf("%w: %s %s/%s (uid %s) %s", application.ErrNativeIdentityMismatch, root.Kind, root.Namespace, root.Name, root.UID, m)
	}
	pods, err := w.client.CoreV1().Pods(root.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelAttempt + "=" + id.AttemptID})
	if err != nil {
		return application.WorkloadPod{}, fmt.Errorf("list the Pods of attempt %s: %w", id.AttemptID, err)
	}
	// The Attempt's helper Pods (attempt-<attempt>-git and the like) are
	// the Runtime's own, not the workload's: they are not in any chain.
	var exact []corev1.Pod
	seen := map[string]string{} // object kind/name → its live UID, read once
	for _, p := range pods.Items {
		if isHelperPod(p.Name, id.AttemptID) {
			continue
		}
		if m, err := w.ExactPod(ctx, &p, chain, root, saved, id, seen); err != nil {
			return application.WorkloadPod{}, err
		} else if m != "" {
			return application.WorkloadPod{}, fmt.Errorf("%w: Pod %s/%s (uid %s) %s", application.ErrNativeIdentityMismatch, p.Namespace, p.Name, p.UID, m)
		}
		exact = append(exact, p)
	}
	if len(exact) == 0 {
		return application.WorkloadPod{}, fmt.Errorf("%w: %s %s/%s (uid %s) has no Pod (none yet, or none any more)", application.ErrNoWorkloadPod, root.Kind, root.Namespace, root.Name, root.UID)
	}
	p := readablePod(exact)
	wp := application.WorkloadPod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Main: chain.Main, Node: p.Spec.NodeName, Ready: PodReady(p)}
	for _, c := range p.Spec.Containers {
		wp.Containers = append(wp.Containers, c.Name)
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			wp.Started = append(wp.Started, st.Name)
		}
	}
	return wp, nil
}

// readablePod is the Pod a private read uses of an Attempt's exact Pods
// (at least one): one not being deleted before one that is, then one bound
// to a node (spec.nodeName) before one still pending, then the newest, then
// by name. A replacement Pod not yet scheduled has no log and no node, so a
// read-logs reads, and a read-file's reader is placed beside, the running
// Pod that holds the ReadWriteOnce claim
// (docs/site-runtime.md#the-workspace-reader).
func readablePod(exact []corev1.Pod) corev1.Pod {
	pods := slices.Clone(exact)
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
			return a.DeletionTimestamp == nil
		}
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			return a.Spec.NodeName != ""
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return pods[0]
}

// isHelperPod reports whether name is one of the Attempt's reserved
// helper names (docs/site-runtime.md#native-naming-and-identity): the
// repository helper and the file reader are the Runtime's, not the
// workload's.
func isHelperPod(name, attempt string) bool {
	return name == domain.AttemptObjectName(attempt, domain.SuffixHelper) || name == domain.AttemptObjectName(attempt, domain.SuffixReader)
}

// ExactPod checks pod's controller chain (checkChain) and then the
// chain's own Pod rule (CheckPod) against root and its saved
// specification; it answers the first mismatch (empty when the Pod is
// exact) or an error of a failed read or check. seen holds the live UIDs
// of the chain's objects read so far in one read (kind/name → UID), which
// every Pod of that read must agree with.
func (w *Workloads) ExactPod(ctx context.Context, pod *corev1.Pod, chain PodChain, root siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity, seen map[string]string) (string, error) {
	m, err := w.checkChain(ctx, pod, chain, root, id, seen)
	if m != "" || err != nil || chain.CheckPod == nil {
		return m, err
	}
	return chain.CheckPod(pod, root, saved)
}

// checkChain walks pod's controller chain; it answers the first broken
// link (empty when the chain is exact) or an error of a failed read.
func (w *Workloads) checkChain(ctx context.Context, pod *corev1.Pod, chain PodChain, root siteprotocol.NativeRef, id application.ObjectIdentity, seen map[string]string) (string, error) {
	if m := IdentityMismatch(pod.Labels, id); m != "" {
		return m, nil
	}
	owner := metav1.GetControllerOf(pod)
	what := "Pod " + pod.Name
	for i, kind := range chain.Links {
		gvr, ok := readableOf(kind)
		if !ok {
			return "", fmt.Errorf("the Runtime does not read %s objects", kind)
		}
		if owner == nil {
			return fmt.Sprintf("has no controller owner reference where its chain needs a %s (%s)", kind, what), nil
		}
		if owner.Kind != kind || GroupOf(owner.APIVersion) != gvr.Group {
			return fmt.Sprintf("is controlled by %s %s (%s), where its chain needs a %s (%s)", owner.Kind, owner.Name, owner.APIVersion, kind, what), nil
		}
		last := i == len(chain.Links)-1
		if last {
			if owner.Name != root.Name || string(owner.UID) != root.UID {
				return fmt.Sprintf("leads to %s %s (uid %s), not to the recorded %s %s (uid %s)", kind, owner.Name, owner.UID, root.Kind, root.Name, root.UID), nil
			}
			return "", nil
		}
		if suffix, ok := chain.Names[kind]; ok && owner.Name != root.Name+suffix {
			return fmt.Sprintf("is controlled by %s %s (%s), where its chain needs %s %s%s", kind, owner.Name, what, kind, root.Name, suffix), nil
		}
		key := kind + "/" + owner.Name
		u, found, err := w.Get(ctx, kind, pod.Namespace, owner.Name)
		if err != nil {
			return "", fmt.Errorf("read %s %s/%s: %w", kind, pod.Namespace, owner.Name, err)
		}
		if !found {
			return fmt.Sprintf("names controller %s %s (uid %s), which does not exist", kind, owner.Name, owner.UID), nil
		}
		if string(u.GetUID()) != string(owner.UID) {
			return fmt.Sprintf("names controller %s %s with uid %s; the live %s of that name has uid %s", kind, owner.Name, owner.UID, kind, u.GetUID()), nil
		}
		if prev, ok := seen[key]; ok && prev != string(u.GetUID()) {
			return fmt.Sprintf("names controller %s %s, whose uid changed while it was read", kind, owner.Name), nil
		}
		seen[key] = string(u.GetUID())
		if m := IdentityMismatch(u.GetLabels(), id); m != "" {
			return fmt.Sprintf("is controlled by %s %s (uid %s), which %s", kind, owner.Name, owner.UID, m), nil
		}
		what = kind + " " + owner.Name
		owner = ControllerOf(u.GetOwnerReferences())
	}
	return "", nil
}

// ControllerOf is the controller owner reference among refs, nil when
// none is a controller.
func ControllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// GroupOf is the API group of an apiVersion ("apps/v1" → "apps", "v1" →
// "").
func GroupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// IdentityMismatch names the first identity label (run, attempt, member,
// Project) that labels lacks or holds differently from id; empty when all
// match. The command label differs by object (the command that created
// it) and is not compared.
func IdentityMismatch(labels map[string]string, id application.ObjectIdentity) string {
	for _, l := range []struct{ key, want string }{
		{LabelRun, id.RunID}, {LabelAttempt, id.AttemptID}, {LabelMember, id.MemberID}, {LabelProject, id.ProjectID},
	} {
		if got, ok := labels[l.key]; !ok || got != l.want {
			return fmt.Sprintf("carries label %s=%q, not the Attempt's %q", l.key, got, l.want)
		}
	}
	return ""
}

// PodLog reads the last tailBytes bytes of container's log in pod as the
// Runtime (pods/log), exactly (application.WorkloadPods). The kubelet's
// limitBytes with tailLines answers the head of a tail, so neither is used
// to cut the bytes: the log is asked for its last n lines (tailLines), n
// doubling from tailBytes/128 (at least 16), each answer read through a
// ring of tailBytes+1 bytes (memory stays bounded whatever a line's
// length), until the answer holds more than tailBytes bytes (truncated:
// its last tailBytes bytes are the log's), n exceeds tailBytes (every
// line, even an empty one, is at least a byte: the answer is the whole
// log), or two answers have the same length (no line was left out: the
// whole log). An error status of the API server (the kubelet has no log
// to give: a container not started, 400; a kubelet that cannot be
// reached) wraps application.ErrLogUnavailable.
func (w *Workloads) PodLog(ctx context.Context, pod application.WorkloadPod, container string, tailBytes int64) (application.LogTail, error) {
	return LogTail(tailBytes, func(lines, keep int64) ([]byte, int64, error) {
		return w.logTail(ctx, pod, container, lines, keep)
	})
}

// LogTail is PodLog's search for the last tailBytes bytes of a log over
// read, which answers the last keep bytes of the log's last lines lines
// (the kubelet's tailLines, whose lines may be the container runtime's
// records: a long line split in parts counts as several) and how many
// bytes those lines held.
func LogTail(tailBytes int64, read func(lines, keep int64) ([]byte, int64, error)) (application.LogTail, error) {
	if tailBytes < 1 {
		return application.LogTail{}, fmt.Errorf("tail of %d bytes", tailBytes)
	}
	lines := max(tailBytes/128, 16)
	prev := int64(-1)
	for {
		last, total, err := read(lines, tailBytes)
		if err != nil {
			return application.LogTail{}, err
		}
		switch {
		case total > tailBytes:
			return application.LogTail{Bytes: last, Truncated: true}, nil
		case total == prev, lines > tailBytes:
			return application.LogTail{Bytes: last}, nil
		}
		prev = total
		lines *= 2
	}
}

// logTail reads the container's last lines lines and returns the last
// keep bytes of them and how many bytes the answer held.
func (w *Workloads) logTail(ctx context.Context, pod application.WorkloadPod, container string, lines, keep int64) ([]byte, int64, error) {
	rc, err := w.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, TailLines: &lines}).Stream(ctx)
	var status apierrors.APIStatus
	switch {
	case err != nil && errors.As(err, &status):
		// The API server answered: the kubelet has no log to give (400:
		// not started; 404; 5xx: the kubelet cannot be reached). Asking
		// again would hold the ordered stream for a node that may never
		// answer.
		return nil, 0, fmt.Errorf("%w: %v", application.ErrLogUnavailable, err)
	case err != nil:
		return nil, 0, err
	}
	defer func() { _ = rc.Close() }()
	r := newRing(keep)
	n, err := io.Copy(r, rc)
	if err != nil {
		return nil, 0, fmt.Errorf("read the log of %s/%s container %s: %w", pod.Namespace, pod.Name, container, err)
	}
	return r.bytes(), n, nil
}

// ring keeps the last size bytes written to it.
type ring struct {
	buf  []byte
	size int
	full bool
	at   int
}

func newRing(size int64) *ring {
	return &ring{buf: make([]byte, 0, min(size, 64<<10)), size: int(size)}
}

func (r *ring) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= r.size {
		r.buf = append(r.buf[:0], p[len(p)-r.size:]...)
		r.full, r.at = true, 0
		return n, nil
	}
	if !r.full {
		room := r.size - len(r.buf)
		if len(p) <= room {
			r.buf = append(r.buf, p...)
			r.full = len(r.buf) == r.size
			return n, nil
		}
		r.buf = append(r.buf, p[:room]...)
		p = p[room:]
		r.full = true
	}
	for len(p) > 0 {
		c := copy(r.buf[r.at:], p)
		p = p[c:]
		r.at = (r.at + c) % r.size
	}
	return n, nil
}

func (r *ring) bytes() []byte {
	if !r.full {
		return append([]byte(nil), r.buf...)
	}
	out := make([]byte, 0, r.size)
	out = append(out, r.buf[r.at:]...)
	return append(out, r.buf[:r.at]...)
}

var _ application.WorkloadPods = (*Workloads)(nil)
