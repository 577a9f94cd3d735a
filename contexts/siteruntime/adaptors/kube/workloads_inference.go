package kube

import (
	"context"
	"fmt"

	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
	u, found, err := w.get(ctx, domain.KindInferenceService, ref.Namespace, ref.Name)
	if err != nil || !found || string(u.GetUID()) != ref.UID {
		return application.Observation{}, false, err
	}
	var isvc kservev1beta1.InferenceService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &isvc); err != nil {
		return application.Observation{}, false, fmt.Errorf("decode InferenceService %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	var predictor *application.Observation
	dep, err := w.client.AppsV1().Deployments(ref.Namespace).Get(ctx, ref.Name+PredictorSuffix, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return application.Observation{}, false, fmt.Errorf("read the predictor Deployment %s/%s%s: %w", ref.Namespace, ref.Name, PredictorSuffix, err)
	default:
		if c := metav1.GetControllerOf(dep); c != nil && string(c.UID) == ref.UID && c.Kind == domain.KindInferenceService {
			obs, found, err := w.ObserveDeployment(ctx, siteprotocol.NativeRef{Kind: domain.KindDeployment, Namespace: ref.Namespace, Name: dep.Name, UID: string(dep.UID)})
			if err != nil {
				return application.Observation{}, false, err
			}
			if found {
				predictor = &obs
			}
		}
	}
	return InferenceServiceObservation(&isvc, predictor), true, nil
}

var _ application.InferenceObserver = (*Workloads)(nil)
