package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A private read uses, of an Attempt's exact Pods, one not being deleted,
// then one bound to a node before a pending one, then the newest: a
// replacement not yet scheduled (a rolling update, a Pod evicted) never
// takes the read (no log, no node for the reader) from the running Pod.
func TestAPrivateReadUsesTheNewestBoundPodNotBeingDeleted(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+sec, 0)) }
	pod := func(name string, created int64, node string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)}, Spec: corev1.PodSpec{NodeName: node}}
		if deleting {
			now := at(100)
			p.DeletionTimestamp = &now
		}
		return p
	}
	cases := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"the newest of two bound Pods", []corev1.Pod{pod("old", 1, "n1", false), pod("new", 2, "n2", false)}, "new"},
		{"a bound Pod before a newer pending replacement", []corev1.Pod{pod("running", 1, "n1", false), pod("pending", 2, "", false)}, "running"},
		{"a Pod not being deleted before a newer one being deleted", []corev1.Pod{pod("kept", 1, "n1", false), pod("going", 2, "n2", true)}, "kept"},
		{"a pending Pod before a bound one being deleted", []corev1.Pod{pod("going", 2, "n1", true), pod("pending", 1, "", false)}, "pending"},
		{"only pending Pods: the newest", []corev1.Pod{pod("a", 1, "", false), pod("b", 2, "", false)}, "b"},
		{"the same time: by name", []corev1.Pod{pod("b", 1, "n1", false), pod("a", 1, "n1", false)}, "a"},
	}
	for _, c := range cases {
		if got := readablePod(c.pods); got.Name != c.want {
			t.Errorf("%s: read %s, want %s", c.name, got.Name, c.want)
		}
	}
}
