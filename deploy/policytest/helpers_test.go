package policytest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Only the Attempt's workspace helper mounts its credential Secret: alice's rendered helper
// through the Runtime is accepted, her own Job or Deployment mounting her own credential is
// refused (no member workload mounts any credential Secret), and her helper mounting bob's
// Attempt's credential is refused.
func TestOnlyTheAttemptsOwnHelperMountsItsCredential(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	via := s.viaRuntime(t, s.alice)
	acceptedDryRun(t, "alice's workspace helper as the Runtime renders it", createPod(via, s.namespace, alice.helper()))
	own := corev1.Volume{Name: "credential", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: alice.secretName()}}}
	j := alice.job("1")
	j.Spec.Template.Spec.Volumes = append(j.Spec.Template.Spec.Volumes, own)
	refused(t, "alice's Job mounting her own Attempt's credential", "metallo-jobs", msgNoCredential, createJob(via, s.namespace, j))
	d := alice.deployment()
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, own)
	refused(t, "alice's Deployment mounting her own Attempt's credential", "metallo-deployments", msgNoCredential, createDeployment(via, s.namespace, d))
	p := alice.helper()
	p.Spec.Volumes[1].Secret.SecretName = s.attempt(s.bob).secretName()
	refused(t, "alice's helper mounting bob's Attempt's credential", "metallo-pods", msgHelperCredential, createPod(via, s.namespace, p))
}

// A workspace helper is the fixed platform image running exactly the rendered command: its
// variants with --lfs and the CA file are accepted; another image, an added or changed argument,
// args, a shell, an argument smuggling a space, a second container or an init container are
// refused, with the member's identity through the Runtime.
func TestAHelperIsTheFixedImageWithExactlyTheRenderedCommand(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	via := s.viaRuntime(t, s.alice)
	cmd := func(p *corev1.Pod) *[]string { return &p.Spec.Containers[0].Command }
	for what, change := range map[string]func(p *corev1.Pod){
		"--lfs": func(p *corev1.Pod) {
			c := cmd(p)
			*c = append((*c)[:6:6], append([]string{"--lfs"}, (*c)[6:]...)...)
		},
		"the CA file": func(p *corev1.Pod) {
			c := cmd(p)
			n := len(*c)
			*c = append((*c)[:n-2:n-2], "--ca-file", "/etc/metallo/repository-ca/ca.pem", (*c)[n-2], (*c)[n-1])
		},
	} {
		p := alice.helper()
		change(p)
		acceptedDryRun(t, "alice's helper with "+what, createPod(via, s.namespace, p))
	}
	for what, c := range map[string]struct {
		change  func(p *corev1.Pod)
		message string
	}{
		"another image": {func(p *corev1.Pod) { p.Spec.Containers[0].Image = applicationImageDigest }, msgHelperImage},
		"an added argument": {func(p *corev1.Pod) {
			*cmd(p) = append(*cmd(p), "--outcome-file", "/workspace/x")
		}, msgHelperCommand},
		"another destination": {func(p *corev1.Pod) { (*cmd(p))[7] = "/workspace/../etc" }, msgHelperCommand},
		"args":                {func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"--help"} }, msgHelperCommand},
		"a shell": {func(p *corev1.Pod) {
			*cmd(p) = []string{"/bin/sh", "-c", "cat /var/run/secrets/metallo/repository/token"}
		}, msgHelperCommand},
		"a space in an argument": {func(p *corev1.Pod) {
			(*cmd(p))[3] = "https://git.example.org/x.git --dest /workspace/repo"
		}, msgHelperCommand},
		"a second container": {func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: platformImage, Command: []string{"/bin/true"}})
		}, msgHelperShape},
		"an init container": {func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: platformImage, Command: []string{"/bin/true"}}}
		}, msgHelperShape},
	} {
		p := alice.helper()
		c.change(p)
		refused(t, "alice's helper with "+what, "metallo-workspace-helpers", c.message, createPod(via, s.namespace, p))
	}
}

// A serving Pod's read-only verification of its prepared checkout (the init container
// workspace-verify as the Runtime renders it, kube.VerifyContainer) is accepted in alice's
// Deployment; the same Deployment mounting her credential for it is refused.
func TestAServingPodsWorkspaceVerificationIsAcceptedWithoutACredential(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	via := s.viaRuntime(t, s.alice)
	verify := kube.VerifyContainer(application.WorkspaceVerification{Image: platformImage,
		Repository: siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("c", 40)}, SizeLimitBytes: 1 << 20})
	d := alice.deployment()
	d.Spec.Template.Spec.InitContainers = []corev1.Container{verify}
	acceptedDryRun(t, "alice's Deployment verifying its workspace", createDeployment(via, s.namespace, d))
	d = alice.deployment()
	verify.VolumeMounts = append(verify.VolumeMounts, corev1.VolumeMount{Name: "credential", MountPath: "/var/run/secrets/metallo/repository"})
	d.Spec.Template.Spec.InitContainers = []corev1.Container{verify}
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "credential", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: alice.secretName()}}})
	refused(t, "alice's Deployment verifying its workspace with her credential", "metallo-deployments", msgNoCredential, createDeployment(via, s.namespace, d))
}
