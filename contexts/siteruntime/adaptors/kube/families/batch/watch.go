package batch

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// WatchJobs watches, as the Runtime, the Jobs of namespace that carry the
// identity label kube.LabelAttempt (application.JobWatches;
// docs/site-runtime.md#terminal-states-of-jobs-that-are-gone): a
// client-go informer (list, then watch, listing again after a failed
// watch). For every Job it sees with a true Complete or Failed condition —
// in the first list, in an update, or as the last state of a deleted Job —
// it lists the Job's Pods (for the exit code; none when they are gone
// already) and calls finished once with JobObservation of them. synced is
// called when the first list is done. It returns when ctx ends.
func (w *Workloads) WatchJobs(ctx context.Context, namespace string, synced func(), finished func(application.FinishedJob)) {
	jobs := w.client.BatchV1().Jobs(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = kube.LabelAttempt
			return jobs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = kube.LabelAttempt
			return jobs.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &batchv1.Job{}, 0, cache.Indexers{})
	reported := map[types.UID]bool{} // handlers run one at a time
	handle := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		job, ok := obj.(*batchv1.Job)
		if !ok || reported[job.UID] {
			return
		}
		if _, done := terminalCondition(job); !done {
			return
		}
		reported[job.UID] = true
		finished(application.FinishedJob{
			Ref:         siteprotocol.NativeRef{Kind: domain.KindJob, Namespace: job.Namespace, Name: job.Name, UID: string(job.UID)},
			AttemptID:   job.Labels[kube.LabelAttempt],
			Observation: JobObservation(job, w.podsOf(ctx, job), nil),
		})
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
		DeleteFunc: handle,
	})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			synced()
		}
	}()
	informer.RunWithContext(ctx)
}

// podsOf lists the Job's Pods, nil when they cannot be read (each read
// bounded by 10 s).
func (w *Workloads) podsOf(ctx context.Context, job *batchv1.Job) []corev1.Pod {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := w.client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		return nil
	}
	return pods.Items
}
