package policytest

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

const (
	msgReaderShape   = "a workspace reader has exactly one container"
	msgReaderImage   = "a workspace reader runs the Site's fixed platform image"
	msgReaderCommand = "a workspace reader runs exactly the rendered command"
	msgReaderRestart = "a workspace reader has restartPolicy Never"
	msgReaderMounts  = "a workspace reader mounts exactly its own Attempt's claim"
	msgReaderToken   = "a workspace reader has no service-account token and no environment"
	msgReaderLabel   = "a workspace reader attempt-<attempt>-read carries the label execution.pharos.dev/role=workspace-reader"
)

func (a attempt) readerName() string { return a.name() + "-read" }

// reader is the Attempt's workspace reader Pod exactly as the Runtime renders it
// (kube.Renderer.RenderReader: the platform image, the exact workspace-read command, the claim
// read-only, required onto node when it is set).
func (a attempt) reader(path, node string) *corev1.Pod {
	obj, err := kube.NewRenderer(nil, nil).RenderReader(application.ReaderSpec{
		Identity:  application.ObjectIdentity{RunID: a.run, AttemptID: a.id, MemberID: a.member, ProjectID: a.project, CommandID: a.command},
		Namespace: "", ServiceAccount: "member-" + a.member, Image: platformImage,
		WorkspaceClaim: a.claimName(), Path: path, MaxBytes: 1 << 20, Timeout: time.Minute, Node: node,
	})
	if err != nil {
		panic(err)
	}
	var p corev1.Pod
	if err := json.Unmarshal(obj.Spec, &p); err != nil {
		panic(err)
	}
	p.Annotations = a.meta("").Annotations
	return &p
}

// A workspace reader as the Runtime renders it is admitted, as its member through the Runtime,
// with or without the node affinity of the workload's Pod and with a path holding spaces; it is
// the fixed platform image running exactly the rendered workspace-read command with its own
// Attempt's claim read-only, and anything else is refused: another image, a shell, args, another
// root, an absolute path or one with .., max-bytes beyond 1 MiB, the claim or its mount writable,
// a Secret, another volume, the token, the environment, a second container, another restart
// policy, the role label missing, another Attempt's claim or name. The member's own token creates
// none.
func TestAWorkspaceReaderIsExactlyWhatTheRuntimeRenders(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	bob := s.attempt(s.bob)
	via := s.viaRuntime(t, s.alice)
	acceptedDryRun(t, "alice's workspace reader as the Runtime renders it", createPod(via, s.namespace, alice.reader("out/metrics.txt", "")))
	acceptedDryRun(t, "alice's workspace reader on her Job's node", createPod(via, s.namespace, alice.reader("out/metrics.txt", "kwok-node-0")))
	acceptedDryRun(t, "alice's workspace reader of a path with spaces", createPod(via, s.namespace, alice.reader("my results/run 1.csv", "")))
	cmd := func(p *corev1.Pod) *[]string { return &p.Spec.Containers[0].Command }
	no, yes := false, true
	for what, c := range map[string]struct {
		change  func(p *corev1.Pod)
		message string
	}{
		"another image":          {func(p *corev1.Pod) { p.Spec.Containers[0].Image = applicationImageDigest }, msgReaderImage},
		"a shell":                {func(p *corev1.Pod) { *cmd(p) = []string{"/bin/sh", "-c", "cat /workspace/x"} }, msgReaderCommand},
		"args":                   {func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"--help"} }, msgReaderCommand},
		"another root":           {func(p *corev1.Pod) { (*cmd(p))[3] = "/" }, msgReaderCommand},
		"an absolute path":       {func(p *corev1.Pod) { (*cmd(p))[7] = "/etc/passwd" }, msgReaderCommand},
		"a path with ..":         {func(p *corev1.Pod) { (*cmd(p))[7] = "out/../../etc/passwd" }, msgReaderCommand},
		"max-bytes beyond 1 MiB": {func(p *corev1.Pod) { (*cmd(p))[5] = "1048577" }, msgReaderCommand},
		"an added argument":      {func(p *corev1.Pod) { *cmd(p) = append(*cmd(p), "--root", "/") }, msgReaderCommand},
		"the claim writable":     {func(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = false }, msgReaderMounts},
		"the mount writable":     {func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].ReadOnly = false }, msgReaderMounts},
		"an emptyDir as well": {func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, msgReaderMounts},
		"a Secret": {func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "metallo-site-secret"}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "s", MountPath: "/s", ReadOnly: true})
		}, msgReaderMounts},
		"an environment":    {func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: "1"}} }, msgReaderToken},
		"restart OnFailure": {func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, msgReaderRestart},
		"a second container": {func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: platformImage, Command: []string{"/bin/true"}})
		}, msgReaderShape},
		"an init container": {func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: platformImage, Command: []string{"/bin/true"}, SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no}}}
		}, msgReaderShape},
	} {
		p := alice.reader("out/metrics.txt", "")
		c.change(p)
		refused(t, "alice's reader with "+what, "metallo-workspace-readers", c.message, createPod(via, s.namespace, p))
	}

	// The token: the API server's service-account admission adds its projected volume, so
	// either rule may be the one reported.
	withToken := alice.reader("out/metrics.txt", "")
	withToken.Spec.AutomountServiceAccountToken = &yes
	refusedByOneOf(t, "alice's reader with the token", createPod(via, s.namespace, withToken),
		denial{"metallo-workspace-readers", msgReaderToken}, denial{"metallo-workspace-readers", msgReaderMounts})
	unlabelled := alice.reader("out/metrics.txt", "")
	unlabelled.Labels[kube.LabelRole] = kube.RoleWorkspaceHelper
	refused(t, "alice's reader labelled as a helper", "metallo-pods", msgReaderLabel, createPod(via, s.namespace, unlabelled))
	bobsClaim := alice.reader("out/metrics.txt", "")
	bobsClaim.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = bob.claimName()
	refusedByOneOf(t, "alice's reader mounting bob's claim", createPod(via, s.namespace, bobsClaim),
		denial{"metallo-pods", msgOwnClaim}, denial{"metallo-workspace-readers", msgReaderMounts})
	bobsName := alice.reader("out/metrics.txt", "")
	bobsName.Name = bob.readerName()
	refused(t, "alice's reader named for bob's Attempt", "metallo-pod-origin", msgBarePod, createPod(via, s.namespace, bobsName))
	refusedByOneOf(t, "alice's reader with her own token", createPod(s.asMember(t, s.alice), s.namespace, alice.reader("out/metrics.txt", "")),
		denial{"metallo-member-creates", msgThroughRuntime})
}
