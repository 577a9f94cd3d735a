package batch

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// RenderJob renders the Attempt's batch Job attempt-<attempt>
// (docs/site-runtime.md#batch-on-kubernetes): restartPolicy Never, backoffLimit
// 0 (Execution owns retries), the configured image, argv as the
// container's args, env sorted by name, requests = limits = demand (cpu
// millicores, memory bytes, gpu.<vendor> as its extended resource), the
// Run's time limit as the Pod's activeDeadlineSeconds (never the Job's, so
// time queued under quota is not counted), the member's service account
// without a mounted token, the workspace claim at /workspace, and the Site's
// Scheduling (node selector, tolerations), and Pod Security restricted:
// runAsNonRoot, the RuntimeDefault seccomp profile, the Site's Users, no
// privilege escalation and every capability dropped
// (docs/site-runtime.md#pod-security). It fails
// wrapping application.ErrUnsupportedDemand for a gpu.<vendor> without a
// configured extended resource.
func (r *Renderer) RenderJob(s application.BatchJobSpec) (application.NativeObject, error) {
	resources, err := r.Resources(s.Demand)
	if err != nil {
		return application.NativeObject{}, err
	}
	var env []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	name := domain.AttemptObjectName(s.Identity.AttemptID, "")
	backoff, deadline, noToken := int32(0), s.TimeLimitSeconds, false
	var podAnnotations map[string]string
	if len(r.PodAnnotations) > 0 {
		podAnnotations = maps.Clone(r.PodAnnotations)
	}
	job := batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: domain.KindJob},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: kube.Labels(s.Identity)},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: kube.Labels(s.Identity), Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ActiveDeadlineSeconds:        &deadline,
					ServiceAccountName:           s.ServiceAccount,
					AutomountServiceAccountToken: &noToken,
					SecurityContext:              r.WorkloadSecurity(),
					NodeSelector:                 maps.Clone(r.Scheduling.NodeSelector),
					Tolerations:                  slices.Clone(r.Scheduling.Tolerations),
					Containers: []corev1.Container{{
						Name:            kube.ContainerName,
						Image:           s.Image,
						Args:            slices.Clone(s.Argv),
						Env:             env,
						WorkingDir:      kube.WorkspacePath,
						Resources:       corev1.ResourceRequirements{Requests: resources, Limits: resources.DeepCopy()},
						VolumeMounts:    kube.WorkspaceMounts(),
						SecurityContext: kube.RestrictedContainer(),
					}},
					Volumes: kube.WorkspaceVolumes(s.WorkspaceClaim),
				},
			},
		},
	}
	return kube.Object(domain.KindJob, s.Namespace, name, job)
}
