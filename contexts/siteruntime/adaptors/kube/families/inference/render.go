package inference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// KServe's names the inference family renders and reads
// (docs/site-runtime.md#inference-services-on-kserve).
const (
	// AnnotationDeploymentMode is KServe's deployment-mode annotation.
	AnnotationDeploymentMode = "serving.kserve.io/deploymentMode"
	// LabelVisibility with VisibilityClusterLocal makes KServe create no
	// Ingress for the InferenceService: it is reached only inside the
	// cluster.
	LabelVisibility        = "networking.kserve.io/visibility"
	VisibilityClusterLocal = "cluster-local"
	// PredictorSuffix names the predictor Deployment and Service KServe's
	// controller creates for an InferenceService: <isvc>-predictor.
	PredictorSuffix = "-predictor"
	// PredictorContainer is the serving container of KServe's predictor
	// Pods, the ServingRuntime's: the one the private inference argument
	// rule reads and read-logs reads by default.
	PredictorContainer = "kserve-container"
)

// RenderInferenceService renders the inference service's KServe
// InferenceService attempt-<attempt> from KServe v0.16.0's own API types
// (docs/site-runtime.md#inference-services-on-kserve): the
// serving.kserve.io/deploymentMode annotation of the specification
// (Standard for every new preparation); the identity labels and
// networking.kserve.io/visibility: cluster-local (KServe creates no
// Ingress), which KServe copies onto the predictor Deployment and its Pod
// template; a predictor running as the member's service account without a
// mounted token, with the Site's Scheduling and InferencePodAnnotations on
// the predictor component; its model of the saved format on the pinned
// ServingRuntime, with the saved model arguments only (the runtime adds
// its own prefix), requests = limits = demand and the claim at
// /workspace; Pod Security restricted with the Site's Users, the Pod's
// part on the predictor's PodSpec and the container's on the model
// container, which KServe's controller merges into the predictor's Pod
// template (docs/site-runtime.md#pod-security); for a prepared checkout (s.Verify) the predictor's init
// container workspace-verify (VerifyContainer, as the application
// family's serving Pod: docs/site-runtime.md#services-and-the-prepared-workspace),
// which KServe's controller carries onto the predictor Deployment's Pod
// template. Fields it does not set (empty strings, empty objects,
// status) are left out of the rendered bytes, so the API server and
// KServe's defaulter own them. It fails wrapping
// application.ErrUnsupportedDemand for a demand the Site cannot express.
func (r *Renderer) RenderInferenceService(s application.InferenceServiceSpec) (application.NativeObject, error) {
	resources, err := r.Resources(s.Demand)
	if err != nil {
		return application.NativeObject{}, err
	}
	name := domain.AttemptObjectName(s.Identity.AttemptID, "")
	labels := kube.Labels(s.Identity)
	labels[LabelVisibility] = VisibilityClusterLocal
	runtime, noToken := s.Runtime, false
	var podAnnotations map[string]string
	if len(r.InferencePodAnnotations) > 0 {
		podAnnotations = maps.Clone(r.InferencePodAnnotations)
	}
	var initContainers []corev1.Container
	if v := s.Verify; v != nil {
		initContainers = []corev1.Container{kube.VerifyContainer(*v)}
	}
	isvc := kservev1beta1.InferenceService{
		TypeMeta: metav1.TypeMeta{APIVersion: kservev1beta1.SchemeGroupVersion.String(), Kind: domain.KindInferenceService},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: labels,
			Annotations: map[string]string{AnnotationDeploymentMode: s.DeploymentMode}},
		Spec: kservev1beta1.InferenceServiceSpec{Predictor: kservev1beta1.PredictorSpec{
			ComponentExtensionSpec: kservev1beta1.ComponentExtensionSpec{Annotations: podAnnotations},
			PodSpec: kservev1beta1.PodSpec{
				ServiceAccountName:           s.ServiceAccount,
				AutomountServiceAccountToken: &noToken,
				SecurityContext:              r.WorkloadSecurity(),
				NodeSelector:                 maps.Clone(r.Scheduling.NodeSelector),
				Tolerations:                  slices.Clone(r.Scheduling.Tolerations),
				InitContainers:               initContainers,
				Volumes:                      kube.WorkspaceVolumes(s.WorkspaceClaim),
			},
			Model: &kservev1beta1.ModelSpec{
				ModelFormat: kservev1beta1.ModelFormat{Name: s.ModelFormat},
				Runtime:     &runtime,
				PredictorExtensionSpec: kservev1beta1.PredictorExtensionSpec{Container: corev1.Container{
					Args:            slices.Clone(s.Args),
					Resources:       corev1.ResourceRequirements{Requests: resources, Limits: resources.DeepCopy()},
					VolumeMounts:    kube.WorkspaceMounts(),
					SecurityContext: kube.RestrictedContainer(),
				}},
			},
		}},
	}
	raw, err := json.Marshal(isvc)
	if err != nil {
		return application.NativeObject{}, fmt.Errorf("encode InferenceService %s: %w", name, err)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return application.NativeObject{}, fmt.Errorf("decode InferenceService %s: %w", name, err)
	}
	delete(tree, "status")
	return kube.Object(domain.KindInferenceService, s.Namespace, name, pruneUnset(tree))
}

// pruneUnset drops what a typed encoding writes for fields nobody set:
// empty strings, nulls, empty objects and empty lists (a creationTimestamp
// of null, a container's name ""), at every depth; the rest is kept as
// it is. encoding/json writes the result with sorted keys, so rendering
// stays deterministic.
func pruneUnset(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if p := pruneUnset(e); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, 0, len(x))
		for _, e := range x {
			p := pruneUnset(e)
			if p == nil {
				p = map[string]any{}
			}
			out = append(out, p)
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}
