package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Layout of the workspace helper Pod (docs/site-runtime.md#the-workspace-helper),
// shared with the admission policies of deploy/cluster.
const (
	// HelperContainer is the helper's one container.
	HelperContainer = "checkout"
	// HelperProgram is metallo in the platform image.
	HelperProgram = "/usr/local/bin/metallo"
	// HelperDest is where the checkout lands in the workspace.
	HelperDest = WorkspacePath + "/repo"
	// CredentialVolume is the credential Secret's volume, mounted read-only
	// at CredentialPath (files username and token).
	CredentialVolume = "credential"
	CredentialPath   = "/var/run/secrets/metallo/repository"
	// CAVolume is the repository host's CA bundle (a ConfigMap, key
	// CAKey), mounted at CAPath.
	CAVolume = "repository-ca"
	CAPath   = "/etc/metallo/repository-ca"
	CAKey    = "ca.pem"
	// CredentialUsernameKey and CredentialTokenKey are the Secret's keys.
	CredentialUsernameKey = "username"
	CredentialTokenKey    = "token"
	// LabelRole RoleWorkspaceHelper marks the helper Pod for the admission
	// policy metallo-workspace-helpers (deploy/cluster).
	LabelRole           = "execution.pharos.dev/role"
	RoleWorkspaceHelper = "workspace-helper"
)

// RenderCredential renders the Attempt's credential Secret
// attempt-<attempt>-cred: Opaque, immutable, the identity labels; its
// saved specification leaves the grant out, and the username and token go
// into Data, written at create only.
func (r *Renderer) RenderCredential(s application.CredentialSpec) (application.NativeObject, error) {
	name := domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixCredential)
	immutable := true
	secret := corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: domain.KindSecret},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: Labels(s.Identity)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  &immutable,
	}
	obj, err := Object(domain.KindSecret, s.Namespace, name, secret)
	if err != nil {
		return obj, err
	}
	obj.Data = map[string][]byte{CredentialUsernameKey: []byte(s.Grant.Username), CredentialTokenKey: []byte(s.Grant.Token)}
	return obj, nil
}

// HelperCommand is the helper container's exact command for s: metallo
// workspace-init with the repository, the commit, --lfs when asked, the
// destination, the size limit, the credential directory, the CA file when
// the Site names one, and the timeout, in this order.
func HelperCommand(s application.HelperSpec) []string {
	cmd := []string{HelperProgram, "workspace-init", "--url", s.Repository.URL, "--commit", s.Repository.Commit}
	if s.Repository.LFS {
		cmd = append(cmd, "--lfs")
	}
	cmd = append(cmd, "--dest", HelperDest, "--size-limit", strconv.FormatInt(s.SizeLimitBytes, 10), "--credential-dir", CredentialPath)
	if s.CAConfigMap != "" {
		cmd = append(cmd, "--ca-file", CAPath+"/"+CAKey)
	}
	return append(cmd, "--timeout", s.Timeout.String())
}

// RenderHelper renders the Attempt's workspace helper Pod
// attempt-<attempt>-git: the fixed platform image running exactly
// HelperCommand, restartPolicy Never, terminationGracePeriodSeconds 5,
// activeDeadlineSeconds the checkout's timeout plus a minute, the member's
// service account without a mounted token, the workspace claim at
// /workspace, the credential Secret read-only at CredentialPath (only in
// this Pod), the CA ConfigMap when the Site names one, the Site's
// scheduling, the identity labels and LabelRole=RoleWorkspaceHelper; the
// termination message is the
// file workspace-init writes its outcome to.
func (r *Renderer) RenderHelper(s application.HelperSpec) (application.NativeObject, error) {
	name := domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixHelper)
	mounts := []corev1.VolumeMount{
		{Name: WorkspaceVolume, MountPath: WorkspacePath},
		{Name: CredentialVolume, MountPath: CredentialPath, ReadOnly: true},
	}
	// The credential files are the root user's and HelperGroupID's, mode
	// 0440: the platform image runs as its own unprivileged user, which
	// reads them only through the Pod's fsGroup.
	mode, group := int32(0o440), int64(HelperGroupID)
	volumes := []corev1.Volume{
		{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.WorkspaceClaim}}},
		{Name: CredentialVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.Credential, DefaultMode: &mode}}},
	}
	if s.CAConfigMap != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: CAVolume, MountPath: CAPath, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: CAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.CAConfigMap}, Items: []corev1.KeyToPath{{Key: CAKey, Path: CAKey}}}}})
	}
	pod := r.platformPod(platformPod{
		name: name, namespace: s.Namespace, identity: s.Identity, role: RoleWorkspaceHelper, serviceAccount: s.ServiceAccount,
		image: s.Image, container: HelperContainer, command: HelperCommand(s), deadline: int64(s.Timeout.Seconds()) + 60,
		security: &corev1.PodSecurityContext{FSGroup: &group}, volumes: volumes, mounts: mounts,
	})
	return Object(domain.KindPod, s.Namespace, name, pod)
}

// platformPod is what distinguishes one of the Runtime's own Pods of an
// Attempt (the workspace helper, the workspace reader) from the other.
type platformPod struct {
	name, namespace string
	identity        application.ObjectIdentity
	// role is the LabelRole value the admission policies select by.
	role                             string
	serviceAccount, image, container string
	command                          []string
	// deadline is activeDeadlineSeconds.
	deadline int64
	security *corev1.PodSecurityContext
	volumes  []corev1.Volume
	mounts   []corev1.VolumeMount
	affinity *corev1.Affinity
}

// platformPod renders one of the Runtime's own Pods: the fixed platform
// image in one container running exactly p.command with no args or env,
// restartPolicy Never, terminationGracePeriodSeconds 5, p.deadline, the
// member's service account without a mounted token, the workspace as
// working directory, no privilege escalation, the termination message
// from its file, the Site's scheduling, the batch Pod annotations, the
// identity labels and LabelRole=p.role.
func (r *Renderer) platformPod(p platformPod) corev1.Pod {
	grace := int64(application.HelperGracePeriodSeconds)
	deadline := p.deadline
	noToken := false
	labels := Labels(p.identity)
	labels[LabelRole] = p.role
	var annotations map[string]string
	if len(r.PodAnnotations) > 0 {
		annotations = maps.Clone(r.PodAnnotations)
	}
	return corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: domain.KindPod},
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			ActiveDeadlineSeconds:         &deadline,
			ServiceAccountName:            p.serviceAccount,
			AutomountServiceAccountToken:  &noToken,
			SecurityContext:               p.security,
			NodeSelector:                  maps.Clone(r.Scheduling.NodeSelector),
			Tolerations:                   slices.Clone(r.Scheduling.Tolerations),
			Affinity:                      p.affinity,
			Containers: []corev1.Container{{
				Name:                     p.container,
				Image:                    p.image,
				Command:                  p.command,
				WorkingDir:               WorkspacePath,
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext:          &corev1.SecurityContext{AllowPrivilegeEscalation: &noToken},
				VolumeMounts:             p.mounts,
			}},
			Volumes: p.volumes,
		},
	}
}

// HelperGroupID is the workspace helper Pod's fsGroup: the group of the
// platform image's user (uid and gid 65532, deploy/images), so that the
// helper reads its credential Secret's files (mode 0440) and no other user
// of the node does (docs/site-runtime.md#the-workspace-helper).
const HelperGroupID = 65532

// VerifyContainerName is a serving Pod's init container that verifies its
// prepared checkout.
const VerifyContainerName = "workspace-verify"

// VerifyCommand is the exact command of a serving Pod's workspace-verify
// init container: metallo workspace-init --verify-only for the checkout
// of v, without a credential, within a minute.
func VerifyCommand(v application.WorkspaceVerification) []string {
	cmd := []string{HelperProgram, "workspace-init", "--url", v.Repository.URL, "--commit", v.Repository.Commit}
	if v.Repository.LFS {
		cmd = append(cmd, "--lfs")
	}
	return append(cmd, "--dest", HelperDest, "--size-limit", strconv.FormatInt(v.SizeLimitBytes, 10), "--verify-only", "--timeout", "1m0s")
}

// VerifyContainer is the serving Pod's init container workspace-verify
// (docs/site-runtime.md#services-and-the-prepared-workspace): the fixed
// platform image running exactly VerifyCommand, the workspace claim
// mounted read-only, nothing else.
func VerifyContainer(v application.WorkspaceVerification) corev1.Container {
	no := false
	return corev1.Container{
		Name:                     VerifyContainerName,
		Image:                    v.Image,
		Command:                  VerifyCommand(v),
		WorkingDir:               WorkspacePath,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          &corev1.SecurityContext{AllowPrivilegeEscalation: &no},
		VolumeMounts:             []corev1.VolumeMount{{Name: WorkspaceVolume, MountPath: WorkspacePath, ReadOnly: true}},
	}
}

// HelperState reads the helper Pod ref names as the Runtime: done once
// its container HelperContainer terminated, with the termination message
// and exit code. found is false when no Pod with ref's name and UID
// exists.
func (w *Workloads) HelperState(ctx context.Context, ref siteprotocol.NativeRef) (application.HelperState, bool, error) {
	pod, err := w.client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return application.HelperState{}, false, nil
	}
	if err != nil {
		return application.HelperState{}, false, err
	}
	if string(pod.UID) != ref.UID {
		return application.HelperState{}, false, nil
	}
	return HelperStateOf(pod), true, nil
}

// HelperStateOf is the helper's state as its Pod shows it: its container's
// termination, or (a Pod that failed before the container ran, e.g. past
// its activeDeadlineSeconds) done without an outcome.
func HelperStateOf(pod *corev1.Pod) application.HelperState {
	return containerState(pod, HelperContainer)
}

// containerState is the state of one of the Runtime's own Pods by its
// container name: the container's termination, or done without an
// outcome when the Pod ended before the container did.
func containerState(pod *corev1.Pod, container string) application.HelperState {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container && s.State.Terminated != nil {
			return application.HelperState{Done: true, Message: s.State.Terminated.Message, ExitCode: s.State.Terminated.ExitCode}
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return application.HelperState{Done: true, Message: fmt.Sprintf("Pod %s: %s %s", pod.Status.Phase, pod.Status.Reason, pod.Status.Message), ExitCode: -1}
	}
	return application.HelperState{}
}

// Interface checks.
var (
	_ application.CheckoutSpecs = (*Renderer)(nil)
	_ application.HelperPods    = (*Workloads)(nil)
)
