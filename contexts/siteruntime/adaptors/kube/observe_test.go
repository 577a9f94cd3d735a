package kube_test

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubebatch "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/batch"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

var t0 = time.Date(2026, 12, 1, 14, 17, 16, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func ptr[T any](v T) *T { return &v }

func event(reason, msg string, when time.Duration) corev1.Event {
	return corev1.Event{Reason: reason, Message: msg, LastTimestamp: at(when)}
}

const quotaRefusal = `Error creating: pods "attempt-x-abcde" is forbidden: exceeded quota: project-cpu, requested: requests.cpu=1, used: requests.cpu=0, limited: requests.cpu=500m`

// The quota refusal is quoted only while it is the Job's newest event and
// the Job has no Pod: once the quota was raised and the Job controller
// created the Pod, a pending Pod reports its own state, and a refusal
// followed by a newer event is never quoted (docs/site-runtime.md#quota-means-queued).
func TestAQuotaRefusalIsQuotedOnlyWhileItIsTheNewestFactAndNoPodExists(t *testing.T) {
	job := &batchv1.Job{Status: batchv1.JobStatus{StartTime: ptr(at(0))}}
	refused := []corev1.Event{event("FailedCreate", quotaRefusal, 1*time.Second)}
	if o := kubebatch.JobObservation(job, nil, refused); o.State != siteprotocol.StateQueued || o.Reason != "FailedCreate" || !strings.Contains(o.Message, "exceeded quota") {
		t.Fatalf("while the quota refuses the Pod: %+v", o)
	}
	// The quota was raised: the Job controller's next try created the Pod,
	// which waits for its node.
	later := append(refused, event("SuccessfulCreate", "Created pod: attempt-x-fghij", 61*time.Second))
	pending := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "attempt-x-fghij"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if o := kubebatch.JobObservation(job, []corev1.Pod{pending}, later); o.State != siteprotocol.StateQueued || strings.Contains(o.Message, "quota") || o.Reason != "" {
		t.Fatalf("with a pending Pod after the quota was raised: %+v; the old refusal must not be quoted", o)
	}
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}
	if o := kubebatch.JobObservation(job, []corev1.Pod{pending}, later); o.Reason != "Unschedulable" || !strings.Contains(o.Message, "0/3 nodes") {
		t.Fatalf("an unschedulable Pod: %+v", o)
	}
	// A newer event than the refusal, and no Pod (it was created and
	// removed): the refusal is not the newest fact.
	if o := kubebatch.JobObservation(job, nil, later); strings.Contains(o.Message, "quota") {
		t.Fatalf("a refusal older than the Job's newest event is quoted: %+v", o)
	}
	// Events in any order: the newest counts.
	if o := kubebatch.JobObservation(job, nil, []corev1.Event{later[1], later[0]}); strings.Contains(o.Message, "quota") {
		t.Fatalf("events out of order: %+v", o)
	}
}

// started_at is the Job's status.startTime in every state, finished_at
// its terminal condition's lastTransitionTime: a Pod that started a second
// after the Job does not move started_at between running and succeeded.
func TestStartedAtIsTheJobsStartTimeAndStaysTheSameFromRunningToSucceeded(t *testing.T) {
	job := &batchv1.Job{Status: batchv1.JobStatus{StartTime: ptr(at(0))}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: ptr(at(time.Second))}}
	running := kubebatch.JobObservation(job, []corev1.Pod{pod}, nil)
	if running.State != siteprotocol.StateRunning || running.StartedAt != "2026-12-01T14:17:16Z" || running.FinishedAt != "" {
		t.Fatalf("running: %+v", running)
	}
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: at(4 * time.Second)}}}}
	job.Status.CompletionTime = ptr(at(5 * time.Second))
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: at(5 * time.Second)},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: at(5 * time.Second)},
	}
	done := kubebatch.JobObservation(job, []corev1.Pod{pod}, nil)
	if done.State != siteprotocol.StateSucceeded || done.StartedAt != running.StartedAt || done.FinishedAt != "2026-12-01T14:17:21Z" || done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("succeeded: %+v; started_at while running was %s", done, running.StartedAt)
	}
	// The same reading without the Pod (deleted): the same times, no exit code.
	if gone := kubebatch.JobObservation(job, nil, nil); gone.StartedAt != done.StartedAt || gone.FinishedAt != done.FinishedAt || gone.ExitCode != nil {
		t.Fatalf("without its Pod: %+v", gone)
	}
}
