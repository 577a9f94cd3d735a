package kube

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// Pod Security admission's namespace labels and the level of project
// namespaces (deploy/cluster/README.md): the Runtime reads enforce before
// it creates a specification saved without the restricted fields; the
// Site agent sets all three (docs/site-runtime.md#pod-security).
const (
	NamespacePodSecurityEnforce = "pod-security.kubernetes.io/enforce"
	NamespacePodSecurityWarn    = "pod-security.kubernetes.io/warn"
	NamespacePodSecurityAudit   = "pod-security.kubernetes.io/audit"
	PodSecurityRestricted       = "restricted"
)

// Users is the user and file-system group a Site puts on every member
// workload Pod (the Job's, the Deployment's, the predictor's;
// --pod-run-as-user, --pod-fs-group); zero renders nothing, so a member
// image runs as its own numeric USER (docs/site-runtime.md#pod-security).
type Users struct {
	RunAsUser int64
	FSGroup   int64
}

// restrictedPod is the Pod securityContext of Pod Security restricted
// that every rendered Pod carries: runAsNonRoot true and the seccomp
// profile RuntimeDefault; fsGroup and runAsUser only when given (nonzero).
func restrictedPod(runAsUser, fsGroup int64) *corev1.PodSecurityContext {
	yes := true
	sc := &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if runAsUser > 0 {
		sc.RunAsUser = &runAsUser
	}
	if fsGroup > 0 {
		sc.FSGroup = &fsGroup
	}
	return sc
}

// RestrictedContainer is the container securityContext of Pod Security
// restricted that every rendered container carries: no privilege
// escalation, every capability dropped (docs/site-runtime.md#pod-security).
func RestrictedContainer() *corev1.SecurityContext {
	no := false
	return &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// WorkloadSecurity is a member workload Pod's securityContext (the Job's,
// the Deployment's, the predictor's): Pod Security restricted's
// runAsNonRoot and RuntimeDefault seccomp profile, with the Site's Users
// (docs/site-runtime.md#pod-security).
func (r *Renderer) WorkloadSecurity() *corev1.PodSecurityContext {
	return restrictedPod(r.Users.RunAsUser, r.Users.FSGroup)
}

// RestrictedShortfall names the first field of Pod Security restricted
// that the Pods of a saved specification lack ("" when none, and for a
// kind without Pods): the Pod's runAsNonRoot true and a seccomp profile
// (RuntimeDefault or Localhost), each set on the Pod or on every
// container, and every container's allowPrivilegeEscalation false and
// capabilities dropping ALL. A specification saved before the Runtime
// rendered these fields lacks them (docs/site-runtime.md#pod-security).
// It fails when spec does not decode as its kind.
func RestrictedShortfall(kind string, spec []byte) (string, error) {
	var path string
	var pod corev1.PodSpec
	switch kind {
	case domain.KindJob:
		var j batchv1.Job
		if err := json.Unmarshal(spec, &j); err != nil {
			return "", fmt.Errorf("decode the saved Job: %w", err)
		}
		path, pod = "spec.template.spec", j.Spec.Template.Spec
	case domain.KindDeployment:
		var d appsv1.Deployment
		if err := json.Unmarshal(spec, &d); err != nil {
			return "", fmt.Errorf("decode the saved Deployment: %w", err)
		}
		path, pod = "spec.template.spec", d.Spec.Template.Spec
	case domain.KindPod:
		var p corev1.Pod
		if err := json.Unmarshal(spec, &p); err != nil {
			return "", fmt.Errorf("decode the saved Pod: %w", err)
		}
		path, pod = "spec", p.Spec
	case domain.KindInferenceService:
		// KServe's predictor: its Pod part, init containers and containers
		// inline, and the model container's fields inline under model.
		var i struct {
			Spec struct {
				Predictor struct {
					SecurityContext *corev1.PodSecurityContext `json:"securityContext"`
					InitContainers  []corev1.Container         `json:"initContainers"`
					Containers      []corev1.Container         `json:"containers"`
					Model           *corev1.Container          `json:"model"`
				} `json:"predictor"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(spec, &i); err != nil {
			return "", fmt.Errorf("decode the saved InferenceService: %w", err)
		}
		p := i.Spec.Predictor
		path, pod = "spec.predictor", corev1.PodSpec{SecurityContext: p.SecurityContext, InitContainers: p.InitContainers, Containers: p.Containers}
		if p.Model != nil {
			c := *p.Model
			c.Name = "model"
			pod.Containers = append(pod.Containers, c)
		}
	default:
		return "", nil
	}
	return shortfall(path, pod), nil
}

func shortfall(path string, pod corev1.PodSpec) string {
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	containers := slices.Concat(pod.InitContainers, pod.Containers)
	every := func(ok func(*corev1.SecurityContext) bool) bool {
		for i := range containers {
			if !ok(containers[i].SecurityContext) {
				return false
			}
		}
		return true
	}
	seccompOK := func(p *corev1.SeccompProfile) bool {
		return p != nil && (p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost)
	}
	podNonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	if !podNonRoot && !every(func(c *corev1.SecurityContext) bool { return c != nil && c.RunAsNonRoot != nil && *c.RunAsNonRoot }) {
		return path + ".securityContext.runAsNonRoot"
	}
	if !seccompOK(psc.SeccompProfile) && !every(func(c *corev1.SecurityContext) bool { return c != nil && seccompOK(c.SeccompProfile) }) {
		return path + ".securityContext.seccompProfile"
	}
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			return fmt.Sprintf("%s container %s: securityContext.allowPrivilegeEscalation", path, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			return fmt.Sprintf("%s container %s: securityContext.capabilities.drop", path, c.Name)
		}
	}
	return ""
}
