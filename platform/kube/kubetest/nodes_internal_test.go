package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// A wait ends at once, naming the Node and the change, when a watched Node's readiness changes
// during it, and a wait that begins while the Node is not Ready ends at once too. The Node is the
// test's own (unschedulable and tainted, so no Pod lands on it, and managed by nobody: not KWOK),
// not one of the cluster's fake Nodes, whose readiness every other test depends on. Real: the API
// server, the watch, the node lifecycle controller (which may take the Node, renewed by nobody,
// for unreachable first: its change ends the wait as well and is named the same way).
func TestAWaitEndsAtOnceNamingTheNodeWhoseReadinessChanges(t *testing.T) {
	t.Parallel()
	e := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := "kt-" + e.Namespace[len(e.Namespace)-6:] + "-readiness"
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{NamespaceLabel: "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{
			Key: "metallo.dev/kubetest", Value: "readiness", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	_, err := e.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete node %s: %v", name, err)
		}
	})
	setReady := func(status corev1.ConditionStatus, reason, message string) {
		t.Helper()
		now := metav1.Now()
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now,
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{FieldManager: "kubetest-readiness"}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	setReady(corev1.ConditionTrue, "KubeletReady", "ready (set by the test)")

	stop := make(chan struct{})
	defer close(stop)
	w, err := watchNodes(e.Client, []string{name}, stop)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, seen := w.ready[name]
		return seen, nil
	}); err != nil {
		t.Fatalf("the watch never saw node %s: %v", name, err)
	}

	// The guard takes its starting point when it is made: the change comes after it.
	guarded, release := w.guard(ctx)
	defer release()
	setReady(corev1.ConditionFalse, "KubeletNotReady", "not ready (set by the test)")
	<-guarded.Done()
	c := changed(guarded)
	if c == nil {
		t.Fatalf("the wait ended with %v; want the readiness change of node %s", context.Cause(guarded), name)
	}
	err = c
	if c.Node != name || c.To == corev1.ConditionTrue || !strings.Contains(err.Error(), name) ||
		!strings.Contains(err.Error(), "Lease kube-node-lease/"+name+": none") {
		t.Fatalf("the wait ended with %q (%+v); want node %s named, no longer Ready, and its missing Lease", err, c, name)
	}
	switch {
	case c.Event == "MODIFIED" && c.To == corev1.ConditionFalse:
		if c.From != corev1.ConditionTrue || c.Reason != "KubeletNotReady" || !strings.Contains(c.Writer, "kubetest-readiness") ||
			!strings.Contains(err.Error(), "Ready True -> False") {
			t.Fatalf("the wait ended with %q (%+v); want True -> False, reason KubeletNotReady, written by kubetest-readiness", err, c)
		}
	case c.Event == "MODIFIED" && c.To == corev1.ConditionUnknown:
		t.Logf("the node lifecycle controller took node %s for unreachable before the test's change", name)
	case c.Event == eventNotReadyAtStart:
		t.Logf("node %s was no longer Ready when the wait began", name)
	default:
		t.Fatalf("the wait ended with %q (%+v)", err, c)
	}
	t.Logf("the wait ended with: %v", err)

	// The Node is not Ready now: a poll that begins ends at once with the cause, though its
	// condition never holds and its timeout is an hour.
	err = w.poll(ctx, 100*time.Millisecond, time.Hour, func(context.Context) (bool, error) { return false, nil })
	if !errors.As(err, &c) || c.Node != name || c.Event != eventNotReadyAtStart || !strings.Contains(err.Error(), "was not Ready when the wait began") {
		t.Fatalf("a wait begun while node %s is not Ready ended with %v", name, err)
	}
}
