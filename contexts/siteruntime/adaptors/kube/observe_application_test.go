package kube_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func deployment(conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "attempt-x", Generation: 1}}
	d.Status.ObservedGeneration, d.Status.Conditions = 1, conds
	return d
}

func dcond(typ appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: at(0)}
}

func replicaSet(failure string) appsv1.ReplicaSet {
	rs := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "attempt-x-5d8f9"}}
	if failure != "" {
		rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: failure}}
	}
	return rs
}

func servicePod(phase corev1.PodPhase, conds ...corev1.PodCondition) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "attempt-x-5d8f9-abcde"}}
	p.Status.Phase, p.Status.Conditions = phase, conds
	return p
}

// newPod is a Pod created at t0 + seconds (the deadline passed at t0).
func newPod(phase corev1.PodPhase, seconds int) corev1.Pod {
	p := servicePod(phase)
	p.CreationTimestamp = at(time.Duration(seconds) * time.Second)
	return p
}

const deadlinePassed = `ReplicaSet "attempt-x-5d8f9" has timed out progressing.`
const admissionDenied = `pods "attempt-x-5d8f9-abcde" is forbidden: ValidatingAdmissionPolicy 'metallo-pod-origin' with binding 'metallo-pod-origin' denied request: no bare Pods`
const failedQuota = `pods "attempt-x-5d8f9-abcde" is forbidden: failed quota: project-cpu: must specify limits.ephemeral-storage`

// The application service's observe states
// (docs/site-runtime.md#application-services-on-kubernetes), one row per
// native situation: a quota wait and an unschedulable Pod are queued also
// past the progress deadline; the deadline without such a wait is failed;
// a quota that demands a field the specification lacks is failed at
// once. No cluster: the objects are as the controllers write them.
func TestDeploymentObservationClassifiesEveryNativeSituation(t *testing.T) {
	progressing := dcond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", "")
	timedOut := dcond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", deadlinePassed)
	unavailable := dcond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "")
	available := dcond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "")
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}
	healthy := deployment(available, dcond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", ""))
	healthy.Status.ReadyReplicas, healthy.Status.AvailableReplicas = 1, 1
	stale := deployment(available)
	stale.Generation, stale.Status.ReadyReplicas, stale.Status.AvailableReplicas = 2, 1, 1
	for _, c := range []struct {
		name   string
		dep    *appsv1.Deployment
		rss    []appsv1.ReplicaSet
		pods   []corev1.Pod
		state  siteprotocol.State
		reason string
	}{
		{"no ReplicaSet yet", deployment(), nil, nil, siteprotocol.StateQueued, ""},
		{"no Pod yet", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet("")}, nil, siteprotocol.StateQueued, ""},
		{"a Pod pending", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodPending)}, siteprotocol.StateQueued, ""},
		{"quota refuses the Pod", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet(quotaRefusal)}, nil, siteprotocol.StateQueued, "FailedCreate"},
		{"quota refuses the Pod past the deadline", deployment(timedOut, unavailable), []appsv1.ReplicaSet{replicaSet(quotaRefusal)}, nil, siteprotocol.StateQueued, "FailedCreate"},
		{"the Deployment's copy of the refusal while no ReplicaSet is read", deployment(timedOut, dcond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", quotaRefusal)), nil, nil, siteprotocol.StateQueued, "FailedCreate"},
		{"the Deployment's stale copy once the ReplicaSet's refusal is over", deployment(timedOut, dcond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", quotaRefusal)), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning)}, siteprotocol.StateFailed, "ProgressDeadlineExceeded"},
		{"unschedulable past the deadline", deployment(timedOut, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodPending, unschedulable)}, siteprotocol.StateQueued, "Unschedulable"},
		{"a quota demanding a field the specification lacks", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet(failedQuota)}, nil, siteprotocol.StateFailed, "FailedCreate"},
		{"an admission policy refusing the Pod", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet(admissionDenied)}, nil, siteprotocol.StateFailed, "FailedCreate"},
		{"another refusal the controller retries", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet("Internal error occurred: etcdserver: request timed out")}, nil, siteprotocol.StateQueued, "FailedCreate"},
		{"running, not Ready", deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning)}, siteprotocol.StateRunning, ""},
		{"never Ready past the deadline", deployment(timedOut, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning)}, siteprotocol.StateFailed, "ProgressDeadlineExceeded"},
		{"a Pod created after the deadline passed under quota, not counted yet", deployment(timedOut, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{newPod(corev1.PodPending, 1)}, siteprotocol.StateQueued, ""},
		{"Available with its replica ready", healthy, []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning, ready)}, siteprotocol.StateHealthy, ""},
		{"Available of an older generation", stale, []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning, ready)}, siteprotocol.StateRunning, ""},
	} {
		obs := kube.DeploymentObservation(c.dep, c.rss, c.pods)
		if obs.State != c.state || obs.Reason != c.reason {
			t.Errorf("%s: %s (%s: %s), want %s (%s)", c.name, obs.State, obs.Reason, obs.Message, c.state, c.reason)
		}
	}
	// Running says whether the Pod is Ready yet or the Deployment has not counted it.
	if obs := kube.DeploymentObservation(deployment(progressing, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning)}); !strings.Contains(obs.Message, "running, not Ready") {
		t.Errorf("a running Pod not Ready: %q", obs.Message)
	}
	if obs := kube.DeploymentObservation(stale, []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning, ready)}); !strings.Contains(obs.Message, "is Ready; Deployment") || !strings.Contains(obs.Message, "has not counted it yet") {
		t.Errorf("a Ready Pod the Deployment has not counted: %q", obs.Message)
	}
	obs := kube.DeploymentObservation(deployment(timedOut, unavailable), []appsv1.ReplicaSet{replicaSet("")}, []corev1.Pod{servicePod(corev1.PodRunning)})
	if obs.Message != deadlinePassed || obs.FinishedAt != "2026-12-01T14:17:16Z" {
		t.Fatalf("the deadline's message and time: %+v", obs)
	}
}
