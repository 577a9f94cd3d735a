package kube_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// readFileOf runs read-file of path (max bytes) and returns its result,
// checking that the encoded result is within the protocol's bound, and
// how long the read held the stream.
func (s *site) readFileOf(attempt, path string, maxBytes int64) (siteprotocol.Result, time.Duration) {
	s.t.Helper()
	p := s.command(siteprotocol.OpReadFile, attempt, map[string]any{"path": path, "max_bytes": maxBytes})
	began := time.Now()
	a, err := s.registry.Execute(testContext(s.t), p)
	took := time.Since(began)
	if err != nil {
		s.t.Fatalf("read-file %s: %v", path, err)
	}
	r, encoded, err := siteprotocol.NewResult(p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
	if err != nil {
		s.t.Fatalf("read-file answer %+v: %v", a, err)
	}
	if len(encoded) > siteprotocol.MaxResultBytes {
		s.t.Fatalf("the result is %d bytes, over the protocol's %d", len(encoded), siteprotocol.MaxResultBytes)
	}
	return r, took
}

func fileContent(t *testing.T, r siteprotocol.Result) ([]byte, bool) {
	t.Helper()
	d := detail[siteprotocol.ReadFileDetail](t, r)
	b, err := base64.StdEncoding.DecodeString(d.ContentBase64)
	if err != nil {
		t.Fatal(err)
	}
	return b, d.Truncated
}

// hostWorkspace is the host directory of the Attempt's claim (the local
// cluster's hostPath volume, on this machine like the real node).
func (s *site) hostWorkspace(attempt string) string {
	s.t.Helper()
	ctx := testContext(s.t)
	pvc, err := s.e.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixWorkspace), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	pv, err := s.e.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		s.t.Fatalf("the volume of claim %s: %v", pvc.Name, err)
	}
	return pv.Spec.HostPath.Path
}

// A batch Attempt's real container on the real node writes files into its
// workspace; read-file, through a real reader Pod (the platform image
// running metallo workspace-read with the claim read-only, required onto
// the Job Pod's node), answers a file's exact bytes (NUL, invalid UTF-8),
// a 2 MiB file truncated to exactly its first max_bytes, a link that stays
// inside; it refuses path-rejected a link to /etc, a directory and a FIFO
// (without blocking). The host's copy of the volume is the reference.
// Each read's time (create → line read → deleted) is logged for
// docs/site-runtime.md. Real: the API server, admission, the scheduler,
// the kubelet, containerd, runc, the volume, pods/log; KWOK is not
// involved.
func TestReadFileOnTheRealNodeAnswersTheWorkspacesExactBytes(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{
		realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
			node := e.RealNode()
			return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
		},
		fileReads: &application.FileReadConfig{Timeout: time.Minute},
	})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	script := `set -e; mkdir -p out; printf 'exact ' > out/result.bin; head -c 3 /dev/zero >> out/result.bin; printf '\377\376\303\050 bytes\n' >> out/result.bin; ` +
		`head -c 2097152 /dev/urandom > big.bin; ln -s /etc etc; ln -s out/result.bin inside; mkfifo pipe`
	want(t, s.startArgv(attempt, 600, []string{"sh", "-c", script}, nil), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "succeeded", func(r siteprotocol.Result) bool {
		st := state(t, r)
		if st == siteprotocol.StateFailed {
			t.Fatalf("the Attempt failed: %s", r.Detail)
		}
		return st == siteprotocol.StateSucceeded
	})
	host := s.hostWorkspace(attempt)
	result, err := os.ReadFile(filepath.Join(host, "out", "result.bin"))
	if err != nil || !bytes.Equal(result, []byte("exact \x00\x00\x00\xff\xfe\xc3\x28 bytes\n")) {
		t.Fatalf("the container wrote %q (%v)", result, err)
	}
	big, err := os.ReadFile(filepath.Join(host, "big.bin"))
	if err != nil || len(big) != 2<<20 {
		t.Fatalf("big.bin: %d bytes (%v)", len(big), err)
	}

	var took []time.Duration
	r, d := s.readFileOf(attempt, "out/result.bin", 4096)
	took = append(took, d)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	if got, truncated := fileContent(t, r); !bytes.Equal(got, result) || truncated {
		t.Fatalf("read %q truncated %v; the file holds %q", got, truncated, result)
	}
	r, d = s.readFileOf(attempt, "big.bin", siteprotocol.MaxReadBytes)
	took = append(took, d)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	if got, truncated := fileContent(t, r); !bytes.Equal(got, big[:siteprotocol.MaxReadBytes]) || !truncated {
		t.Fatalf("read %d bytes truncated %v; want the first %d bytes of big.bin, truncated", len(got), truncated, siteprotocol.MaxReadBytes)
	}
	r, d = s.readFileOf(attempt, "inside", 4096)
	took = append(took, d)
	if got, _ := fileContent(t, r); r.Outcome != siteprotocol.OutcomeSucceeded || !bytes.Equal(got, result) {
		t.Fatalf("a link inside the workspace: %s / %s %s", r.Outcome, r.Reason, r.Message)
	}
	for _, path := range []string{"etc/passwd", "etc", "out", "pipe"} {
		r, d = s.readFileOf(attempt, path, 4096)
		took = append(took, d)
		want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonPathRejected)
		t.Logf("%s: %s", path, r.Message)
	}
	if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(testContext(t), domain.AttemptObjectName(attempt, domain.SuffixReader), metav1.GetOptions{}); err == nil {
		t.Fatal("a reader is left")
	}
	t.Logf("read-file on the real node, reader created → line read → deleted: %v", took)
}
