package kube_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// newRealNodeSite is a Site whose Runtime renders every Pod onto the local
// cluster's real node (its node selector and toleration as the Site's
// scheduling flags) in the platform image: containers run for real. It
// fails the test, with the reason, when the cluster has no real node.
func newRealNodeSite(t *testing.T) (*site, *kubetest.RealNode) {
	t.Helper()
	var node *kubetest.RealNode
	s := newSite(t, siteOptions{realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
		node = e.RealNode()
		return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
	}})
	return s, node
}

// startArgv starts the Attempt running argv with env, 100 millicores and
// 64 MiB, for limit seconds.
func (s *site) startArgv(attempt string, limit int64, argv []string, env map[string]string) siteprotocol.Result {
	s.t.Helper()
	payload := map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20}, "time_limit_seconds": limit, "argv": argv}
	if env != nil {
		payload["env"] = env
	}
	return s.execute(s.command(siteprotocol.OpStart, attempt, payload))
}

// podOf returns the Attempt's one Pod (failing unless there is exactly one).
func (s *site) podOf(attempt string) corev1.Pod {
	s.t.Helper()
	pods, err := s.e.Client.CoreV1().Pods(s.ns).List(testContext(s.t), listByAttempt(attempt))
	if err != nil {
		s.t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		s.t.Fatalf("attempt %s has %d Pods; want one", attempt, len(pods.Items))
	}
	return pods.Items[0]
}

// workspaceDir is the host directory of the Attempt's workspace claim (the
// local cluster's hostPath volume, on this machine like the real node).
func (s *site) workspaceDir(attempt string) string {
	s.t.Helper()
	ctx := testContext(s.t)
	pvc, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, "attempt-"+attempt+"-ws", metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	pv, err := s.e.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	if pv.Spec.HostPath == nil {
		s.t.Fatalf("volume %s is not a hostPath volume", pv.Name)
	}
	return pv.Spec.HostPath.Path
}

// A batch Attempt through the Runtime on the real node: the Job is created
// as the member with the Site's scheduling, its Pod lands on the real node
// (nowhere else: it is the only node it tolerates and selects), the
// platform image's shell runs the Run's argv as the image's non-root user,
// the container's own output is in its log (pods/log through the API
// server, read from the kubelet) and the file it wrote is in its workspace
// claim; observe reports succeeded with exit code 0. Real: everything, the
// kubelet, containerd and runc included; KWOK is not involved.
func TestABatchAttemptRunsOnTheRealNodeWithItsOutputInItsLogAndItsFileInItsWorkspace(t *testing.T) {
	t.Parallel()
	s, node := newRealNodeSite(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	argv := []string{"sh", "-c", `echo "hello from $(hostname) as uid $(id -u) in $(pwd)"; echo "written by $MARK" > result.txt; cat result.txt`}
	want(t, s.startArgv(attempt, 300, argv, map[string]string{"MARK": attempt}), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	done := s.observeUntil(attempt, "succeeded", func(r siteprotocol.Result) bool {
		st := state(t, r)
		if st == siteprotocol.StateFailed {
			t.Fatalf("the Attempt failed: %s", r.Detail)
		}
		return st == siteprotocol.StateSucceeded
	})
	d := detail[siteprotocol.ObserveDetail](t, done)
	if d.ExitCode == nil || *d.ExitCode != 0 || d.FinishedAt == "" {
		t.Fatalf("succeeded: %s; want exit code 0 and a finish time", done.Detail)
	}
	pod := s.podOf(attempt)
	if pod.Spec.NodeName != node.Name {
		t.Fatalf("the Pod ran on %q, want the real node %s", pod.Spec.NodeName, node.Name)
	}
	log := s.e.PodLogs(s.ns, pod.Name, kube.ContainerName)
	for _, line := range []string{"hello from " + pod.Name + " as uid 65532 in /workspace", "written by " + attempt} {
		if !strings.Contains(log, line) {
			t.Fatalf("the container's log lacks %q:\n%s", line, log)
		}
	}
	b, err := os.ReadFile(filepath.Join(s.workspaceDir(attempt), "result.txt"))
	if err != nil || string(b) != "written by "+attempt+"\n" {
		t.Fatalf("the workspace file: %q (%v)", b, err)
	}
	t.Logf("Pod %s on %s, exit code 0; log:\n%s", pod.Name, pod.Spec.NodeName, log)
}

// A Run longer than its time limit is ended by the kubelet at the Pod's
// activeDeadlineSeconds (the Run's time_limit_seconds): observe reports it
// failed with the Pod's reason DeadlineExceeded and the exit code of the
// container, which the kubelet stopped with SIGTERM (its shell traps it and
// exits 143); what it printed before is in its log. Real: the kubelet's
// deadline, containerd, runc; KWOK is not involved. The limit is 20 s: the
// kubelet counts it from the Pod's start, mounting the claim included, and on
// a loaded machine that mount has taken several seconds (the trap must be set
// before the SIGTERM for the exit code to be 143).
func TestAnOverlongBatchAttemptOnTheRealNodeEndsAtItsTimeLimitWithDeadlineExceeded(t *testing.T) {
	t.Parallel()
	s, _ := newRealNodeSite(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	argv := []string{"sh", "-c", `trap 'echo "stopped at the deadline"; exit 143' TERM; echo "started, sleeping 600 s"; sleep 600 & wait`}
	want(t, s.startArgv(attempt, 20, argv, nil), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	failed := s.observeUntil(attempt, "failed", func(r siteprotocol.Result) bool {
		st := state(t, r)
		if st == siteprotocol.StateSucceeded {
			t.Fatalf("a 600-second command with a 20-second limit succeeded: %s", r.Detail)
		}
		return st == siteprotocol.StateFailed
	})
	d := detail[siteprotocol.ObserveDetail](t, failed)
	if d.Reason != "DeadlineExceeded" || d.ExitCode == nil || *d.ExitCode != 143 {
		t.Fatalf("failed: %s; want reason DeadlineExceeded and exit code 143", failed.Detail)
	}
	pod := s.podOf(attempt)
	if pod.Status.Reason != "DeadlineExceeded" || pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds != 20 {
		t.Fatalf("the Pod: reason %q, activeDeadlineSeconds %v", pod.Status.Reason, pod.Spec.ActiveDeadlineSeconds)
	}
	if log := s.e.PodLogs(s.ns, pod.Name, kube.ContainerName); !strings.Contains(log, "started, sleeping 600 s") {
		t.Fatalf("the container's log lacks its first line:\n%s", log)
	}
}

// A command that fails ends the Attempt failed with the Job's reason
// (BackoffLimitExceeded: backoffLimit 0) and the command's own exit code;
// what it wrote to standard error is in its log. Real: containerd, runc,
// the kubelet's container status; KWOK is not involved.
func TestAFailingCommandOnTheRealNodeEndsFailedWithItsExitCode(t *testing.T) {
	t.Parallel()
	s, _ := newRealNodeSite(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	argv := []string{"sh", "-c", `echo "no input data, giving up" >&2; exit 3`}
	want(t, s.startArgv(attempt, 300, argv, nil), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	failed := s.observeUntil(attempt, "failed", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateFailed })
	d := detail[siteprotocol.ObserveDetail](t, failed)
	if d.Reason != batchv1.JobReasonBackoffLimitExceeded || d.ExitCode == nil || *d.ExitCode != 3 {
		t.Fatalf("failed: %s; want reason %s and exit code 3", failed.Detail, batchv1.JobReasonBackoffLimitExceeded)
	}
	pod := s.podOf(attempt)
	if log := s.e.PodLogs(s.ns, pod.Name, kube.ContainerName); !strings.Contains(log, "no input data, giving up") {
		t.Fatalf("the container's log lacks its message:\n%s", log)
	}
}
