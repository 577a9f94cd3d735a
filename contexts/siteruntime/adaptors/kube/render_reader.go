package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Layout of the workspace reader Pod (docs/site-runtime.md#the-workspace-reader),
// shared with the admission policies of deploy/cluster.
const (
	// ReaderContainer is the reader's one container.
	ReaderContainer = "read"
	// RoleWorkspaceReader is the reader's LabelRole, which the admission
	// policy metallo-workspace-readers selects.
	RoleWorkspaceReader = "workspace-reader"
)

// ReaderCommand is the reader container's exact command for s: metallo
// workspace-read with the workspace as root, max_bytes and the path, in
// this order (the path last, one argument, never through a shell).
func ReaderCommand(s application.ReaderSpec) []string {
	return []string{HelperProgram, "workspace-read", "--root", WorkspacePath, "--max-bytes", strconv.FormatInt(s.MaxBytes, 10), "--path", s.Path}
}

// RenderReader renders the Attempt's workspace reader Pod
// attempt-<attempt>-read (application.ReaderSpecs): the platform Pod of
// the workspace helper (the fixed platform image, restartPolicy Never,
// terminationGracePeriodSeconds 5, the member's service account without a
// token, the Site's scheduling, the identity labels) with
// LabelRole=RoleWorkspaceReader, running exactly ReaderCommand,
// activeDeadlineSeconds the reader's timeout, the workspace claim mounted
// read-only at /workspace and nothing else (no Secret, no fsGroup: the
// kubelet changes no ownership on the member's files), and, when s.Node
// is set, a required node affinity to that node (metadata.name), where
// the ReadWriteOnce claim is attached.
func (r *Renderer) RenderReader(s application.ReaderSpec) (application.NativeObject, error) {
	if s.MaxBytes < 1 || s.MaxBytes > siteprotocol.MaxReadBytes || !siteprotocol.SafeRelativePath(s.Path) {
		return application.NativeObject{}, fmt.Errorf("a reader of %q for %d bytes", s.Path, s.MaxBytes)
	}
	name := domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixReader)
	var affinity *corev1.Affinity
	if s.Node != "" {
		affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{s.Node}},
			}}},
		}}}
	}
	pod := r.platformPod(platformPod{
		name: name, namespace: s.Namespace, identity: s.Identity, role: RoleWorkspaceReader, serviceAccount: s.ServiceAccount,
		image: s.Image, container: ReaderContainer, command: ReaderCommand(s), deadline: int64(s.Timeout.Seconds()),
		volumes: []corev1.Volume{{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.WorkspaceClaim, ReadOnly: true}}}},
		mounts:   []corev1.VolumeMount{{Name: WorkspaceVolume, MountPath: WorkspacePath, ReadOnly: true}},
		affinity: affinity,
	})
	return Object(domain.KindPod, s.Namespace, name, pod)
}

// ReaderState reads the reader Pod ref names as the Runtime
// (application.ReaderPods): done once its container ReaderContainer
// terminated (with its exit code) or the Pod ended without it (past its
// activeDeadlineSeconds: exit code -1). found is false when no Pod with
// ref's name and UID exists.
func (w *Workloads) ReaderState(ctx context.Context, ref siteprotocol.NativeRef) (application.HelperState, bool, error) {
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
	return containerState(pod, ReaderContainer), true, nil
}

// ReaderLog reads at most limit bytes of the reader container's log as
// the Runtime (pods/log with limitBytes). The kubelet gives a line it
// stored as several records of the container runtime (CRI splits lines
// longer than 16 KiB) back joined, so the reader's one line comes back
// whole. An error status of the API server (no log to give, a kubelet
// that cannot be reached) wraps application.ErrLogUnavailable.
func (w *Workloads) ReaderLog(ctx context.Context, ref siteprotocol.NativeRef, limit int64) ([]byte, error) {
	rc, err := w.client.CoreV1().Pods(ref.Namespace).GetLogs(ref.Name, &corev1.PodLogOptions{Container: ReaderContainer, LimitBytes: &limit}).Stream(ctx)
	var status apierrors.APIStatus
	switch {
	case err != nil && errors.As(err, &status):
		return nil, fmt.Errorf("%w: %v", application.ErrLogUnavailable, err)
	case err != nil:
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, limit))
	if err != nil {
		return nil, fmt.Errorf("read the log of %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return b, nil
}

// Interface checks.
var (
	_ application.ReaderSpecs = (*Renderer)(nil)
	_ application.ReaderPods  = (*Workloads)(nil)
)
