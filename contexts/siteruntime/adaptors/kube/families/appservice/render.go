package appservice

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// ServicePortName names the application container's port and the
// Service's one port.
const ServicePortName = "http"

// RenderDeployment renders the application service's Deployment
// attempt-<attempt> (docs/site-runtime.md#application-services-on-kubernetes):
// 1 replica; a selector of exactly the Attempt's identity labels, which the
// Pod template carries (with ServicePodAnnotations); progressDeadlineSeconds
// from Site configuration; one container kube.ContainerName running the
// command's image (pinned by digest) with its port (named ServicePortName),
// its HTTP readiness probe on that port, requests = limits = demand and
// the claim at /workspace; the member's service account without a mounted
// token; the Site's Scheduling; Pod Security restricted with the Site's
// Users, as for a batch Job (docs/site-runtime.md#pod-security). Zero probe settings are not rendered (the
// Kubernetes types omit them; the API server then applies its defaults).
// The spec-digest annotation is not part of the rendered bytes: Create
// stamps it on the Deployment and on its Pod template
// (kube.Workloads.Create). It fails wrapping application.ErrUnsupportedDemand
// for a demand the Site cannot express.
func (r *Renderer) RenderDeployment(s application.ApplicationServiceSpec) (application.NativeObject, error) {
	resources, err := r.Resources(s.Demand)
	if err != nil {
		return application.NativeObject{}, err
	}
	name := domain.AttemptObjectName(s.Identity.AttemptID, "")
	replicas, deadline, noToken := int32(1), s.ProgressDeadlineSeconds, false
	var podAnnotations map[string]string
	if len(r.ServicePodAnnotations) > 0 {
		podAnnotations = maps.Clone(r.ServicePodAnnotations)
	}
	var probe *corev1.Probe
	if rd := s.Readiness; rd != nil {
		probe = &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: rd.Path, Port: intstr.FromInt32(s.Port)}},
			InitialDelaySeconds: rd.InitialDelaySeconds,
			PeriodSeconds:       rd.PeriodSeconds,
		}
	}
	var initContainers []corev1.Container
	if v := s.Verify; v != nil {
		initContainers = []corev1.Container{kube.VerifyContainer(*v)}
	}
	dep := appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: domain.KindDeployment},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: kube.Labels(s.Identity)},
		Spec: appsv1.DeploymentSpec{
			Replicas:                &replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: kube.Labels(s.Identity)},
			ProgressDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: kube.Labels(s.Identity), Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName:           s.ServiceAccount,
					AutomountServiceAccountToken: &noToken,
					SecurityContext:              r.WorkloadSecurity(),
					NodeSelector:                 maps.Clone(r.Scheduling.NodeSelector),
					Tolerations:                  slices.Clone(r.Scheduling.Tolerations),
					InitContainers:               initContainers,
					Containers: []corev1.Container{{
						Name:            kube.ContainerName,
						Image:           s.Image,
						Ports:           []corev1.ContainerPort{{Name: ServicePortName, ContainerPort: s.Port, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe:  probe,
						Resources:       corev1.ResourceRequirements{Requests: resources, Limits: resources.DeepCopy()},
						VolumeMounts:    kube.WorkspaceMounts(),
						SecurityContext: kube.RestrictedContainer(),
					}},
					Volumes: kube.WorkspaceVolumes(s.WorkspaceClaim),
				},
			},
		},
	}
	return kube.Object(domain.KindDeployment, s.Namespace, name, dep)
}

// RenderService renders the application service's Service
// attempt-<attempt>: type ClusterIP, a selector of exactly the Attempt's
// identity labels (the Deployment's Pod labels), one TCP port
// ServicePortName on the command's port to the container's port; no
// external IPs, no ExternalName.
func (r *Renderer) RenderService(s application.ApplicationServiceSpec) (application.NativeObject, error) {
	name := domain.AttemptObjectName(s.Identity.AttemptID, "")
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: domain.KindService},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: kube.Labels(s.Identity)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: kube.Labels(s.Identity),
			Ports: []corev1.ServicePort{{
				Name: ServicePortName, Protocol: corev1.ProtocolTCP, Port: s.Port, TargetPort: intstr.FromInt32(s.Port),
			}},
		},
	}
	return kube.Object(domain.KindService, s.Namespace, name, svc)
}
