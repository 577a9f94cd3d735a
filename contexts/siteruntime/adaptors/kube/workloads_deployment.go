package kube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// ObserveDeployment reads (for the application family's Deployment and
// KServe's predictor Deployment alike), as the Runtime, the Deployment ref names, the
// ReplicaSets it controls (controller owner reference with its UID) and
// their Pods (controller owner reference to one of those ReplicaSets), and
// reports DeploymentObservation of them: the UID lineage Pod → ReplicaSet
// → Deployment is checked on every read, so an object that merely carries
// the Attempt's labels is never reported. A quota refusal it quotes is read
// against the quota as it is now (as for Jobs): when the quota is gone or
// now has room, the state stays queued and says so. found is false when no
// Deployment with ref's name and UID exists.
func (w *Workloads) ObserveDeployment(ctx context.Context, ref siteprotocol.NativeRef) (application.Observation, bool, error) {
	obs, _, found, err := w.ObserveDeploymentPods(ctx, ref)
	return obs, found, err
}

// ObserveDeploymentPods is ObserveDeployment that also answers the Pods
// it observed (those of the UID lineage; the inference family reads its
// predictor's).
func (w *Workloads) ObserveDeploymentPods(ctx context.Context, ref siteprotocol.NativeRef) (application.Observation, []corev1.Pod, bool, error) {
	dep, found, err := GetByUID(ctx, ref, w.client.AppsV1().Deployments(ref.Namespace).Get)
	if err != nil || !found {
		return application.Observation{}, nil, found, err
	}
	selector := LabelAttempt + "=" + dep.Labels[LabelAttempt]
	rsList, err := w.client.AppsV1().ReplicaSets(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return application.Observation{}, nil, false, err
	}
	var rss []appsv1.ReplicaSet
	owned := map[string]bool{}
	for _, rs := range rsList.Items {
		if c := metav1.GetControllerOf(&rs); c != nil && string(c.UID) == ref.UID && c.Kind == "Deployment" {
			rss = append(rss, rs)
			owned[string(rs.UID)] = true
		}
	}
	var pods []corev1.Pod
	if len(rss) > 0 {
		list, err := w.client.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return application.Observation{}, nil, false, err
		}
		for _, p := range list.Items {
			if c := metav1.GetControllerOf(&p); c != nil && owned[string(c.UID)] && c.Kind == "ReplicaSet" {
				pods = append(pods, p)
			}
		}
	}
	obs := DeploymentObservation(dep, rss, pods)
	if obs.State == siteprotocol.StateQueued && obs.Reason == ReasonFailedCreate {
		if obs, err = w.QuotaNow(ctx, ref.Namespace, obs, serviceQuotaOver); err != nil {
			return application.Observation{}, nil, false, err
		}
	}
	return obs, pods, true, nil
}

// serviceQuotaOver is obs once the quota refusal it quotes no longer
// holds: queued until the ReplicaSet controller's next try creates the Pod.
func serviceQuotaOver(obs application.Observation, why string) application.Observation {
	obs.Reason = ""
	obs.Message = "no Pod of the Deployment yet: its last Pod create was refused by the namespace quota, but " + why +
		"; the ReplicaSet controller creates the Pod at its next try"
	return obs
}
