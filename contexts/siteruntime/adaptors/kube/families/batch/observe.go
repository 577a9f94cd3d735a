package batch

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

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
		if obs, err = w.QuotaNow(ctx, ref.Namespace, obs, quotaOver); err != nil {
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
//     exit code of its container kube.ContainerName in the Pod that terminated
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
	started := kube.Timestamp(job.Status.StartTime)
	if c, ok := terminalCondition(job); ok {
		obs := application.Observation{Reason: c.Reason, Message: c.Message, StartedAt: started, FinishedAt: kube.Timestamp(&c.LastTransitionTime)}
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
		if c, ok := kube.Unscheduled(p); ok {
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

// lastTermination returns the Pod whose container kube.ContainerName
// terminated last, and that termination's exit code (nil when none did).
func lastTermination(pods []corev1.Pod) (*corev1.Pod, int32) {
	var last *corev1.Pod
	var at time.Time
	var code int32
	for i := range pods {
		for _, s := range pods[i].Status.ContainerStatuses {
			if s.Name != kube.ContainerName || s.State.Terminated == nil {
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
