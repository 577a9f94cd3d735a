package kubetest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// hostState is what the real node may change on this machine, read here independently of the
// local cluster's own record: settings, mounts, network interfaces and namespaces, cgroups,
// fixed paths, packet filter rules and processes.
type hostState struct {
	Sysctls  map[string]string
	Mounts   []string
	Links    []string
	Netns    []string
	Cgroups  []string
	Paths    map[string]bool
	Iptables string
	Procs    []string
}

var sysctls = []string{
	"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
	"net/ipv4/conf/all/forwarding", "net/ipv6/conf/all/forwarding",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
}

var fixedPaths = []string{
	"/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/log/containers", "/var/log/pods",
	"/var/lib/cni", "/var/lib/cni/results", "/var/lib/cni/networks", "/run/containerd", "/run/containerd/s",
	"/run/containerd/fifo", "/run/containerd/runc", "/run/netns", "/etc/cni", "/opt/cni", "/opt/containerd",
	"/var/lib/containerd",
}

// snapshot reads the host; dir is the state directory whose mounts and processes count.
func snapshot(t *testing.T, dir string) hostState {
	t.Helper()
	s := hostState{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	for _, k := range sysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	var cgroupRoots []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		point := fields[4]
		if i := slices.Index(fields, "-"); i > 0 && i+1 < len(fields) && strings.HasPrefix(fields[i+1], "cgroup") {
			cgroupRoots = append(cgroupRoots, point)
		}
		for _, under := range []string{dir, "/run/netns", "/var/run/netns", "/var/lib/kubelet", "/run/containerd"} {
			if point == under || strings.HasPrefix(point, under+"/") {
				s.Mounts = append(s.Mounts, point)
			}
		}
	}
	f.Close()
	slices.Sort(s.Mounts)
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Name == "mlc0" || strings.HasPrefix(i.Name, "veth") || strings.HasPrefix(i.Name, "cni") {
			s.Links = append(s.Links, i.Name)
		}
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		s.Netns = append(s.Netns, e.Name())
	}
	for _, root := range cgroupRoots {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if e.IsDir() {
				s.Cgroups = append(s.Cgroups, filepath.Join(root, e.Name()))
			}
		}
	}
	slices.Sort(s.Cgroups)
	for _, p := range fixedPaths {
		_, err := os.Lstat(p)
		s.Paths[p] = err == nil
	}
	// Rules and user-defined chains, each with its table: comments carry times and chain lines
	// counters; a table holding neither (the nf_tables backend makes a table on first use, with
	// only its built-in chains, and keeps it) holds no rule.
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			continue
		}
		var rules []string
		table := ""
		for _, l := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(l, "*"):
				table = l[1:]
			case strings.HasPrefix(l, "-A "):
				rules = append(rules, tool+" "+table+" "+l)
			case strings.HasPrefix(l, ":"):
				if f := strings.Fields(l[1:]); len(f) >= 2 && f[1] == "-" {
					rules = append(rules, tool+" "+table+" chain "+f[0])
				}
			}
		}
		s.Iptables += strings.Join(rules, "\n") + "\n"
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), dir+"/") {
			s.Procs = append(s.Procs, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "))
		}
	}
	return s
}

func diffHost(was, now hostState) []string {
	var out []string
	for _, k := range sysctls {
		if was.Sysctls[k] != now.Sysctls[k] {
			out = append(out, fmt.Sprintf("%s: %q, was %q", k, now.Sysctls[k], was.Sysctls[k]))
		}
	}
	for _, p := range fixedPaths {
		if was.Paths[p] != now.Paths[p] {
			out = append(out, fmt.Sprintf("%s exists %v, was %v", p, now.Paths[p], was.Paths[p]))
		}
	}
	for name, pair := range map[string][2][]string{
		"mounts": {was.Mounts, now.Mounts}, "links": {was.Links, now.Links}, "network namespaces": {was.Netns, now.Netns},
		"cgroups": {was.Cgroups, now.Cgroups}, "processes": {was.Procs, now.Procs},
	} {
		if !slices.Equal(pair[0], pair[1]) {
			out = append(out, fmt.Sprintf("%s: %v, was %v", name, pair[1], pair[0]))
		}
	}
	if was.Iptables != now.Iptables {
		out = append(out, "iptables rules changed:\n"+now.Iptables+"\nwere:\n"+was.Iptables)
	}
	return out
}

// repoRoot is the repository (this package is platform/kube/kubetest).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// cluster runs deploy/localcluster/cluster.sh for the cluster in dir.
func cluster(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "deploy", "localcluster", "cluster.sh")}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "METALLO_CLUSTER_DIR="+dir, "METALLO_CLUSTER_REAL_NODE=required")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The real node leaves the host as it found it: the test takes the node from this cluster
// (node-down), reads the host, starts a second local cluster that takes the node (while it has
// it, this cluster's up fails naming the holder), runs a Pod there that serves HTTP on its Pod
// IP (so that the node mounts, makes a network namespace and a veth, cgroups, the kubelet's
// settings and kube-proxy's KUBE-* iptables chains and rules), sees these changes, stops that
// cluster with cluster.sh down (make cluster-down)
// and reads the host again: settings (ip_forward among them), mounts, network interfaces and
// namespaces, cgroups, fixed paths, packet filter rules and processes are as before. Then this
// cluster takes the node back. Real: everything; KWOK is not involved.
func TestClusterDownLeavesTheHostAsTheRealNodeFoundIt(t *testing.T) {
	e := kubetest.New(t)
	e.RealNodeExclusive()
	t.Cleanup(func() {
		// A cluster that kubetest started for test binaries stays one (its reaper stops it).
		var args []string
		if _, err := os.Stat(filepath.Join(e.Dir, "run", "stop-when-unused")); err == nil {
			args = append(args, "--stop-when-unused")
		}
		if out, err := cluster(t, e.Dir, append([]string{"up"}, args...)...); err != nil {
			t.Errorf("giving the real node back to %s: %v\n%s", e.Dir, err, out)
		}
	})
	if out, err := cluster(t, e.Dir, "node-down"); err != nil {
		t.Fatalf("node-down: %v\n%s", err, out)
	}
	// A short path: containerd's socket lies under it (a Unix socket path has at most 107 bytes).
	other, err := os.MkdirTemp("", "lc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(other) })
	before := snapshot(t, other)
	t.Cleanup(func() { _, _ = cluster(t, other, "down") })
	out, err := cluster(t, other, "up")
	if err != nil {
		t.Fatalf("a second cluster with the real node: %v\n%s", err, out)
	}
	out, err = cluster(t, e.Dir, "up")
	if err == nil || !strings.Contains(out, "held by the local cluster in "+other) {
		t.Fatalf("up of a cluster while another holds the real node: %v; want it refused naming %s:\n%s", err, other, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st struct {
		Kubeconfig string `json:"kubeconfig"`
		RealNode   struct {
			Label, Taint string
			Images       map[string]string
		} `json:"realNode"`
	}
	b, err := os.ReadFile(filepath.Join(other, "cluster.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{st.RealNode.Label: "true"},
			Tolerations:  []corev1.Toleration{{Key: st.RealNode.Taint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "web", Image: st.RealNode.Images[kubetest.ImageHTTPService],
				Env:            []corev1.EnvVar{{Name: "MESSAGE", Value: "from the real node"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				VolumeMounts:   []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
			}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		},
	}
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	for ip == "" {
		p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ip = p.Status.PodIP
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the Pod never became Ready: %+v", p.Status)
		case <-time.After(250 * time.Millisecond):
		}
	}
	resp, err := http.Get("http://" + net.JoinHostPort(ip, "8080") + "/hello")
	if err != nil {
		t.Fatalf("the Pod's IP %s from the host: %v", ip, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "from the real node") {
		t.Fatalf("the Pod answered %s", body)
	}

	during := snapshot(t, other)
	changed := diffHost(before, during)
	for _, want := range []string{"mounts", "links", "network namespaces", "cgroups", "processes", "iptables rules changed"} {
		if !slices.ContainsFunc(changed, func(d string) bool { return strings.HasPrefix(d, want+":") }) {
			t.Fatalf("with a Pod on the real node the host shows no change of %s (the check could not fail): %v", want, changed)
		}
	}
	t.Logf("while the node ran a Pod (%s answered from %s): %d differences, e.g. %s", "web", ip, len(changed), strings.Join(changed[:min(3, len(changed))], "; "))

	if out, err := cluster(t, other, "down"); err != nil {
		t.Fatalf("cluster-down: %v\n%s", err, out)
	}
	if diff := diffHost(before, snapshot(t, other)); len(diff) > 0 {
		t.Fatalf("cluster-down left the host changed:\n%s", strings.Join(diff, "\n"))
	}
}

// The real node runs the images built here (deploy/images), by digest: the platform image has a
// shell, metallo, git, git-lfs and CA certificates and runs as uid 65532; the Runtime image's
// entrypoint is metallo; the HTTP service image answers on its Pod IP from the host and through
// the API server's service proxy (a Service, its EndpointSlice, the Pod's IP). Real: the kubelet,
// containerd, runc, the pod network, the endpoint controllers, the proxy; KWOK is not involved.
func TestTheRealNodeRunsTheImagesBuiltHere(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	node := e.RealNode()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pod := func(name, image string, args ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{
				NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations(), RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: image, Args: args}},
			},
		}
	}
	web := pod("web", node.Image(t, kubetest.ImageHTTPService))
	web.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MESSAGE", Value: "hello through the proxy"}}
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
	for _, p := range []*corev1.Pod{
		pod("platform", node.Image(t, kubetest.ImagePlatform), "sh", "-c",
			`echo "uid $(id -u)"; metallo --help | head -3; git --version; git lfs version; test -s /etc/ssl/certs/ca-certificates.crt && echo "ca bundle present"`),
		pod("runtime", node.Image(t, kubetest.ImageRuntime), "--help"),
		web,
	} {
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := e.Client.CoreV1().Services(e.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, wants := range map[string][]string{
		"platform": {"uid 65532", "Usage:", "git version", "git-lfs/", "ca bundle present"},
		"runtime":  {"Usage:", "metallo"},
	} {
		p := e.WaitForPod(name, 3*time.Minute, "Succeeded", func(p *corev1.Pod) bool {
			if p.Status.Phase == corev1.PodFailed {
				t.Fatalf("pod %s failed: %+v", name, p.Status)
			}
			return p.Status.Phase == corev1.PodSucceeded
		})
		if p.Spec.NodeName != node.Name {
			t.Fatalf("pod %s ran on %s", name, p.Spec.NodeName)
		}
		log := e.PodLogs(e.Namespace, name, "main")
		for _, w := range wants {
			if !strings.Contains(log, w) {
				t.Fatalf("pod %s's log lacks %q:\n%s", name, w, log)
			}
		}
	}
	ready := e.WaitForPod("web", 3*time.Minute, "Ready", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	resp, err := http.Get("http://" + net.JoinHostPort(ready.Status.PodIP, "8080") + "/from-the-host")
	if err != nil {
		t.Fatalf("the Pod IP %s from the host: %v", ready.Status.PodIP, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"path":"/from-the-host"`) || !strings.Contains(string(body), `"host":"web"`) {
		t.Fatalf("the Pod answered %s", body)
	}
	var proxied []byte
	for {
		proxied, err = e.Client.CoreV1().Services(e.Namespace).ProxyGet("http", "web", "80", "/through-the-proxy", nil).DoRaw(ctx)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond) // until the EndpointSlice names the Pod
	}
	if err != nil || !strings.Contains(string(proxied), "hello through the proxy") {
		t.Fatalf("the service proxy: %v %s", err, proxied)
	}
}

// A Pod on the real node reaches a ClusterIP Service by its cluster IP and the API server as
// kubernetes.default's cluster IP, the way client-go's in-cluster configuration does (the
// Service's address and port, the service-account token and CA of the Pod's mount, TLS
// verified): kube-proxy's rules carry both, the first to a Pod of the same node, the second to
// the API server's address on the bridge. Real: the kubelet, containerd, kube-proxy (iptables),
// the endpoint controllers, the API server's endpoint reconciler; KWOK is not involved.
func TestAPodOnTheRealNodeReachesAClusterIPServiceAndKubernetesDefault(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	node := e.RealNode()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := node.Image(t, kubetest.ImageHTTPService)
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations(),
			Containers: []corev1.Container{{
				Name: "main", Image: image,
				Env:            []corev1.EnvVar{{Name: "MESSAGE", Value: "hello through kube-proxy"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := e.Client.CoreV1().Services(e.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("the Service has no cluster IP: %+v", svc.Spec)
	}
	api, err := e.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitForPod("web", 3*time.Minute, "Ready", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	clients := map[string][]string{
		"to-service": {"get", "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/through-kube-proxy"},
		"to-api":     {"get", "-ca", sa + "ca.crt", "-token", sa + "token", "https://" + net.JoinHostPort(api.Spec.ClusterIP, "443") + "/version"},
	}
	for name, args := range clients {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations(), RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers: []corev1.Container{{Name: "main", Image: image, Args: args}},
			},
		}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, wants := range map[string][]string{
		"to-service": {"200 OK", `"path":"/through-kube-proxy"`, `"host":"web"`, "hello through kube-proxy"},
		"to-api":     {"200 OK", `"gitVersion"`, "v1.33"},
	} {
		// OnFailure: a first attempt before kube-proxy has synced the new Service's rules is
		// retried in place; the test asserts only the attempt that succeeded.
		p := e.WaitForPod(name, 3*time.Minute, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if p.Spec.NodeName != node.Name {
			t.Fatalf("pod %s ran on %s", name, p.Spec.NodeName)
		}
		log := e.PodLogs(e.Namespace, name, "main")
		for _, w := range wants {
			if !strings.Contains(log, w) {
				t.Fatalf("pod %s's log lacks %q:\n%s", name, w, log)
			}
		}
		t.Logf("%s: %s", name, strings.SplitN(log, "\n", 2)[0])
	}
}
