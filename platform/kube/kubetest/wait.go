package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Until watches the objects lw lists (an informer: the current ones first, then changes) until
// cond holds for one of them, and returns it. It fails the test after timeout, naming what it
// waited for and the last object seen, and at once, naming the Node and the change
// (NodeReadinessChanged), when a fake Node's readiness changes meanwhile. Use generous timeouts:
// this is a watch, not a sleep.
func Until[T runtime.Object](tb testing.TB, timeout time.Duration, what string, lw cache.ListerWatcher, cond func(T) bool) T {
	tb.Helper()
	var zero T
	example := reflect.New(reflect.TypeOf(zero).Elem()).Interface().(runtime.Object)
	ctx, cancel := waitContext(timeout)
	defer cancel()
	var last T
	var found T
	_, err := watchtools.UntilWithSync(ctx, lw, example, nil, func(ev watch.Event) (bool, error) {
		o, ok := ev.Object.(T)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		last = o
		if cond(o) {
			found = o
			return true, nil
		}
		return false, nil
	})
	if c := changed(ctx); c != nil {
		tb.Fatalf("kubetest: stopped waiting for %s: %v; last seen: %s", what, c, describe(last))
	}
	if err != nil {
		tb.Fatalf("kubetest: waited %s for %s: %v; last seen: %s", timeout, what, err, describe(last))
	}
	return found
}

// waitContext is the context of one wait: it ends after timeout, or, with a
// *NodeReadinessChanged as its cause, when a fake Node's readiness changes.
func waitContext(timeout time.Duration) (context.Context, func()) {
	ctx, stop := nodes().guard(context.Background())
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

// UntilGone watches until the named object no longer exists, failing the test after timeout,
// or at once when a fake Node's readiness changes meanwhile (as Until).
func UntilGone(tb testing.TB, timeout time.Duration, what string, lw cache.ListerWatcher, example runtime.Object, namespace, name string) {
	tb.Helper()
	ctx, cancel := waitContext(timeout)
	defer cancel()
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	_, err := watchtools.UntilWithSync(ctx, lw, example, func(store cache.Store) (bool, error) {
		_, exists, err := store.GetByKey(key)
		return !exists, err
	}, func(ev watch.Event) (bool, error) {
		if ev.Type != watch.Deleted {
			return false, nil
		}
		if o, ok := ev.Object.(interface{ GetName() string }); ok {
			return o.GetName() == name, nil
		}
		return false, nil
	})
	if c := changed(ctx); c != nil {
		tb.Fatalf("kubetest: stopped waiting for %s to be gone: %v", what, c)
	}
	if err != nil {
		tb.Fatalf("kubetest: waited %s for %s to be gone: %v", timeout, what, err)
	}
}

func describe(o runtime.Object) string {
	if o == nil || reflect.ValueOf(o).IsNil() {
		return "nothing"
	}
	switch v := o.(type) {
	case *batchv1.Job:
		return fmt.Sprintf("job %s active=%d succeeded=%d failed=%d conditions=%v", v.Name, v.Status.Active, v.Status.Succeeded, v.Status.Failed, v.Status.Conditions)
	case *corev1.Pod:
		return fmt.Sprintf("pod %s node=%q phase=%s conditions=%v", v.Name, v.Spec.NodeName, v.Status.Phase, v.Status.Conditions)
	case *corev1.ResourceQuota:
		return fmt.Sprintf("resourcequota %s hard=%v used=%v", v.Name, v.Status.Hard, v.Status.Used)
	case *corev1.Event:
		return fmt.Sprintf("event %s %s: %s", v.InvolvedObject.Name, v.Reason, v.Message)
	case *unstructured.Unstructured:
		status, _ := json.Marshal(v.Object["status"])
		return fmt.Sprintf("%s %s annotations=%v status=%s", v.GetKind(), v.GetName(), v.GetAnnotations(), status)
	}
	return fmt.Sprintf("%T", o)
}

func named(name string) fields.Selector {
	if name == "" {
		return fields.Everything()
	}
	return fields.OneTermEqualSelector("metadata.name", name)
}

// Jobs lists and watches the test namespace's Jobs (one when name is set).
func (e *Env) Jobs(name string) cache.ListerWatcher {
	return cache.NewListWatchFromClient(e.Client.BatchV1().RESTClient(), "jobs", e.Namespace, named(name))
}

// Pods lists and watches the test namespace's Pods (one when name is set).
func (e *Env) Pods(name string) cache.ListerWatcher {
	return cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "pods", e.Namespace, named(name))
}

// Events lists and watches the test namespace's Events.
func (e *Env) Events() cache.ListerWatcher {
	return cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "events", e.Namespace, fields.Everything())
}

// WaitForJob watches the named Job until cond holds and returns it.
func (e *Env) WaitForJob(name string, timeout time.Duration, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	e.T.Helper()
	return Until(e.T, timeout, fmt.Sprintf("job %s: %s", name, what), e.Jobs(name), cond)
}

// WaitForPod watches the named Pod until cond holds and returns it.
func (e *Env) WaitForPod(name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	e.T.Helper()
	return Until(e.T, timeout, fmt.Sprintf("pod %s: %s", name, what), e.Pods(name), cond)
}

// WaitForEvent watches the namespace's Events until cond holds for one and returns it.
func (e *Env) WaitForEvent(timeout time.Duration, what string, cond func(*corev1.Event) bool) *corev1.Event {
	e.T.Helper()
	return Until(e.T, timeout, "event: "+what, e.Events(), cond)
}

// JobCondition tells whether the Job has the condition with status True.
func JobCondition(j *batchv1.Job, t batchv1.JobConditionType) (batchv1.JobCondition, bool) {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}
