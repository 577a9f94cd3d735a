package kube_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// An application service runs on the real node (the local cluster's
// httpservice image) with its ReadWriteOnce workspace claim mounted; while
// its Pod runs, read-file answers a workspace file's exact bytes (NUL,
// invalid UTF-8) through a real reader Pod — the platform image running
// metallo workspace-read with the claim read-only, required onto the
// running Pod's node, where the claim is attached — and, after the file
// changed, its new bytes (the read is live, not cached). The service's
// Pod is the same, Running and Ready, with no restart, after both reads;
// no reader is left. The httpservice image writes nothing into its
// workspace, so the test writes the file, as the service would, into the
// claim's volume on this machine (the local cluster's hostPath volume,
// the real node being this machine). Real: the API server, admission,
// the scheduler, the kubelet, containerd, runc, the volume, pods/log, the
// Deployment and ReplicaSet controllers; KWOK is not involved.
func TestReadFileOfARunningApplicationServiceOnTheRealNodeAnswersItsWorkspacesExactBytes(t *testing.T) {
	t.Parallel()
	var node *kubetest.RealNode
	var image string
	files := readerFiles()
	files.Wait = 2 * time.Minute // a real container's start and end
	s := newAppSite(t, appOptions{siteOptions: siteOptions{fileReads: files, realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
		node = e.RealNode()
		image = node.Image(t, kubetest.ImageHTTPService)
		return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
	}}})
	attempt := uuid.NewString()
	p := appPrepare(8080, map[string]any{"path": "/healthz", "period_seconds": 1})
	p["image"] = image
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, p)), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	pod := s.podOf(attempt)
	if pod.Spec.NodeName != node.Name || pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("the service's Pod is %s on %q, not Running on the real node %s", pod.Status.Phase, pod.Spec.NodeName, node.Name)
	}
	pvc, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(testContext(t), domain.AttemptObjectName(attempt, domain.SuffixWorkspace), metav1.GetOptions{})
	if err != nil || len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Fatalf("the workspace claim's access modes %v (%v); want ReadWriteOnce", pvc.Spec.AccessModes, err)
	}

	host := s.hostWorkspace(attempt)
	file := filepath.Join(host, "state", "requests.log")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	first := []byte("GET /healthz 200\n\x00\xff\xfe\xc3\x28 served\n")
	if err := os.WriteFile(file, first, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	seen := s.followReader(ctx, attempt)
	r, took := s.readFileOf(attempt, "state/requests.log", 4096)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	if got, truncated := fileContent(t, r); !bytes.Equal(got, first) || truncated {
		t.Fatalf("read %q truncated %v; the file holds %q", got, truncated, first)
	}
	records, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	s.checkReader(t, seen(), records, attempt, node.Name, "state/requests.log", "4096")
	t.Logf("read-file of a running service on the real node, reader created → line read → deleted: %v", took)

	second := append(append([]byte(nil), first...), []byte("POST /echo 201\n")...)
	if err := os.WriteFile(file, second, 0o644); err != nil {
		t.Fatal(err)
	}
	r, took = s.readFileOf(attempt, "state/requests.log", 4096)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	if got, _ := fileContent(t, r); !bytes.Equal(got, second) {
		t.Fatalf("read %q after the change; the file holds %q", got, second)
	}
	t.Logf("second read: %v", took)

	after := s.podOf(attempt) // exactly one Pod: no reader is left
	ready := false
	for _, c := range after.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	if after.UID != pod.UID || after.Status.Phase != corev1.PodRunning || !ready || len(after.Status.ContainerStatuses) != 1 || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("the service's Pod after the reads: uid %s (was %s), %s, ready %v, %+v", after.UID, pod.UID, after.Status.Phase, ready, after.Status.ContainerStatuses)
	}
	if st := state(t, s.simple(siteprotocol.OpObserve, attempt)); st != siteprotocol.StateHealthy {
		t.Fatalf("the service after the reads: %s", st)
	}
}
