package kubetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NodeReadinessChanged is the error a kubetest wait (Until, UntilGone, the WaitFor helpers,
// Poll) ends with, at once, when a fake Node's Ready condition changes while it waits, or when a
// fake Node is not Ready as it begins: whatever the wait was for depends on Pods the Node's
// readiness decides (docs/testing.md, "What the fake Nodes' readiness depends on").
type NodeReadinessChanged struct {
	// Node is the fake Node's name.
	Node string
	// Event is the watch event that showed the change (MODIFIED, DELETED), or "not Ready when
	// the wait began".
	Event string
	// From and To are the Ready condition's status before and after ("" when there was none).
	From, To corev1.ConditionStatus
	// Reason and Message are the Ready condition's after the change; At is its
	// lastTransitionTime.
	Reason, Message string
	At              time.Time
	// Writer is the field manager of the Node's last status write, with its operation and time:
	// the controller manager's (localcluster, the local cluster's one binary) when the node
	// lifecycle controller took the Node for unreachable, KWOK's when it made it Ready again.
	Writer string
	// Lease is the Node's Lease in kube-node-lease as it was when the change was seen.
	Lease string
}

func (c *NodeReadinessChanged) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fake Node %s ", c.Node)
	if c.Event == eventNotReadyAtStart {
		fmt.Fprintf(&b, "was not Ready when the wait began: Ready %s", orNone(c.To))
	} else {
		fmt.Fprintf(&b, "changed readiness during the wait (watch event %s): Ready %s -> %s", c.Event, orNone(c.From), orNone(c.To))
	}
	if !c.At.IsZero() {
		fmt.Fprintf(&b, " at %s", c.At.UTC().Format(time.RFC3339))
	}
	if c.Reason != "" || c.Message != "" {
		fmt.Fprintf(&b, " (%s: %s)", c.Reason, c.Message)
	}
	if c.Writer != "" {
		fmt.Fprintf(&b, ", status written by %s", c.Writer)
	}
	fmt.Fprintf(&b, "; %s", c.Lease)
	return b.String()
}

const eventNotReadyAtStart = "not Ready when the wait began"

func orNone(s corev1.ConditionStatus) string {
	if s == "" {
		return "(none)"
	}
	return string(s)
}

// nodeWatch follows the readiness of the cluster's fake Nodes for the test binary: one
// informer on Nodes, started when the binary attaches to the cluster, running until it exits.
type nodeWatch struct {
	names  []string
	client kubernetes.Interface
	synced cache.InformerSynced

	mu      sync.Mutex
	ready   map[string]corev1.ConditionStatus // each fake Node's Ready status as last seen
	changes []*NodeReadinessChanged           // every change seen, in order
	notify  chan struct{}                     // closed, and replaced, at each change
}

// watchNodes starts following the readiness of the fake Nodes names through client, until stop
// is closed.
func watchNodes(client kubernetes.Interface, names []string, stop <-chan struct{}) (*nodeWatch, error) {
	w := &nodeWatch{names: names, client: client, ready: map[string]corev1.ConditionStatus{}, notify: make(chan struct{})}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", "", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*corev1.Node); ok && w.fake(n.Name) {
				w.seen(n, "ADDED")
			}
		},
		UpdateFunc: func(_, o any) {
			if n, ok := o.(*corev1.Node); ok && w.fake(n.Name) {
				w.seen(n, "MODIFIED")
			}
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if n, ok := o.(*corev1.Node); ok && w.fake(n.Name) {
				w.gone(n)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("kubetest: watch the fake Nodes: %w", err)
	}
	w.synced = inf.HasSynced
	go inf.Run(stop)
	return w, nil
}

func (w *nodeWatch) fake(name string) bool { return slices.Contains(w.names, name) }

func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// seen records n's Ready status; a change from the last one seen is recorded and broadcast.
func (w *nodeWatch) seen(n *corev1.Node, event string) {
	c := readyCondition(n)
	w.mu.Lock()
	before, known := w.ready[n.Name]
	w.ready[n.Name] = c.Status
	w.mu.Unlock()
	if !known || before == c.Status {
		return
	}
	w.record(&NodeReadinessChanged{
		Node: n.Name, Event: event, From: before, To: c.Status, Reason: c.Reason, Message: c.Message,
		At: c.LastTransitionTime.Time, Writer: statusWriter(n), Lease: w.lease(n.Name),
	})
}

func (w *nodeWatch) gone(n *corev1.Node) {
	w.mu.Lock()
	before := w.ready[n.Name]
	delete(w.ready, n.Name)
	w.mu.Unlock()
	w.record(&NodeReadinessChanged{Node: n.Name, Event: "DELETED", From: before, Lease: w.lease(n.Name)})
}

func (w *nodeWatch) record(c *NodeReadinessChanged) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes = append(w.changes, c)
	close(w.notify)
	w.notify = make(chan struct{})
}

// statusWriter is the field manager of n's latest status write.
func statusWriter(n *corev1.Node) string {
	var last *metav1.ManagedFieldsEntry
	for i, m := range n.ManagedFields {
		if m.Subresource == "status" && m.Time != nil && (last == nil || !m.Time.Before(last.Time)) {
			last = &n.ManagedFields[i]
		}
	}
	if last == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s at %s)", last.Manager, last.Operation, last.Time.UTC().Format(time.RFC3339))
}

// lease describes the Node's Lease in kube-node-lease: its holder, last renewal and duration.
func (w *nodeWatch) lease(node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	what := fmt.Sprintf("Lease %s/%s", corev1.NamespaceNodeLease, node)
	l, err := w.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return what + ": none (nothing renews the Node's heartbeat)"
	case err != nil:
		return fmt.Sprintf("%s: %v", what, err)
	}
	desc := what + ":"
	if l.Spec.HolderIdentity != nil {
		desc += " held by " + *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		desc += fmt.Sprintf(", renewed at %s (%s before the change was seen)", l.Spec.RenewTime.UTC().Format(time.RFC3339Nano),
			time.Since(l.Spec.RenewTime.Time).Round(time.Millisecond))
	}
	if l.Spec.LeaseDurationSeconds != nil {
		desc += fmt.Sprintf(", duration %ds", *l.Spec.LeaseDurationSeconds)
	}
	return desc
}

// guard returns a context that ends, with a *NodeReadinessChanged as its cause, at the first
// change of a fake Node's readiness after the call, or at once when a fake Node is not Ready
// once the informer has synced; stop releases it.
func (w *nodeWatch) guard(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	if w == nil {
		return ctx, func() { cancel(nil) }
	}
	w.mu.Lock()
	from := len(w.changes)
	w.mu.Unlock()
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), w.synced) {
			return
		}
		first := true
		for {
			w.mu.Lock()
			if len(w.changes) > from {
				c := w.changes[from]
				w.mu.Unlock()
				cancel(c)
				return
			}
			if first {
				first = false
				for _, n := range w.names {
					if s := w.ready[n]; s != corev1.ConditionTrue {
						w.mu.Unlock()
						cancel(&NodeReadinessChanged{Node: n, Event: eventNotReadyAtStart, To: s, Lease: w.lease(n)})
						return
					}
				}
			}
			notify := w.notify
			w.mu.Unlock()
			select {
			case <-notify:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}

// changed returns the *NodeReadinessChanged that ended ctx, or nil.
func changed(ctx context.Context) *NodeReadinessChanged {
	var c *NodeReadinessChanged
	if errors.As(context.Cause(ctx), &c) {
		return c
	}
	return nil
}

// nodes is the test binary's watch of the shared cluster's fake Nodes, or nil when it has none.
func nodes() *nodeWatch {
	c, err := shared()
	if err != nil {
		return nil
	}
	return c.nodes
}

// Poll calls cond every interval, at once first, until it returns true or an error, timeout
// passes or ctx ends, as wait.PollUntilContextTimeout does; it ends at once, returning the
// *NodeReadinessChanged, when a fake Node's readiness changes meanwhile or a fake Node is not
// Ready as it begins. Tests poll the cluster with it when a single watch (Until) cannot say
// what they wait for.
func Poll(ctx context.Context, interval, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return nodes().poll(ctx, interval, timeout, cond)
}

func (w *nodeWatch) poll(ctx context.Context, interval, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	gctx, stop := w.guard(ctx)
	defer stop()
	err := wait.PollUntilContextTimeout(gctx, interval, timeout, true, cond)
	if c := changed(gctx); c != nil {
		return c
	}
	return err
}
