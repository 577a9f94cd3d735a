package inference

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// ObserveInferenceService reads, as the Runtime, the InferenceService ref
// names and the predictor Deployment <name>-predictor that KServe's
// controller made for it — only when its controller owner reference names
// the InferenceService's UID; the Deployment's ReplicaSets and Pods by UID
// lineage and its quota refusals as ObserveDeployment reads them — and
// reports InferenceServiceObservation of them. found is false when no
// InferenceService with ref's name and UID exists.
func (w *Workloads) ObserveInferenceService(ctx context.Context, ref siteprotocol.NativeRef) (application.Observation, bool, error) {
	u, found, err := w.Get(ctx, domain.KindInferenceService, ref.Namespace, ref.Name)
	if err != nil || !found || string(u.GetUID()) != ref.UID {
		return application.Observation{}, false, err
	}
	var isvc kservev1beta1.InferenceService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &isvc); err != nil {
		return application.Observation{}, false, fmt.Errorf("decode InferenceService %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	var predictor *application.Observation
	var pods []corev1.Pod
	dep, err := w.client.AppsV1().Deployments(ref.Namespace).Get(ctx, ref.Name+PredictorSuffix, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return application.Observation{}, false, fmt.Errorf("read the predictor Deployment %s/%s%s: %w", ref.Namespace, ref.Name, PredictorSuffix, err)
	default:
		if c := metav1.GetControllerOf(dep); c != nil && string(c.UID) == ref.UID && c.Kind == domain.KindInferenceService {
			obs, lineage, found, err := w.ObserveDeploymentPods(ctx, siteprotocol.NativeRef{Kind: domain.KindDeployment, Namespace: ref.Namespace, Name: dep.Name, UID: string(dep.UID)})
			if err != nil {
				return application.Observation{}, false, err
			}
			if found {
				predictor, pods = &obs, lineage
			}
		}
	}
	return InferenceServiceObservation(&isvc, predictor, pods), true, nil
}

// PodChain is the private reads' chain of an InferenceService's
// predictor Pods (docs/site-runtime.md#private-reads), which New
// registers (kube.Workloads.WithPodChain): Pod →
// ReplicaSet → the predictor Deployment <isvc>-predictor (both read live:
// KServe's controller makes the Deployment, the Deployment controller the
// ReplicaSet) → the recorded InferenceService; the main container
// kserve-container; and every Pod's kserve-container arguments under the
// private inference argument rule against the saved InferenceService's
// model arguments (PodArgs). KServe copies the InferenceService's
// labels onto the predictor Deployment, its Pod template (so the
// ReplicaSet and the Pods) and its Service, so every object of the chain
// carries the identity labels.
func PodChain() kube.PodChain {
	return kube.PodChain{
		Links: []string{domain.KindReplicaSet, domain.KindDeployment, domain.KindInferenceService},
		Names: map[string]string{domain.KindDeployment: PredictorSuffix},
		Main:  PredictorContainer, CheckPod: PodArgs,
	}
}

// PodArgs applies the private inference argument rule
// (domain.CheckInferenceArgs, docs/site-runtime.md#the-private-inference-argument-rule)
// to pod, a predictor Pod of the InferenceService root whose saved
// specification is saved: its kserve-container's arguments must be
// --model_name=<root's name>, optionally --backend=huggingface (a model
// of format huggingface only), then exactly the saved model arguments. It answers the mismatch (a Pod
// without kserve-container, or arguments that break the rule), empty
// when the Pod passes; an error when saved is not an InferenceService
// with model arguments.
func PodArgs(pod *corev1.Pod, root siteprotocol.NativeRef, saved []byte) (string, error) {
	var isvc kservev1beta1.InferenceService
	if err := json.Unmarshal(saved, &isvc); err != nil {
		return "", fmt.Errorf("decode the saved InferenceService %s: %w", root.Name, err)
	}
	m := isvc.Spec.Predictor.Model
	if m == nil || len(m.Args) == 0 {
		return "", fmt.Errorf("the saved InferenceService %s has no model arguments", root.Name)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != PredictorContainer {
			continue
		}
		if err := domain.CheckInferenceArgs(c.Args, root.Name, m.ModelFormat.Name, m.Args); err != nil {
			return fmt.Sprintf("breaks the private inference argument rule in container %s: %v", c.Name, err), nil
		}
		return "", nil
	}
	return fmt.Sprintf("has no container %s", PredictorContainer), nil
}

// predictorService reads KServe's predictor Service <isvc>-predictor of
// the recorded InferenceService root (saved: its saved specification) and
// checks it live before a proxy (docs/site-runtime.md#private-reads): its
// controller owner reference is root by UID, it carries id's identity
// labels, is of type ClusterIP with a port, and selects exactly the
// Attempt's predictor Pods — its selector is the predictor Deployment's
// (read live, itself controlled by root by UID and labelled with id),
// and every Pod it selects is an exact Pod of root's chain
// (PodChain: the controller chain and the private argument
// rule). Errors: wrapping application.ErrEndpointUnavailable (KServe's
// controller has no predictor Service or Deployment now),
// application.ErrNativeIdentityMismatch (not exact), or a failed read.
func (w *Workloads) predictorService(ctx context.Context, root siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity) (*corev1.Service, error) {
	name := root.Name + PredictorSuffix
	mismatch := func(format string, a ...any) error {
		return fmt.Errorf("%w: Service %s/%s %s", application.ErrNativeIdentityMismatch, root.Namespace, name, fmt.Sprintf(format, a...))
	}
	svc, err := w.client.CoreV1().Services(root.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: KServe's controller has no predictor Service %s/%s for InferenceService %s (uid %s) now", application.ErrEndpointUnavailable, root.Namespace, name, root.Name, root.UID)
	case err != nil:
		return nil, fmt.Errorf("read Service %s/%s: %w", root.Namespace, name, err)
	}
	if m := controlledBy(svc, root); m != "" {
		return nil, mismatch("(uid %s) %s", svc.UID, m)
	}
	if m := kube.IdentityMismatch(svc.Labels, id); m != "" {
		return nil, mismatch("(uid %s) %s", svc.UID, m)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		return nil, mismatch("is of type %s, not ClusterIP", svc.Spec.Type)
	}
	if len(svc.Spec.Ports) == 0 {
		return nil, mismatch("has no port")
	}
	dep, err := w.client.AppsV1().Deployments(root.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: KServe's controller has no predictor Deployment %s/%s for InferenceService %s (uid %s) now", application.ErrEndpointUnavailable, root.Namespace, name, root.Name, root.UID)
	case err != nil:
		return nil, fmt.Errorf("read Deployment %s/%s: %w", root.Namespace, name, err)
	}
	if m := controlledBy(dep, root); m != "" {
		return nil, fmt.Errorf("%w: Deployment %s/%s (uid %s) %s", application.ErrNativeIdentityMismatch, root.Namespace, name, dep.UID, m)
	}
	if m := kube.IdentityMismatch(dep.Labels, id); m != "" {
		return nil, fmt.Errorf("%w: Deployment %s/%s (uid %s) %s", application.ErrNativeIdentityMismatch, root.Namespace, name, dep.UID, m)
	}
	sel := dep.Spec.Selector
	if sel == nil || len(sel.MatchExpressions) > 0 || len(sel.MatchLabels) == 0 || !maps.Equal(svc.Spec.Selector, sel.MatchLabels) {
		return nil, mismatch("selects %v, not the Pods of the predictor Deployment %s (selector %s)", svc.Spec.Selector, name, metav1.FormatLabelSelector(sel))
	}
	pods, err := w.client.CoreV1().Pods(root.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return nil, fmt.Errorf("list the Pods Service %s/%s selects: %w", root.Namespace, name, err)
	}
	chain, seen := PodChain(), map[string]string{}
	for _, p := range pods.Items {
		m, err := w.ExactPod(ctx, &p, chain, root, saved, id, seen)
		if err != nil {
			return nil, err
		}
		if m != "" {
			return nil, mismatch("selects Pod %s (uid %s), which %s", p.Name, p.UID, m)
		}
	}
	return svc, nil
}

// controlledBy names how obj's controller owner reference differs from
// the InferenceService root (kind, API group, name and UID); empty when
// root controls obj.
func controlledBy(obj metav1.Object, root siteprotocol.NativeRef) string {
	c := kube.ControllerOf(obj.GetOwnerReferences())
	switch {
	case c == nil:
		return fmt.Sprintf("has no controller owner reference; it must be controlled by InferenceService %s (uid %s)", root.Name, root.UID)
	case c.Kind != domain.KindInferenceService || kube.GroupOf(c.APIVersion) != kservev1beta1.SchemeGroupVersion.Group || c.Name != root.Name || string(c.UID) != root.UID:
		return fmt.Sprintf("is controlled by %s %s (%s, uid %s), not by the recorded InferenceService %s (uid %s)", c.Kind, c.Name, c.APIVersion, c.UID, root.Name, root.UID)
	}
	return ""
}
