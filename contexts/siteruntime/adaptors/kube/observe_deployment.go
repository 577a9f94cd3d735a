package kube

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Deployment condition reasons the classifier reads (the Deployment
// controller's, k8s.io/kubernetes/pkg/controller/deployment/util).
const (
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonFailedCreate             = "FailedCreate"
)

// DeploymentObservation is the state of an application service's
// Deployment dep, with the ReplicaSets it owns (by controller UID) and
// their Pods, as observe reports it
// (docs/site-runtime.md#application-services-on-kubernetes). Every field
// comes from the objects as they are now:
//
//   - healthy when the Deployment is Available with its replica ready and
//     available (status of the Deployment's current generation);
//   - queued while no Pod is available and the ReplicaSet's Pod creates are
//     refused by the namespace quota (ReplicaFailure / FailedCreate
//     "exceeded quota", the ReplicaSet's condition, else the Deployment's
//     copy) or a Pod is unschedulable (PodScheduled False) — also when the
//     Deployment's progress deadline has passed: Kubernetes keeps retrying,
//     and a quota wait is never a failure;
//   - failed, reason FailedCreate, when the Pod create is refused
//     permanently (permanentRefusal: "failed quota: …: must specify …", a
//     quota that demands a field the specification lacks; an admission
//     denial; an invalid Pod); another refused create is queued, quoting
//     it (the ReplicaSet controller retries);
//   - failed, reason ProgressDeadlineExceeded, when the Progressing
//     condition says so and no wait above explains it (a Pod that runs but
//     never becomes Ready, a container that exits); finished_at is that
//     condition's lastTransitionTime. A Pod created since that transition
//     is progress the controller has not counted yet (a quota raised after
//     a wait outlasted the deadline): not a failure;
//   - running while a Pod runs but is not Ready, or is Ready and the
//     Deployment's status has not counted it yet (the message says which);
//   - queued otherwise (no Pod yet, a Pod pending).
func DeploymentObservation(dep *appsv1.Deployment, replicaSets []appsv1.ReplicaSet, pods []corev1.Pod) application.Observation {
	if deploymentHealthy(dep) {
		return application.Observation{State: siteprotocol.StateHealthy, Message: fmt.Sprintf("Deployment %s is Available with %d ready replica(s)", dep.Name, dep.Status.ReadyReplicas)}
	}
	if msg, ok := replicaFailure(dep, replicaSets); ok {
		if permanentRefusal(msg) {
			return application.Observation{State: siteprotocol.StateFailed, Reason: ReasonFailedCreate, Message: msg}
		}
		if QuotaWait(msg) {
			return application.Observation{State: siteprotocol.StateQueued, Reason: ReasonFailedCreate, Message: msg}
		}
	}
	var live []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	for _, p := range live {
		if c, ok := Unscheduled(p); ok {
			return application.Observation{State: siteprotocol.StateQueued, Reason: c.Reason, Message: fmt.Sprintf("Pod %s: %s", p.Name, c.Message)}
		}
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == ReasonProgressDeadlineExceeded &&
			!createdSince(live, c.LastTransitionTime) {
			return application.Observation{State: siteprotocol.StateFailed, Reason: c.Reason, Message: c.Message, FinishedAt: Timestamp(&c.LastTransitionTime)}
		}
	}
	for _, p := range live {
		if p.Status.Phase == corev1.PodRunning {
			if PodReady(p) {
				// Ready, but the Deployment's status has not counted it yet (its
				// controllers lag behind the Pod's status): still running.
				return application.Observation{State: siteprotocol.StateRunning, Message: fmt.Sprintf("Pod %s is Ready; Deployment %s has not counted it yet (observed generation %d of %d, %d ready, %d available)",
					p.Name, dep.Name, dep.Status.ObservedGeneration, dep.Generation, dep.Status.ReadyReplicas, dep.Status.AvailableReplicas)}
			}
			return application.Observation{State: siteprotocol.StateRunning, Message: fmt.Sprintf("Pod %s is running, not Ready", p.Name)}
		}
	}
	for _, p := range live {
		if p.Status.Phase == corev1.PodPending {
			return application.Observation{State: siteprotocol.StateQueued, Message: fmt.Sprintf("Pod %s is pending", p.Name)}
		}
	}
	if msg, ok := replicaFailure(dep, replicaSets); ok {
		return application.Observation{State: siteprotocol.StateQueued, Reason: ReasonFailedCreate, Message: msg}
	}
	return application.Observation{State: siteprotocol.StateQueued, Message: "no Pod of the Deployment yet"}
}

// PodReady reports whether p's Ready condition is true.
func PodReady(p corev1.Pod) bool {
	c, ok := podCondition(p, corev1.PodReady)
	return ok && c.Status == corev1.ConditionTrue
}

// Unscheduled returns p's PodScheduled condition when it is false (the
// scheduler found no node: Unschedulable).
func Unscheduled(p corev1.Pod) (corev1.PodCondition, bool) {
	c, ok := podCondition(p, corev1.PodScheduled)
	return c, ok && c.Status == corev1.ConditionFalse
}

// podCondition returns p's condition of type t (the last one listed, as
// the kubelet and scheduler keep one of each type).
func podCondition(p corev1.Pod, t corev1.PodConditionType) (corev1.PodCondition, bool) {
	var found corev1.PodCondition
	ok := false
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			found, ok = c, true
		}
	}
	return found, ok
}

// createdSince reports whether a Pod was created at or after t: progress
// the Deployment controller has not counted yet (it sets Progressing true
// again once it does), as when a quota wait outlasted the deadline and the
// quota was then raised.
func createdSince(pods []corev1.Pod, t metav1.Time) bool {
	for _, p := range pods {
		if !p.CreationTimestamp.Before(&t) {
			return true
		}
	}
	return false
}

// permanentRefusal reports whether a refused Pod create can never succeed
// for this specification: a quota demanding a field it lacks ("failed
// quota: …: must specify …"), an admission policy or webhook that denied
// it, an invalid Pod. A quota the Pod exceeds ("exceeded quota") is a
// wait, and any other refusal (the API server busy, a namespace being
// set up) is retried by the ReplicaSet controller: queued, quoting it.
func permanentRefusal(msg string) bool {
	for _, s := range []string{"failed quota", "denied request", "denied the request", "is invalid"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func deploymentHealthy(dep *appsv1.Deployment) bool {
	if dep.Status.ObservedGeneration < dep.Generation || dep.Status.ReadyReplicas < 1 || dep.Status.AvailableReplicas < 1 {
		return false
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// replicaFailure returns the message of a true ReplicaFailure condition
// with reason FailedCreate: the ReplicaSets' own (the controller removes it
// once a create succeeds), else the Deployment's copy while no ReplicaSet
// is known.
func replicaFailure(dep *appsv1.Deployment, replicaSets []appsv1.ReplicaSet) (string, bool) {
	for _, rs := range replicaSets {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue && c.Reason == ReasonFailedCreate {
				return c.Message, true
			}
		}
	}
	if len(replicaSets) > 0 {
		return "", false
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue && c.Reason == ReasonFailedCreate {
			return c.Message, true
		}
	}
	return "", false
}
