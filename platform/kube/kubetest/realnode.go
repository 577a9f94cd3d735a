package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// RealNodeLaneMarker is logged by every test that needs a real container (the real node); the
// CI lane check counts it, and `make test` requires the lane.
const RealNodeLaneMarker = "metallo-lane: realnode"

// The images the local cluster imports into the real node's containerd (deploy/images).
const (
	// ImagePlatform is the platform image: metallo, a shell (dash, coreutils), git, git-lfs
	// and CA certificates on Debian; what batch Jobs and the workspace helper run. Its user is
	// 65532 (metallo); it has no entrypoint, so a container's args are its argv.
	ImagePlatform = "platform"
	// ImageRuntime is the Runtime's image: metallo, CA certificates, user 65532, entrypoint
	// metallo.
	ImageRuntime = "runtime"
	// ImageHTTPService is a small HTTP service on port 8080: GET /healthz answers ok, any other
	// path a JSON object naming the service, its host and the MESSAGE environment variable.
	ImageHTTPService = "httpservice"
	// ImagePause is the Pods' sandbox image.
	ImagePause = "pause"
)

// RealNode is the local cluster's one real node: a kubelet with containerd and runc, where
// containers run, logs are real and Pod IPs answer (on a bridge of this machine only). It is
// tainted Taint=true:NoSchedule and labelled Label=true: a Pod lands there only when it
// selects and tolerates it (NodeSelector, Tolerations).
type RealNode struct {
	// Name is the Node's name.
	Name string
	// Label and Taint are the node's label and taint keys (value "true"; NoSchedule).
	Label, Taint string
	// Subnet is the pod network; HostIP the host's address on its bridge (Pods reach the host
	// there; they have no default route).
	Subnet, HostIP string
	// Images maps ImagePlatform, ImageRuntime, ImageHTTPService and ImagePause to references
	// by digest (name@sha256:…) the node has; nothing is ever pulled.
	Images map[string]string
}

// NodeSelector selects the real node.
func (n *RealNode) NodeSelector() map[string]string { return map[string]string{n.Label: "true"} }

// Tolerations tolerate the real node's taint.
func (n *RealNode) Tolerations() []corev1.Toleration {
	return []corev1.Toleration{{Key: n.Taint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
}

// RuntimeFlags are the Runtime's Site flags that put every Pod it renders on the real node.
func (n *RealNode) RuntimeFlags() []string {
	return []string{"--pod-node-selector", n.Label + "=true", "--pod-tolerations", n.Taint + "=true:NoSchedule"}
}

// Image returns the reference by digest of one of the node's images, failing the test when
// the node has none of that name.
func (n *RealNode) Image(tb testing.TB, name string) string {
	tb.Helper()
	ref := n.Images[name]
	if ref == "" {
		tb.Fatalf("kubetest: the real node has no %s image (make image; images %v)", name, n.Images)
	}
	return ref
}

// realNodeState mirrors deploy/localcluster's cluster.json realNode.
type realNodeState struct {
	Name   string            `json:"name"`
	Absent string            `json:"absent"`
	Label  string            `json:"label"`
	Taint  string            `json:"taint"`
	Subnet string            `json:"subnet"`
	HostIP string            `json:"hostIP"`
	Images map[string]string `json:"images"`
}

// RealNode returns the cluster's real node for a test that needs a real container: it logs
// RealNodeLaneMarker and FAILS the test (never skips), with the reason, when the cluster has
// no real node (another cluster of this machine holds it, or the cluster was started with
// METALLO_CLUSTER_REAL_NODE=off). The test holds the node shared until it ends: a test that
// restarts the node (RealNodeExclusive) waits for it.
func (e *Env) RealNode() *RealNode {
	e.T.Helper()
	return e.realNode(syscall.LOCK_SH)
}

// RealNodeExclusive is RealNode for a test that stops and starts the real node: it waits until
// no other real-node test of this machine's test binaries on this cluster runs, and keeps them
// waiting until it ends.
func (e *Env) RealNodeExclusive() *RealNode {
	e.T.Helper()
	return e.realNode(syscall.LOCK_EX)
}

func (e *Env) realNode(how int) *RealNode {
	tb := e.T
	tb.Helper()
	tb.Log(RealNodeLaneMarker)
	if err := holdRealNode(tb, e.Dir, how); err != nil {
		tb.Fatalf("kubetest: %v", err)
	}
	s, err := readState(e.Dir)
	if err != nil {
		tb.Fatalf("kubetest: %v", err)
	}
	switch {
	case s.RealNode == nil:
		tb.Fatalf("kubetest: the local cluster in %s has no real node (started by a localcluster without it: make cluster-down, then make cluster-up); this test needs a real container", e.Dir)
	case s.RealNode.Name == "":
		tb.Fatalf("kubetest: the local cluster in %s has no real node: %s; this test needs a real container", e.Dir, s.RealNode.Absent)
	}
	r := s.RealNode
	return &RealNode{Name: r.Name, Label: r.Label, Taint: r.Taint, Subnet: r.Subnet, HostIP: r.HostIP, Images: r.Images}
}

// holdRealNode takes the state directory's real-node test lock (shared or exclusive) until the
// test ends.
func holdRealNode(tb testing.TB, dir string, how int) error {
	// Not under leases/: the local cluster removes what is not a test binary's lease there.
	f, err := os.OpenFile(filepath.Join(dir, "realnode-tests.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB) != nil {
		if how == syscall.LOCK_EX {
			tb.Logf("kubetest: waiting for the other real-node tests to end (this test restarts the real node)")
		} else {
			tb.Logf("kubetest: waiting for a test that restarts the real node")
		}
		if err := syscall.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return fmt.Errorf("real-node test lock: %w", err)
		}
	}
	tb.Cleanup(func() { f.Close() })
	return nil
}

// PodLogs returns the log of a Pod's container through the API server (pods/log, which the
// API server reads from the kubelet).
func (e *Env) PodLogs(namespace, pod, container string) string {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := e.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		e.T.Fatalf("kubetest: log of pod %s/%s: %v", namespace, pod, err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, rc); err != nil {
		e.T.Fatalf("kubetest: log of pod %s/%s: %v", namespace, pod, err)
	}
	return b.String()
}
