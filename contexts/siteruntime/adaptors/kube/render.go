// Package kube is the shared part of the Site Runtime's Kubernetes adaptor
// (docs/site-runtime.md#access-before-every-native-start,
// docs/site-runtime.md#one-lifecycle-for-every-family), split by the ports
// it serves:
//
//   - workloads.go: application.NativeObjects (creates with client-go
//     impersonation of the member's service account, lookups with the
//     comparison of compare.go, UID-bound deletes as the Runtime itself)
//     and application.ProjectNamespaces (with accounts.go);
//   - render.go: the Site's Renderer (application.WorkspaceSpecs: the
//     workspace claim, the identity labels, a demand's resources);
//   - render_checkout.go and render_reader.go: the workspace helper and
//     reader (application.CheckoutSpecs, HelperPods, ReaderSpecs,
//     ReaderPods);
//   - reads.go and proxy.go: the private reads (application.WorkloadPods,
//     ServiceProxy) along each recorded kind's Pod chain;
//   - quota.go: the one classifier of quota refusals;
//   - observe_deployment.go and workloads_deployment.go: the one reading
//     of Deployments and their ReplicaSets, which the application family's
//     Deployment and KServe's predictor Deployment share.
//
// Each executor family's own rendering and observation is in its package
// under families/ (batch, appservice, inference), on these parts
// (docs/architecture.md#executor-families).
package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// Identity labels and annotations on every object the Runtime creates, and
// the namespace labels it reads (shared with the admission policies in
// deploy/).
const (
	LabelRun     = "execution.pharos.dev/run"
	LabelAttempt = "execution.pharos.dev/attempt"
	LabelMember  = "execution.pharos.dev/member"
	LabelProject = "execution.pharos.dev/project"
	LabelCommand = "execution.pharos.dev/command"
	// AnnotationSpecDigest is the SHA-256 (lower-case hex) of the object's
	// rendered specification as saved in jobs.sqlite.
	AnnotationSpecDigest = "execution.pharos.dev/spec-digest"
	// NamespaceProjectLabel on a Project namespace holds the canonical
	// Project UUID.
	NamespaceProjectLabel = "project-id"
	// NamespacePolicyLabel marks the namespaces the admission policies
	// guard; its value is NamespacePolicyValue.
	NamespacePolicyLabel = "execution.pharos.dev/access-policy"
	NamespacePolicyValue = "pharos-site-runtime"
)

// Container layout of a batch Job.
const (
	// ContainerName is the batch Job's one container.
	ContainerName = "main"
	// WorkspaceVolume is the volume of the Attempt's workspace claim,
	// mounted at WorkspacePath (also the working directory).
	WorkspaceVolume = "workspace"
	WorkspacePath   = "/workspace"
)

// WorkspaceVolumes is a member workload Pod's volumes: the one volume
// WorkspaceVolume of the Attempt's workspace claim (a PersistentVolumeClaim
// name), read-write. Every family's Pod renders it alike.
func WorkspaceVolumes(claim string) []corev1.Volume {
	return []corev1.Volume{{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
}

// WorkspaceMounts is a member workload container's volume mounts: the
// workspace volume read-write at WorkspacePath.
func WorkspaceMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{{Name: WorkspaceVolume, MountPath: WorkspacePath}}
}

// DefaultExtendedResources maps demand keys gpu.<vendor> to extended
// resources (docs/site-protocol.md#operations: default gpu.nvidia → nvidia.com/gpu).
func DefaultExtendedResources() map[string]string {
	return map[string]string{"gpu.nvidia": "nvidia.com/gpu"}
}

// Renderer is the Site's renderer every family shares: the workspace
// claim (application.WorkspaceSpecs), the workspace helper and reader, and
// what the families' renderers (families/…) put on every Pod. Rendering is
// deterministic: the same input gives the same bytes (maps are
// encoded with sorted keys, env is sorted by name).
type Renderer struct {
	// ExtendedResources maps gpu.<vendor> demand keys to Kubernetes
	// extended resource names.
	ExtendedResources map[string]string
	// PodAnnotations are added to every batch Pod template, e.g. a
	// cluster's scheduling hints (the local cluster's KWOK run time in
	// tests and the demo).
	PodAnnotations map[string]string
	// ServicePodAnnotations are added to every application service's Pod
	// template (tests: the local cluster's KWOK never-ready annotation).
	ServicePodAnnotations map[string]string
	// InferencePodAnnotations are added to every InferenceService's
	// predictor component, which KServe copies onto its Pods (tests: the
	// local cluster's KWOK fail annotation).
	InferencePodAnnotations map[string]string
	// Scheduling is every rendered Pod's node selector and tolerations.
	Scheduling Scheduling
	// Users is the Site's user and file-system group of every member
	// workload Pod (none when zero: the image's own user).
	Users Users
}

// NewRenderer returns a Renderer with the default extended resources
// merged under extended.
func NewRenderer(extended, podAnnotations map[string]string) *Renderer {
	ext := DefaultExtendedResources()
	maps.Copy(ext, extended)
	return &Renderer{ExtendedResources: ext, PodAnnotations: maps.Clone(podAnnotations)}
}

// Labels returns the identity labels of objects rendered for id.
func Labels(id application.ObjectIdentity) map[string]string {
	return map[string]string{
		LabelRun: id.RunID, LabelAttempt: id.AttemptID, LabelMember: id.MemberID,
		LabelProject: id.ProjectID, LabelCommand: id.CommandID,
	}
}

// Identity reads the identity labels of a specification this renderer
// produced (application.BatchSpecs). It fails when spec is not a JSON
// object carrying the attempt label.
func (r *Renderer) Identity(spec []byte) (application.ObjectIdentity, error) {
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(spec, &obj); err != nil {
		return application.ObjectIdentity{}, fmt.Errorf("decode saved specification: %w", err)
	}
	l := obj.Metadata.Labels
	if l[LabelAttempt] == "" {
		return application.ObjectIdentity{}, errors.New("saved specification carries no attempt label")
	}
	return application.ObjectIdentity{RunID: l[LabelRun], AttemptID: l[LabelAttempt], MemberID: l[LabelMember], ProjectID: l[LabelProject], CommandID: l[LabelCommand]}, nil
}

// RenderWorkspace renders the Attempt's private workspace claim
// attempt-<attempt>-ws: ReadWriteOnce, the default StorageClass, the
// requested size in bytes.
func (r *Renderer) RenderWorkspace(s application.WorkspaceSpec) (application.NativeObject, error) {
	name := domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixWorkspace)
	pvc := corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: domain.KindWorkspace},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: Labels(s.Identity)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(s.SizeBytes, resource.BinarySI),
			}},
		},
	}
	return Object(domain.KindWorkspace, s.Namespace, name, pvc)
}

// Resources converts a demand (cpu in millicores, memory in bytes,
// gpu.<vendor> in devices) to a resource list; it fails wrapping
// application.ErrUnsupportedDemand for a gpu.<vendor> without a configured
// extended resource or an unknown key.
func (r *Renderer) Resources(demand map[string]int64) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for k, v := range demand {
		switch {
		case k == "cpu":
			out[corev1.ResourceCPU] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		case k == "memory":
			out[corev1.ResourceMemory] = *resource.NewQuantity(v, resource.BinarySI)
		case strings.HasPrefix(k, "gpu."):
			if v == 0 {
				continue
			}
			name, ok := r.ExtendedResources[k]
			if !ok {
				return nil, fmt.Errorf("%w: no extended resource is configured for %s at this Site", application.ErrUnsupportedDemand, k)
			}
			out[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.DecimalSI)
		default:
			return nil, fmt.Errorf("%w: unknown demand key %s", application.ErrUnsupportedDemand, k)
		}
	}
	return out, nil
}

// Object is a rendered object of kind with v, a Kubernetes type, encoded
// as its specification (JSON).
func Object(kind, namespace, name string, v any) (application.NativeObject, error) {
	spec, err := json.Marshal(v)
	if err != nil {
		return application.NativeObject{}, fmt.Errorf("encode %s %s: %w", kind, name, err)
	}
	return application.NativeObject{Kind: kind, Namespace: namespace, Name: name, Spec: spec}, nil
}
