package cluster

// The real node (README.md, "The real node"): one kubelet built from this module and Debian's
// containerd, runc and CNI plugins, beside the KWOK Nodes. One per machine: kubelet and
// containerd use fixed paths of the host (/var/lib/kubelet/device-plugins, /run/containerd/s,
// /var/run/netns, ...) and change host settings, so a machine-wide lock says which local
// cluster has it (realnode_lock.go), everything the node changes on the host is recorded
// before it changes and restored when the node stops (realnode_host.go), and a cluster that
// cannot have it says why.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// RealNodeName is the real node's Node name.
	RealNodeName = "real-node"
	// RealNodeLabel (value "true") is on the real node: a Pod's nodeSelector picks it.
	RealNodeLabel = "localcluster.metallo.dev/real-node"
	// RealNodeTaint (value "true", effect NoSchedule) keeps every Pod that does not tolerate it
	// off the real node, so KWOK's simulated Pods never land there by accident.
	RealNodeTaint = "localcluster.metallo.dev/real-node"
	// realNodeBridge is the pod network's Linux bridge.
	realNodeBridge = "mlc0"
	// defaultPodSubnet is the real node's pod network (METALLO_CLUSTER_POD_SUBNET).
	defaultPodSubnet = "10.88.0.0/24"
	// kubeletClientUser is the API server's user towards kubelets (pods/log, exec, proxy).
	kubeletClientUser = "kube-apiserver-kubelet-client"
)

// Real node modes (METALLO_CLUSTER_REAL_NODE).
const (
	// RealNodeRequired: up fails, naming the holder, when the machine's real node is taken.
	RealNodeRequired = "required"
	// RealNodeIfFree: up takes the real node when it is free and comes up without it, saying
	// so, when another cluster has it.
	RealNodeIfFree = "if-free"
	// RealNodeOff: no real node (parallel development beside a cluster that has it).
	RealNodeOff = "off"
)

// RealNodeState is what cluster.json records about the real node (kubetest reads it).
type RealNodeState struct {
	// Name is the Node's name; empty when the cluster has no real node.
	Name string `json:"name,omitempty"`
	// Absent says why the cluster has no real node (mode off, or held by another cluster).
	Absent string `json:"absent,omitempty"`
	// Label and Taint select and keep off the node (both with value "true"; NoSchedule).
	Label string `json:"label,omitempty"`
	Taint string `json:"taint,omitempty"`
	// Subnet is the pod network (CNI bridge Bridge, host-local addresses; the host holds the
	// first address, Pods have no default route).
	Subnet  string `json:"subnet,omitempty"`
	Bridge  string `json:"bridge,omitempty"`
	HostIP  string `json:"hostIP,omitempty"`
	Kubelet string `json:"kubelet,omitempty"`
	// APIServer is the API server's URL on the bridge address (the forwarder; the address the
	// kubernetes Service's endpoint names, which Pods reach through kube-proxy).
	APIServer string `json:"apiServer,omitempty"`
	// ProxyHealthz is kube-proxy's health URL on loopback (200 once its rules are in sync).
	ProxyHealthz string `json:"proxyHealthz,omitempty"`
	// Images maps each image imported into the node's containerd to its reference by digest.
	Images map[string]string `json:"images,omitempty"`
}

// realNodeOptions configure the real node of one cluster.
type realNodeOptions struct {
	mode, binDir, images, subnet string
}

func realNodeDir(dir string) string { return filepath.Join(dir, "node") }

// realNodeComponents are the real node's processes, in start order: containerd, the API
// server's forwarder onto the pod network (forward.go), the kubelet and kube-proxy.
var realNodeComponents = []string{"containerd", forwardComponent, "kubelet", kubeProxyComponent}

// kubeProxyComponent is kube-proxy's component name (pid and log file).
const kubeProxyComponent = "kube-proxy"

// startRealNode brings up the real node of the cluster in dir (its API server at server):
// takes the machine's real-node lock, records the host as found, starts containerd, imports
// the images and starts the kubelet. With mode if-free it returns a state with Absent set
// instead of an error when another cluster holds the node.
func startRealNode(ctx context.Context, dir, server string, cs kubernetes.Interface, o realNodeOptions) (*RealNodeState, error) {
	switch o.mode {
	case RealNodeOff:
		return &RealNodeState{Absent: "the cluster was started without the real node (METALLO_CLUSTER_REAL_NODE=off)"}, nil
	case RealNodeRequired, RealNodeIfFree:
	default:
		return nil, fmt.Errorf("METALLO_CLUSTER_REAL_NODE=%q: want %s, %s or %s", o.mode, RealNodeRequired, RealNodeIfFree, RealNodeOff)
	}
	for _, b := range []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("the real node needs Debian's containerd and runc (cluster.sh installs them with apt-get): %s: %w", b, err)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			return nil, fmt.Errorf("the real node needs Debian's containernetworking-plugins: %w", err)
		}
	}
	kubelet := filepath.Join(o.binDir, "kubelet")
	kubeProxy := filepath.Join(o.binDir, "kube-proxy")
	for _, b := range []string{kubelet, kubeProxy} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s binary missing in %s (build with deploy/localcluster/cluster.sh)", filepath.Base(b), o.binDir)
		}
	}
	for _, b := range []string{"iptables", "iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("the real node's kube-proxy needs Debian's iptables (cluster.sh installs it with apt-get): %s: %w", b, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	apiURL, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("API server URL %q: %w", server, err)
	}
	// A Unix socket's path has at most 107 bytes; containerd adds ".ttrpc" to its socket's.
	if socket := filepath.Join(realNodeDir(dir), "containerd", "containerd.sock.ttrpc"); len(socket) > 100 {
		return nil, fmt.Errorf("the state directory %s is too long a path for containerd's socket %s (at most 100 bytes): choose a shorter METALLO_CLUSTER_DIR", dir, socket)
	}
	images, err := readImages(o.images)
	if err != nil {
		return nil, err
	}
	if images["pause"] == "" {
		return nil, fmt.Errorf("%s names no pause image (build with make image)", o.images)
	}
	lk, err := claimRealNode(dir, o.subnet)
	if err != nil {
		var held *heldError
		if errors.As(err, &held) && o.mode == RealNodeIfFree {
			logf("NO REAL NODE: %v", err)
			return &RealNodeState{Absent: err.Error()}, nil
		}
		return nil, err
	}
	defer lk.Close() // containerd and the kubelet hold it from here on (realnode_lock.go)
	nodeDir := realNodeDir(dir)
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	kubeletPort, healthzPort, proxyHealthz, proxyMetrics := ports[0], ports[1], ports[2], ports[3]
	hostIP := hostAddress(o.subnet)
	cfg, err := writeRealNodeConfig(dir, server, o.subnet, hostIP, images["pause"], kubeletPort, healthzPort)
	if err != nil {
		return nil, fmt.Errorf("real node configuration: %w", err)
	}
	proxyConfig, err := writeKubeProxyConfig(dir, server, o.subnet, hostIP, proxyHealthz, proxyMetrics)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy configuration: %w", err)
	}
	if err := createBridge(o.subnet); err != nil {
		return nil, err
	}
	// kube-proxy's rules route a Pod's connection to a Service whose endpoint is another Pod
	// through the host (a DNAT in PREROUTING, then forwarded back onto the bridge), and the
	// reply, bridged straight between the Pods, must pass the same conntrack entry: IP
	// forwarding on, bridged traffic through iptables. Both are recorded beforehand and set
	// back by cluster-down (realnode_host.go).
	for k, v := range map[string]string{"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"} {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("set %s=%s for kube-proxy: %w", strings.ReplaceAll(k, "/", "."), v, err)
		}
	}
	// The API server's port on the bridge address it advertises (forward.go).
	if err := startProcess(dir, forwardComponent, []*os.File{lk}, self, "forward", "--dir", dir,
		"--listen", net.JoinHostPort(hostIP, apiURL.Port()), "--to", apiURL.Host); err != nil {
		return nil, err
	}
	if err := startProcess(dir, "containerd", []*os.File{lk}, "containerd", "--config", cfg.containerdConfig, "--log-level", "info"); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "containerd's socket", dir, []string{"containerd"}, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "--address", cfg.containerdSocket, "version").Run()
	}); err != nil {
		return nil, err
	}
	if err := importImages(ctx, cfg.containerdSocket, o.images); err != nil {
		return nil, err
	}
	if err := ensureKubeletClientRBAC(ctx, cs); err != nil {
		return nil, err
	}
	if err := startProcess(dir, "kubelet", []*os.File{lk}, kubelet,
		"--config="+cfg.kubeletConfig,
		"--kubeconfig="+cfg.kubeletKubeconfig,
		"--root-dir="+filepath.Join(nodeDir, "kubelet"),
		"--cert-dir="+filepath.Join(nodeDir, "pki"),
		"--hostname-override="+RealNodeName,
		"--node-ip="+hostIP,
		"--node-labels="+RealNodeLabel+"=true",
		"--v=1",
	); err != nil {
		return nil, err
	}
	if err := startProcess(dir, kubeProxyComponent, []*os.File{lk}, kubeProxy, "--config="+proxyConfig, "--v=1"); err != nil {
		return nil, err
	}
	return &RealNodeState{
		Name: RealNodeName, Label: RealNodeLabel, Taint: RealNodeTaint, Subnet: o.subnet, Bridge: realNodeBridge,
		HostIP: hostIP, Kubelet: "https://" + net.JoinHostPort(hostIP, strconv.Itoa(kubeletPort)), Images: images,
		APIServer:    "https://" + net.JoinHostPort(hostIP, apiURL.Port()),
		ProxyHealthz: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(proxyHealthz)) + "/healthz",
	}, nil
}

// realNodeReady tells whether the real node's Node is Ready and untainted but for RealNodeTaint
// and kube-proxy has programmed its rules (its healthz, when recorded).
func realNodeReady(ctx context.Context, cs kubernetes.Interface, rn *RealNodeState) error {
	if rn != nil && rn.ProxyHealthz != "" {
		if err := proxyHealthy(ctx, rn.ProxyHealthz); err != nil {
			return err
		}
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", RealNodeName, err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s is not Ready: %s", RealNodeName, c.Message)
			}
			for _, t := range node.Spec.Taints {
				if t.Key != RealNodeTaint {
					return fmt.Errorf("node %s still has the taint %s", RealNodeName, t.Key)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("node %s reports no Ready condition yet", RealNodeName)
}

// realNodeAlive tells whether the recorded real node's processes run.
func realNodeAlive(dir string) error {
	for _, c := range realNodeComponents {
		if !componentAlive(dir, c) {
			return fmt.Errorf("the real node's %s is not running", c)
		}
	}
	return nil
}

// ensureKubeletClientRBAC lets the API server's kubelet client user call the kubelet API
// (logs, exec, port-forward, proxy), as kubeadm binds it.
func ensureKubeletClientRBAC(ctx context.Context, cs kubernetes.Interface) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "localcluster:kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubelet client RBAC: %w", err)
	}
	return nil
}

// imageManifest is the manifest deploy/images writes: each image's archive and reference by
// digest.
type imageManifest struct {
	Images map[string]struct {
		Ref     string `json:"ref"`
		Archive string `json:"archive"`
	} `json:"images"`
}

func readManifest(path string) (imageManifest, error) {
	var m imageManifest
	if path == "" {
		return m, errors.New("no image manifest (--images): the real node runs only images built locally (make image)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("image manifest: %w (build the images with make image)", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("image manifest %s: %w", path, err)
	}
	return m, nil
}

// readImages reads the image manifest of deploy/images (name → reference by digest).
func readImages(path string) (map[string]string, error) {
	m, err := readManifest(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for n, im := range m.Images {
		out[n] = im.Ref
	}
	return out, nil
}

// importImages imports every archive of the manifest into the node's containerd (namespace
// k8s.io, where the kubelet's images live), unpacked for the overlayfs snapshotter, under its
// name (repository:key) and under its reference by digest (repository@sha256:…): the CRI
// plugin finds an image only by a name containerd has for it, and Pods name images by digest.
// Importing an image that is already there changes nothing.
func importImages(ctx context.Context, socket, manifest string) error {
	m, err := readManifest(manifest)
	if err != nil {
		return err
	}
	began := time.Now()
	ctr := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ctr", append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	}
	for _, name := range sortedKeys(m.Images) {
		im := m.Images[name]
		repo, _, ok := strings.Cut(im.Ref, "@")
		if !ok {
			return fmt.Errorf("image %s: %q is not a reference by digest", name, im.Ref)
		}
		if out, err := ctr("images", "import", "--base-name", repo, "--digests", im.Archive); err != nil {
			return fmt.Errorf("import image %s (%s): %v: %s", name, im.Archive, err, out)
		}
		out, err := ctr("images", "list", "--quiet")
		if err != nil {
			return fmt.Errorf("list images: %v: %s", err, out)
		}
		if !slices.Contains(strings.Fields(string(out)), im.Ref) {
			return fmt.Errorf("image %s imported, but containerd does not list %s", name, im.Ref)
		}
	}
	logf("imported %d images into the real node's containerd in %s", len(m.Images), time.Since(began).Round(10*time.Millisecond))
	return nil
}

// describe says in a sentence whether the cluster has the real node.
func (s *RealNodeState) describe() string {
	switch {
	case s == nil:
		return "no real node (the cluster predates it)"
	case s.Name != "":
		return fmt.Sprintf("real node %s (select it with %s=true, tolerate the taint %s=true:NoSchedule; pod network %s)", s.Name, s.Label, s.Taint, s.Subnet)
	}
	return "NO REAL NODE: " + s.Absent
}

// reuseRealNode completes up on a healthy running cluster: one with the real node imports the
// images of the manifest (they may be new) and records them; one without it takes it now
// when the mode asks for it (with mode required, up fails, and the cluster stays up without
// it).
func reuseRealNode(ctx context.Context, dir string, s State, o upOptions) error {
	if s.RealNode != nil && s.RealNode.Name != "" {
		if o.realNode.images == "" {
			logf("%s", s.RealNode.describe())
			return nil
		}
		images, err := readImages(o.realNode.images)
		if err != nil {
			return err
		}
		if err := importImages(ctx, filepath.Join(realNodeDir(dir), "containerd", "containerd.sock"), o.realNode.images); err != nil {
			return err
		}
		s.RealNode.Images = images
		if err := reuseHTTPServiceRuntime(ctx, dir, images); err != nil {
			return err
		}
		logf("%s", s.RealNode.describe())
		return writeState(dir, s)
	}
	if o.realNode.mode == RealNodeOff {
		logf("%s", s.RealNode.describe())
		return nil
	}
	cfg, err := adminConfig(dir)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	rn, err := startRealNode(ctx, dir, s.Server, cs, o.realNode)
	if err != nil {
		return fmt.Errorf("the cluster runs, without the real node: %w", err)
	}
	if rn.Name != "" {
		if err := waitFor(ctx, "the real node Ready (kubelet)", dir, realNodeComponents, func(ctx context.Context) error {
			return realNodeReady(ctx, cs, rn)
		}); err != nil {
			_ = stopRealNode(dir, logf)
			return err
		}
		if err := reuseHTTPServiceRuntime(ctx, dir, rn.Images); err != nil {
			return err
		}
	}
	s.RealNode = rn
	logf("%s", rn.describe())
	return writeState(dir, s)
}

// reuseHTTPServiceRuntime installs the real node's ClusterServingRuntime on the running
// cluster in dir with its images as just imported (applyHTTPServiceRuntime).
func reuseHTTPServiceRuntime(ctx context.Context, dir string, images map[string]string) error {
	cfg, err := adminConfig(dir)
	if err != nil {
		return err
	}
	ap, err := newApplier(cfg)
	if err != nil {
		return err
	}
	return applyHTTPServiceRuntime(ctx, ap, images)
}

// nodeDown stops the real node of the cluster in dir, restores the host, and records the node
// absent; the control plane and KWOK keep running, and up adds the node again.
func nodeDown(dir string) error {
	if err := stopRealNode(dir, logf); err != nil {
		return err
	}
	s, err := readState(dir)
	if err != nil {
		return nil // no cluster recorded: nothing more to say
	}
	s.RealNode = &RealNodeState{Absent: "stopped by localcluster node-down (make cluster-up adds it again)"}
	return writeState(dir, s)
}

// proxyHealthy tells whether kube-proxy at healthz answers 200 (its rules are in sync).
func proxyHealthy(ctx context.Context, healthz string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("kube-proxy's healthz: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kube-proxy's healthz: %s", resp.Status)
	}
	return nil
}
