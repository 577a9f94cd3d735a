// Package cluster brings the local cluster up and down: the processes of the control plane,
// KWOK and the volume provisioner, detached, with pid files and logs in the state directory.
package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubernetesVersion is the version of k8s.io/kubernetes this binary is built from.
const KubernetesVersion = "v1.33.4"

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "localcluster: "+format+"\n", args...)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Main runs a cluster command and returns the exit code.
func Main(name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dir := fs.String("dir", os.Getenv("METALLO_CLUSTER_DIR"), "state directory (METALLO_CLUSTER_DIR)")
	var o upOptions
	if name == "up" {
		exe, _ := os.Executable()
		fs.StringVar(&o.binDir, "bin-dir", filepath.Dir(exe), "directory holding kwok and provisioner")
		fs.StringVar(&o.kwokStages, "kwok-stages", "", "KWOK Stages file")
		fs.StringVar(&o.kserveModule, "kserve-module", "github.com/kserve/kserve@v0.16.0", "the kserve module whose CRDs, ConfigMap, RBAC, webhooks and runtime are installed")
		fs.StringVar(&o.manifests, "manifests", "", "kustomization directory applied after start, skipped when absent (deploy/cluster)")
		nodes, _ := strconv.Atoi(envOr("METALLO_CLUSTER_NODES", "2"))
		fs.IntVar(&o.nodes.count, "nodes", nodes, "number of fake Nodes (METALLO_CLUSTER_NODES)")
		fs.StringVar(&o.nodes.cpu, "node-cpu", envOr("METALLO_CLUSTER_NODE_CPU", "32"), "cpu of each Node (METALLO_CLUSTER_NODE_CPU)")
		fs.StringVar(&o.nodes.memory, "node-memory", envOr("METALLO_CLUSTER_NODE_MEMORY", "256Gi"), "memory of each Node (METALLO_CLUSTER_NODE_MEMORY)")
		fs.StringVar(&o.nodes.pods, "node-pods", envOr("METALLO_CLUSTER_NODE_PODS", "110"), "pods of each Node (METALLO_CLUSTER_NODE_PODS)")
		fs.StringVar(&o.nodes.gpus, "node-gpus", envOr("METALLO_CLUSTER_NODE_GPUS", "8"), "nvidia.com/gpu of each Node, 0 for none (METALLO_CLUSTER_NODE_GPUS)")
		fs.StringVar(&o.nodes.disk, "node-ephemeral-storage", envOr("METALLO_CLUSTER_NODE_EPHEMERAL_STORAGE", "1Ti"), "ephemeral-storage of each Node")
		fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for the cluster to become ready")
		fs.BoolVar(&o.stopWhenUnused, "stop-when-unused", false, "stop the cluster once no test binary holds a lease on it (used by kubetest)")
		fs.StringVar(&o.realNode.mode, "real-node", envOr("METALLO_CLUSTER_REAL_NODE", RealNodeRequired), "the machine's real node: required, if-free or off (METALLO_CLUSTER_REAL_NODE)")
		fs.StringVar(&o.realNode.images, "images", "", "image manifest of deploy/images, imported into the real node")
		fs.StringVar(&o.realNode.subnet, "pod-subnet", envOr("METALLO_CLUSTER_POD_SUBNET", defaultPodSubnet), "the real node's pod network (METALLO_CLUSTER_POD_SUBNET)")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		logf("no state directory: pass --dir or set METALLO_CLUSTER_DIR")
		return 2
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		logf("%v", err)
		return 2
	}
	o.dir = abs
	o.realNode.binDir = o.binDir
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		logf("state directory: %v", err)
		return 1
	}

	switch name {
	case "up":
		unlock, err := lock(o.dir)
		if err != nil {
			logf("%v", err)
			return 1
		}
		defer unlock()
		if err := up(o); err != nil {
			logf("cannot start the local cluster: %v", err)
			logf("logs: %s", filepath.Join(o.dir, "logs"))
			return 1
		}
		return 0
	case "down":
		unlock, err := lock(o.dir)
		if err != nil {
			logf("%v", err)
			return 1
		}
		defer unlock()
		if err := down(o.dir); err != nil {
			logf("%v", err)
			return 1
		}
		return 0
	case "node-down":
		unlock, err := lock(o.dir)
		if err != nil {
			logf("%v", err)
			return 1
		}
		defer unlock()
		if err := nodeDown(o.dir); err != nil {
			logf("%v", err)
			return 1
		}
		return 0
	case "status":
		s, err := healthy(context.Background(), o.dir)
		if err != nil {
			fmt.Printf("down: %v\n", err)
			return 1
		}
		fmt.Printf("up: %s, kubeconfig %s, audit log %s, nodes %s, %s\n", s.Server, s.Kubeconfig, s.AuditLog, strings.Join(s.Nodes, " "), s.RealNode.describe())
		return 0
	case "reap":
		return reap(o.dir)
	}
	return 2
}

// lock takes the state directory's lock, so that concurrent up and down calls (several test
// binaries, make) run one after another.
func lock(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

type upOptions struct {
	dir, binDir, kwokStages, kserveModule, manifests string
	nodes                                            nodeSpec
	timeout                                          time.Duration
	stopWhenUnused                                   bool
	realNode                                         realNodeOptions
}

// ownerMarker exists while the cluster was started for test binaries and is to be stopped by the
// reaper once none of them holds a lease any more.
func ownerMarker(dir string) string { return filepath.Join(dir, "run", "stop-when-unused") }

// adminConfig is the administrator's rest.Config from the state directory.
func adminConfig(dir string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// healthy reports the state of a running cluster, or why it is not up and healthy.
func healthy(ctx context.Context, dir string) (State, error) {
	s, err := readState(dir)
	if err != nil {
		return s, fmt.Errorf("no running cluster recorded in %s", dir)
	}
	for _, c := range components {
		if !componentAlive(dir, c) {
			return s, fmt.Errorf("%s is not running", c)
		}
	}
	cfg, err := adminConfig(dir)
	if err != nil {
		return s, err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return s, err
	}
	if err := readyz(ctx, cs); err != nil {
		return s, err
	}
	// The Leases first: a stale one is the cause of a Node that is not Ready, and says so.
	if err := nodeLeasesFresh(ctx, cs, s.Nodes, time.Now()); err != nil {
		return s, err
	}
	if err := nodesReady(ctx, cs, s.Nodes); err != nil {
		return s, err
	}
	if s.RealNode != nil && s.RealNode.Name != "" {
		if err := realNodeAlive(dir); err != nil {
			return s, err
		}
		if err := realNodeReady(ctx, cs, s.RealNode); err != nil {
			return s, err
		}
	}
	if s.KServeHealth == "" {
		return s, errors.New("started without KServe's controller")
	}
	if err := kserveReady(ctx, s.KServeHealth); err != nil {
		return s, fmt.Errorf("KServe's controller: %w", err)
	}
	return s, nil
}

func readyz(ctx context.Context, cs kubernetes.Interface) error {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("/readyz: %v %s", err, body)
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("/readyz: %s", body)
	}
	return nil
}

func nodesReady(ctx context.Context, cs kubernetes.Interface, names []string) error {
	for _, n := range names {
		node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready", n)
		}
	}
	return nil
}

// nodeLeaseDuration is the duration KWOK writes on its fake Nodes' Leases in kube-node-lease
// (--node-lease-duration-seconds, the kubelet's default); KWOK renews each Lease every quarter of
// it (README.md, "Fake Nodes and their Leases").
const nodeLeaseDuration = 40 * time.Second

// nodeLeasesFresh checks that each named Node has a Lease in kube-node-lease renewed within its
// leaseDurationSeconds of now. Its error names the first Node whose Lease is missing, incomplete
// or older than its duration: the node lifecycle controller takes such a Node for unreachable
// once its grace period passes, and marks every Pod on it not Ready.
func nodeLeasesFresh(ctx context.Context, cs kubernetes.Interface, names []string, now time.Time) error {
	for _, n := range names {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s has no Lease %s/%s: nothing renews its heartbeat", n, corev1.NamespaceNodeLease, n)
		}
		if err != nil {
			return fmt.Errorf("node %s's Lease: %w", n, err)
		}
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			return fmt.Errorf("node %s's Lease %s/%s has no renewTime or leaseDurationSeconds", n, corev1.NamespaceNodeLease, n)
		}
		dur := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		if age := now.Sub(l.Spec.RenewTime.Time); age > dur {
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = " by " + *l.Spec.HolderIdentity
			}
			return fmt.Errorf("node %s's Lease %s/%s was last renewed%s at %s, %s ago, longer than its duration %s",
				n, corev1.NamespaceNodeLease, n, holder, l.Spec.RenewTime.UTC().Format(time.RFC3339), age.Round(time.Second), dur)
		}
	}
	return nil
}

// waitFor polls check until it succeeds, the deadline passes or a watched process dies.
func waitFor(ctx context.Context, what string, dir string, watch []string, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		for _, c := range watch {
			if !componentAlive(dir, c) {
				how := "exited"
				if pid := readPid(dir, c); pid <= 0 {
					how = "has no pid file (" + pidFile(dir, c) + ")"
				} else if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(cmdline) > 0 {
					// A live process that alive does not take for ours: say what it is.
					how = fmt.Sprintf("is not recognised as this cluster's (pid %d runs %q)", pid,
						strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
				}
				for i := 0; i < 10 && exitStatus(dir, c) == ""; i++ {
					time.Sleep(100 * time.Millisecond) // its reaper records how it ended
				}
				if st := exitStatus(dir, c); st != "" {
					how = "ended (" + st + ")"
				}
				return fmt.Errorf("%s %s while waiting for %s; last lines of its log (%s):\n%s", c, how, what, logFile(dir, c), tail(dir, c, 30))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %v", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// unhealthyGrace is how long up waits for a running cluster that fails a health check to pass
// one before it restarts it (docs in deploy/localcluster/README.md).
const unhealthyGrace = 90 * time.Second

// running tells whether a cluster is recorded in dir and every control-plane component's
// process still runs.
func running(dir string) bool {
	if _, err := readState(dir); err != nil {
		return false
	}
	for _, c := range components {
		if !componentAlive(dir, c) {
			return false
		}
	}
	return true
}

// healthyOrWait returns the state of the healthy cluster in dir. A cluster whose processes all
// run but which fails a check (under load /readyz, a Node's status or KServe's health can lag
// for seconds) is checked again until it passes, a component exits or grace ends: restarting it
// on one failed check would take the API server, its port and its data from every test binary
// and user of it at once. It returns the last check's error when the cluster is not healthy.
func healthyOrWait(dir string, grace time.Duration) (State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	s, err := healthy(ctx, dir)
	if err == nil || !running(dir) {
		return s, err
	}
	logf("the running cluster failed a health check (%v): checking again for up to %s before restarting it", err, grace)
	for {
		select {
		case <-ctx.Done():
			return s, err
		case <-time.After(time.Second):
		}
		if s, err = healthy(ctx, dir); err == nil {
			logf("the running cluster is healthy again")
			return s, nil
		}
		if !running(dir) {
			return s, err
		}
	}
}

func up(o upOptions) error {
	began := time.Now()
	step := func(format string, args ...any) {
		logf("[%5.1fs] "+format, append([]any{time.Since(began).Seconds()}, args...)...)
	}
	dir := o.dir
	s, err := healthyOrWait(dir, unhealthyGrace)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err == nil && s.RealNode == nil && o.realNode.mode != RealNodeOff {
		err = errors.New("it was started by a localcluster without the real node")
	}
	if err == nil {
		if !o.stopWhenUnused {
			// Adopted by whoever asked without --stop-when-unused (make cluster-up): the
			// reaper of a test-started cluster then leaves it running.
			_ = os.Remove(ownerMarker(dir))
		}
		logf("already up (reused): %s, kubeconfig %s", s.Server, s.Kubeconfig)
		// The manifests may have changed since the cluster started: apply them again
		// (server-side apply is idempotent), so a reused cluster never runs stale policies.
		if err := reapply(ctx, dir, o.manifests); err != nil {
			return err
		}
		return reuseRealNode(ctx, dir, s, o)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "cluster.json")); statErr == nil {
		logf("recorded cluster is not healthy (%v): restarting it", err)
	}

	if o.kwokStages == "" {
		return errors.New("--kwok-stages is required")
	}
	if _, err := o.nodes.resources(); err != nil {
		return err
	}
	if o.nodes.count < 1 {
		return fmt.Errorf("--nodes %d: at least one fake Node is needed", o.nodes.count)
	}
	for _, b := range []string{"kwok", "provisioner", kserveComponent} {
		if _, err := os.Stat(filepath.Join(o.binDir, b)); err != nil {
			return fmt.Errorf("%s binary missing in %s (build with deploy/localcluster/cluster.sh)", b, o.binDir)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	// A fresh start: stop leftovers, clear the previous run's data (leases of test binaries stay).
	if err := stopAll(dir, logf); err != nil {
		return err
	}
	for _, p := range []string{"cluster.json", "etcd", "audit", "logs", "run", "volumes", "pki", "auth", "node",
		"kubeconfig", "kubeconfig-controller-manager", "kubeconfig-scheduler", "kubeconfig-kwok", "kubeconfig-provisioner",
		"kserve"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	if o.realNode.mode == RealNodeRequired {
		// Say at once, before the control plane starts, that the node is another cluster's.
		if err := realNodeFree(); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	liveLeases(filepath.Join(dir, "leases"), dir) // drops the leases of test binaries that ended
	for _, p := range []string{"etcd", "audit", "logs", "run", "volumes", "leases"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			return err
		}
	}
	started := false
	var background sync.WaitGroup // KServe's installation, which starts its controller
	defer func() {
		if !started {
			cancel() // ends KServe's installation before its API server goes away
			background.Wait()
			_ = stopAll(dir, func(string, ...any) {})
			_ = os.Remove(filepath.Join(dir, "cluster.json"))
		}
	}()

	ports, err := freePorts(4)
	if err != nil {
		return fmt.Errorf("free ports: %w", err)
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	server := fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	kwokAddr := fmt.Sprintf("127.0.0.1:%d", ports[3])

	// The API server advertises the real node's bridge address (the host's on the pod network):
	// the kubernetes Service's endpoint, which kube-proxy makes Pods reach (realnode.go). It
	// listens on loopback; while the real node runs, a forwarder of the node listens there.
	advertise := hostAddress(o.realNode.subnet)
	if advertise == "" {
		return fmt.Errorf("pod subnet %q (METALLO_CLUSTER_POD_SUBNET): want an IPv4 CIDR such as %s", o.realNode.subnet, defaultPodSubnet)
	}
	if err := writePKI(dir, advertise); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := writeKubeletClientPKI(dir); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := writeAuth(dir, server); err != nil {
		return fmt.Errorf("tokens and kubeconfigs: %w", err)
	}
	if err := writeAuditPolicy(dir); err != nil {
		return err
	}
	p := func(parts ...string) string { return filepath.Join(append([]string{dir}, parts...)...) }

	if err := start(dir, "etcd", self, "etcd", "--data-dir", p("etcd"), "--client-url", etcdURL, "--peer-url", etcdPeer); err != nil {
		return err
	}
	step("etcd started")
	httpc := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, "etcd", dir, []string{"etcd"}, func(ctx context.Context) error {
		resp, err := httpc.Get(etcdURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return err
	}

	auditLog := p("audit", "audit.log")
	step("etcd ready on %s", etcdURL)
	if err := start(dir, "apiserver", self, "apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address="+advertise,
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+p("pki"),
		"--tls-cert-file="+p("pki", "apiserver.crt"),
		"--tls-private-key-file="+p("pki", "apiserver.key"),
		"--client-ca-file="+p("pki", "ca.crt"),
		"--token-auth-file="+p("auth", "tokens.csv"),
		"--service-account-issuer="+saIssuer,
		"--service-account-key-file="+p("pki", "sa.pub"),
		"--service-account-signing-key-file="+p("pki", "sa.key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction,ResourceQuota,ValidatingAdmissionPolicy",
		"--allow-privileged=true",
		// The lease reconciler (the default) keeps the kubernetes Service's Endpoints and
		// EndpointSlice naming the advertised address and the secure port.
		"--endpoint-reconciler-type=lease",
		"--audit-log-path="+auditLog,
		"--audit-policy-file="+p("auth", "audit-policy.yaml"),
		"--audit-log-maxsize=0",
		"--profiling=false",
		// The real node (realnode_config.go): the API server's client certificate towards
		// kubelets and the CA of their serving certificates.
		"--kubelet-client-certificate="+p("pki", "apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p("pki", "apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+p("pki", "ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--v=1",
	); err != nil {
		return err
	}
	cfg, err := adminConfig(dir)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "the API server's /readyz", dir, []string{"etcd", "apiserver"}, func(ctx context.Context) error {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return readyz(c, cs)
	}); err != nil {
		return err
	}
	step("API server ready on %s", server)

	// KServe's CRDs are more than a megabyte: the API server takes seconds to accept and establish
	// them, so KServe is installed and started while the other components start.
	ap, err := newApplier(cfg)
	if err != nil {
		return err
	}
	type kserveResult struct {
		st  kserveState
		err error
	}
	kserveDone := make(chan kserveResult, 1)
	background.Add(1)
	go func() {
		defer background.Done()
		mod, err := downloadKServe(ctx, o.kserveModule)
		if err != nil {
			kserveDone <- kserveResult{err: fmt.Errorf("KServe: %w", err)}
			return
		}
		st, err := startKServe(ctx, kserveSetup{dir: dir, binDir: o.binDir, server: server, module: mod, ap: ap, cs: cs, step: step})
		if err != nil {
			err = fmt.Errorf("KServe: %w", err)
		}
		kserveDone <- kserveResult{st, err}
	}()

	if err := start(dir, "controller-manager", self, "controller-manager",
		"--kubeconfig="+p("kubeconfig-controller-manager"),
		"--service-account-private-key-file="+p("pki", "sa.key"),
		"--root-ca-file="+p("pki", "ca.crt"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range="+serviceCIDR,
		"--controllers=*",
		// The node lifecycle controller keeps its default grace period (50 s): the
		// fake Nodes' Leases are renewed every 10 s by KWOK, the real node's by its
		// kubelet, so only a Node that really stops is taken for unreachable.
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	); err != nil {
		return err
	}
	if err := start(dir, "scheduler", self, "scheduler",
		"--kubeconfig="+p("kubeconfig-scheduler"),
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	); err != nil {
		return err
	}
	if err := start(dir, "kwok", filepath.Join(o.binDir, "kwok"),
		"--kubeconfig="+p("kubeconfig-kwok"),
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--server-address="+kwokAddr,
		"--cidr="+podCIDR,
		// A Lease per fake Node in kube-node-lease, renewed every quarter of its
		// duration, as a kubelet does. KWOK's own default is 0: no Lease at all, and
		// its default Node heartbeat then updates a Node's status only every 10 to 20
		// minutes, so the node lifecycle controller took every fake Node for
		// unreachable once per grace period (README.md, "Fake Nodes and their Leases").
		"--node-lease-duration-seconds="+strconv.Itoa(int(nodeLeaseDuration/time.Second)),
		"--config="+o.kwokStages,
	); err != nil {
		return err
	}
	if err := start(dir, "provisioner", filepath.Join(o.binDir, "provisioner"),
		"--kubeconfig="+p("kubeconfig-provisioner"),
		"--name="+provisionerName,
		"--volumes-dir="+p("volumes"),
	); err != nil {
		return err
	}

	step("controller manager, scheduler, KWOK and provisioner started")
	if err := ensureStorageClass(ctx, cs); err != nil {
		return fmt.Errorf("storage class: %w", err)
	}
	nodes, err := ensureNodes(ctx, cs, o.nodes)
	if err != nil {
		return err
	}
	ks := <-kserveDone
	if ks.err != nil {
		return ks.err
	}
	if o.manifests != "" {
		if _, err := os.Stat(o.manifests); err == nil {
			n, err := ap.applyKustomization(ctx, o.manifests)
			if err != nil {
				return err
			}
			step("applied %d objects from %s", n, o.manifests)
		} else {
			logf("no %s: nothing more to apply", o.manifests)
		}
	}

	all := []string{"etcd", "apiserver", "controller-manager", "scheduler", "kwok", "provisioner", kserveComponent}
	if err := waitFor(ctx, "fake Nodes Ready with their Leases renewed (KWOK)", dir, all, func(ctx context.Context) error {
		if err := nodeLeasesFresh(ctx, cs, nodes, time.Now()); err != nil {
			return err
		}
		return nodesReady(ctx, cs, nodes)
	}); err != nil {
		return err
	}
	step("fake Nodes Ready, their Leases renewed")
	realNode, err := startRealNode(ctx, dir, server, cs, o.realNode)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	if realNode.Name != "" {
		if err := waitFor(ctx, "the real node Ready (kubelet, kube-proxy)", dir, append(all, realNodeComponents...), func(ctx context.Context) error {
			return realNodeReady(ctx, cs, realNode)
		}); err != nil {
			return err
		}
		step("real node %s Ready (kubelet, containerd and kube-proxy; pod network %s on %s, the API server on %s)", realNode.Name, realNode.Subnet, realNode.Bridge, realNode.APIServer)
		if err := applyHTTPServiceRuntime(ctx, ap, realNode.Images); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, "the controller manager (default ServiceAccount)", dir, all, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}

	startedBy := "make cluster-up"
	if o.stopWhenUnused {
		startedBy = "kubetest"
	}
	if err := writeState(dir, State{
		Version: KubernetesVersion, Server: server, Kubeconfig: p("kubeconfig"), AuditLog: auditLog,
		Etcd: etcdURL, KWOK: "http://" + kwokAddr, Volumes: p("volumes"), Nodes: nodes, StartedBy: startedBy, RealNode: realNode,
		KServeWebhook: ks.st.webhook, KServeHealth: ks.st.health,
	}); err != nil {
		return err
	}
	if o.stopWhenUnused {
		if err := os.WriteFile(ownerMarker(dir), nil, 0o644); err != nil {
			return err
		}
		if err := start(dir, "reaper", self, "reap", "--dir", dir); err != nil {
			return err
		}
	}
	started = true
	logf("up in %s: %s, kubeconfig %s, audit log %s, %d fake Nodes (%s), %s",
		time.Since(began).Round(100*time.Millisecond), server, p("kubeconfig"), auditLog, len(nodes), strings.Join(nodes, " "), realNode.describe())
	return nil
}

func down(dir string) error {
	_ = os.Remove(ownerMarker(dir))
	err := stopAll(dir, logf)
	_ = os.Remove(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return err
	}
	logf("down (%s)", dir)
	return nil
}

// reap stops the cluster once it was started for test binaries and none of them holds a lease
// any more (a lease is a file named by the pid of a test binary under leases/). It ends when the
// cluster is stopped or adopted by make cluster-up.
func reap(dir string) int {
	leases := filepath.Join(dir, "leases")
	for {
		time.Sleep(2 * time.Second)
		if _, err := os.Stat(ownerMarker(dir)); err != nil {
			return 0 // adopted, or already down
		}
		if liveLeases(leases, dir) > 0 {
			continue
		}
		unlock, err := lock(dir)
		if err != nil {
			logf("reaper: %v", err)
			return 1
		}
		if _, err := os.Stat(ownerMarker(dir)); err != nil {
			unlock()
			return 0
		}
		if liveLeases(leases, dir) > 0 {
			unlock()
			continue
		}
		logf("reaper: no test binary uses the cluster any more: stopping it")
		err = down(dir)
		unlock()
		if err != nil {
			logf("reaper: %v", err)
			return 1
		}
		return 0
	}
}

// liveLeases counts the leases whose process still runs, removing the others.
func liveLeases(leases, dir string) int {
	entries, err := os.ReadDir(leases)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		// The lease holds the process's start time (field 22 of /proc/PID/stat), so a recycled
		// pid does not keep the cluster up.
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid > 0 {
			want, _ := os.ReadFile(filepath.Join(leases, e.Name()))
			if got := processStart(pid); got != "" && got == strings.TrimSpace(string(want)) {
				n++
				continue
			}
		}
		_ = os.Remove(filepath.Join(leases, e.Name()))
	}
	return n
}

// processStart returns the start time of a process (field 22 of /proc/PID/stat), or "".
func processStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	// After the command come the state (field 3) and on; field 22 is f[19].
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

// reapply applies the kustomization at manifests (when it exists) to the running cluster in dir.
func reapply(ctx context.Context, dir, manifests string) error {
	if manifests == "" {
		return nil
	}
	if _, err := os.Stat(manifests); err != nil {
		return nil
	}
	cfg, err := adminConfig(dir)
	if err != nil {
		return err
	}
	ap, err := newApplier(cfg)
	if err != nil {
		return err
	}
	n, err := ap.applyKustomization(ctx, manifests)
	if err != nil {
		return err
	}
	logf("applied %d objects from %s", n, manifests)
	return nil
}
