package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// LaneMarker is logged by every test that uses the local cluster; the CI lane check counts it.
const LaneMarker = "metallo-lane: kubernetes"

// Annotations the local cluster's KWOK Stages read on Pods (deploy/localcluster/kwok/stages.yaml).
const (
	// AnnotationRunSeconds is how long a Pod with restartPolicy Never or OnFailure runs before it
	// finishes, in seconds ("30", "0.5"); default 1.
	AnnotationRunSeconds = "localcluster.metallo.dev/run-seconds"
	// AnnotationFail "true" makes such a Pod fail with exit code 1 instead of succeeding. A Pod
	// with restartPolicy Always (a Deployment's, a KServe predictor's) so annotated runs, Ready,
	// for AnnotationRunSeconds (default 1; keep it at least 1), then its containers terminate with
	// exit code 1 and reason Error and are not restarted: the Pod stays Running, no longer Ready
	// (a server without a readiness probe that crashes). The lost readiness changes the
	// Deployment's status, which KServe's controller watches; it then reports the predictor
	// FailedToLoad. An InferenceService's annotations reach its predictor's Pods.
	AnnotationFail = "localcluster.metallo.dev/fail"
	// AnnotationNeverReady "true" keeps a Pod Running but never Ready (a model server that never
	// becomes ready; on an InferenceService it reaches the predictor's Pods).
	AnnotationNeverReady = "localcluster.metallo.dev/never-ready"
)

const (
	// StorageClass is the default StorageClass (hostPath volumes, binding Immediate).
	StorageClass = "local-hostpath"
	// NamespaceLabel marks the namespaces kubetest creates; its value is "true".
	NamespaceLabel = "metallo.dev/kubetest"
	// TestLabel holds the (shortened) name of the test that owns a namespace.
	TestLabel = "metallo.dev/test"
	// AdminUser is the user name of the administrator's token (group system:masters).
	AdminUser = "metallo-admin"
)

// Cluster is a running local cluster.
type Cluster struct {
	// Dir is the state directory.
	Dir string
	// Server is the API server's URL (https://127.0.0.1:PORT).
	Server string
	// Kubeconfig is the administrator's kubeconfig file.
	Kubeconfig string
	// AuditLogPath is the API server's audit log (JSON lines, Metadata level).
	AuditLogPath string
	// Nodes are the names of the fake Nodes (KWOK's); the real node is RealNode's.
	Nodes []string
	// StartedHere tells whether this test binary started the cluster.
	StartedHere bool

	config   *rest.Config
	nodes    *nodeWatch // the fake Nodes' readiness, which every wait of kubetest watches
	attached time.Time  // when this binary attached: older audit log backups hold none of its events
}

// AdminConfig returns a copy of the administrator's rest.Config (group system:masters).
func (c *Cluster) AdminConfig() *rest.Config { return rest.CopyConfig(c.config) }

// AuditLog returns a reader of the cluster's audit log and of its backups rotated since this test
// binary attached (older ones hold none of its events).
func (c *Cluster) AuditLog() *AuditLog { return &AuditLog{Path: c.AuditLogPath, Since: c.attached} }

// Env is one test's view of the cluster: its own namespace and clients as the administrator.
type Env struct {
	*Cluster
	// T is the test the Env belongs to.
	T testing.TB
	// Namespace is the test's own namespace, deleted when the test ends.
	Namespace string
	// Config is the administrator's rest.Config (a copy the test may change).
	Config *rest.Config
	// Client is a clientset as the administrator.
	Client kubernetes.Interface
	// Dynamic is a dynamic client as the administrator (CRDs such as InferenceServices).
	Dynamic dynamic.Interface
}

// New attaches to the local cluster (starting it for this test binary when none runs), creates
// the test's namespace and logs LaneMarker. It fails the test, with the reason, when the cluster
// cannot be had.
func New(tb testing.TB) *Env {
	tb.Helper()
	tb.Log(LaneMarker)
	c, err := shared()
	if err != nil {
		tb.Fatalf("Kubernetes lane cannot start: %v", err)
	}
	e := &Env{Cluster: c, T: tb, Config: c.AdminConfig()}
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		tb.Fatalf("kubetest: clientset: %v", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		tb.Fatalf("kubetest: dynamic client: %v", err)
	}
	e.Namespace = e.newNamespace()
	return e
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

func (e *Env) newNamespace() string {
	tb := e.T
	tb.Helper()
	short := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(tb.Name()), "-"), "-")
	if len(short) > 40 {
		short = strings.TrimRight(short[:40], "-")
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := "kt-" + short + "-" + hex.EncodeToString(b[:])
	label := short
	if label == "" {
		label = "unnamed"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{NamespaceLabel: "true", TestLabel: label},
	}}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
	tb.Logf("kubetest: namespace %s on %s", name, e.Server)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if tb.Failed() {
			e.logNamespace(ctx, name)
		}
		if os.Getenv("METALLO_KUBETEST_KEEP") != "" {
			tb.Logf("kubetest: keeping namespace %s (METALLO_KUBETEST_KEEP)", name)
			return
		}
		// KServe's finalizer would keep the namespace Terminating: its InferenceServices go first.
		e.removeInferenceServices(ctx, name)
		bg := metav1.DeletePropagationBackground
		if err := e.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			tb.Errorf("kubetest: delete namespace %s: %v", name, err)
		}
	})
	return name
}

// logNamespace logs the Pods and Events of a failed test's namespace.
func (e *Env) logNamespace(ctx context.Context, ns string) {
	if pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			e.T.Logf("kubetest: pod %s node=%q phase=%s annotations=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Annotations)
		}
	}
	if isvcs, err := e.Dynamic.Resource(InferenceServiceResource).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, isvc := range isvcs.Items {
			status, _ := json.Marshal(isvc.Object["status"])
			e.T.Logf("kubetest: inferenceservice %s finalizers=%v annotations=%v status=%s", isvc.GetName(), isvc.GetFinalizers(), isvc.GetAnnotations(), status)
		}
	}
	if evs, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range evs.Items {
			e.T.Logf("kubetest: event %s/%s %s %s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Type, ev.Reason, ev.Message)
		}
	}
}

// ClientFor returns a clientset for cfg, failing the test on error.
func (e *Env) ClientFor(cfg *rest.Config) kubernetes.Interface {
	e.T.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.T.Fatalf("kubetest: clientset: %v", err)
	}
	return cs
}

// Impersonate returns a rest.Config that acts as user (and groups) through impersonation by the
// administrator.
func (e *Env) Impersonate(user string, groups ...string) *rest.Config {
	return kubeconfig.Impersonate(e.Config, user, groups...)
}

// ImpersonateServiceAccount returns a rest.Config that acts as the service account (the API
// server adds its groups).
func (e *Env) ImpersonateServiceAccount(namespace, name string) *rest.Config {
	return e.Impersonate(kubeconfig.ServiceAccountUser(namespace, name))
}

// ServiceAccountToken requests a token for the service account through the TokenRequest API
// (audiences empty: the API server's own), failing the test on error.
func (e *Env) ServiceAccountToken(namespace, name string, expiration time.Duration, audiences ...string) string {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secs := int64(expiration / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: audiences, ExpirationSeconds: &secs,
	}}
	out, err := e.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("kubetest: token for service account %s/%s: %v", namespace, name, err)
	}
	return out.Status.Token
}

// ServiceAccountConfig returns a rest.Config that authenticates with a fresh token of the
// service account (one hour) and nothing of the administrator's.
func (e *Env) ServiceAccountConfig(namespace, name string) *rest.Config {
	e.T.Helper()
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = e.ServiceAccountToken(namespace, name, time.Hour)
	return cfg
}

// Shared process-wide cluster: attached or started once per test binary.
var (
	once      sync.Once
	sharedC   *Cluster
	sharedErr error
)

func shared() (*Cluster, error) {
	once.Do(func() { sharedC, sharedErr = attachOrStart() })
	return sharedC, sharedErr
}

// repoRoot walks up from the working directory to the main module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/pharos-metallo/metallo\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no github.com/pharos-metallo/metallo go.mod above the working directory")
		}
		dir = parent
	}
}

// StateDir is the local cluster's state directory: METALLO_CLUSTER_DIR, else var/localcluster
// at the repository root.
func StateDir() (string, error) {
	if d := os.Getenv("METALLO_CLUSTER_DIR"); d != "" {
		return filepath.Abs(d)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "var", "localcluster"), nil
}

// state mirrors deploy/localcluster's cluster.json.
type state struct {
	Server     string         `json:"server"`
	Kubeconfig string         `json:"kubeconfig"`
	AuditLog   string         `json:"auditLog"`
	Nodes      []string       `json:"nodes"`
	RealNode   *realNodeState `json:"realNode"`
}

func readState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return s, fmt.Errorf("no cluster.json: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("cluster.json: %w", err)
	}
	return s, nil
}

func attachOrStart() (*Cluster, error) {
	dir, err := StateDir()
	if err != nil {
		return nil, err
	}
	// The lease tells a cluster started for test binaries that this one still uses it.
	if err := takeLease(dir); err != nil {
		return nil, err
	}
	c, attachErr := attach(dir)
	if attachErr == nil {
		return c, nil
	}
	root, err := repoRoot()
	if err != nil {
		return nil, fmt.Errorf("no local cluster in %s (%v), and cannot start one: %w", dir, attachErr, err)
	}
	script := filepath.Join(root, "deploy", "localcluster", "cluster.sh")
	// A cold build takes longer than go test's default -timeout: fail with the way out rather
	// than be killed mid-build.
	if timeout := testTimeout(); timeout > 0 && timeout < coldBuildBudget {
		built := exec.Command("bash", script, "built")
		built.Env = append(os.Environ(), "METALLO_CLUSTER_DIR="+dir)
		if built.Run() != nil {
			return nil, fmt.Errorf("no local cluster in %s (%v), and its binaries are not built: a cold build takes "+
				"about 35 minutes, more than this test binary's -timeout %s; run `make cluster-up` first", dir, attachErr, timeout)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), coldBuildBudget)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "up", "--stop-when-unused")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "METALLO_CLUSTER_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Fprintf(os.Stderr, "kubetest: no local cluster in %s (%v): starting one with %s up (a first build takes 20-35 minutes)\n", dir, attachErr, script)
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s up: %v\n%s", script, err, lastLines(out.String(), 40))
	}
	c, err = attach(dir)
	if err != nil {
		return nil, fmt.Errorf("started the local cluster but cannot use it: %w\n%s", err, lastLines(out.String(), 20))
	}
	c.StartedHere = true
	fmt.Fprintf(os.Stderr, "kubetest: local cluster up in %s; it stops when no test binary uses it (make cluster-up keeps one running)\n", time.Since(began).Round(time.Second))
	return c, nil
}

// coldBuildBudget is what a test binary's -timeout must allow for building the cluster.
const coldBuildBudget = 50 * time.Minute

// testTimeout is the test binary's -timeout (0: none).
func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return d
		}
	}
	return 0
}

func attach(dir string) (*Cluster, error) {
	attached := time.Now()
	s, err := readState(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := kubeconfig.Load(s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(probe)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil || strings.TrimSpace(string(body)) != "ok" {
		return nil, fmt.Errorf("API server %s not ready: %v %s", s.Server, err, body)
	}
	for _, n := range s.Nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n, err)
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return nil, fmt.Errorf("node %s is not Ready", n)
		}
	}
	watchCS, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The watch runs for the test binary's life, as the shared cluster does.
	nodes, err := watchNodes(watchCS, s.Nodes, make(chan struct{}))
	if err != nil {
		return nil, err
	}
	return &Cluster{Dir: dir, Server: s.Server, Kubeconfig: s.Kubeconfig, AuditLogPath: s.AuditLog, Nodes: s.Nodes, config: cfg, nodes: nodes, attached: attached}, nil
}

// takeLease records this process (pid and start time) under the state directory's leases/.
func takeLease(dir string) error {
	leases := filepath.Join(dir, "leases")
	if err := os.MkdirAll(leases, 0o755); err != nil {
		return err
	}
	pid := os.Getpid()
	return os.WriteFile(filepath.Join(leases, fmt.Sprint(pid)), []byte(testsetup.ProcessStart(pid)+"\n"), 0o644)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
