// Command demo is `make demo`: Metallo's main job on real input, narrated
// in the terminal. It names the binary's build (metallo version), then
// runs the central roles (provisioning,execution on fresh SQLite files
// under var/demo/) and a Site Runtime as separate
// processes of the metallo binary against the local cluster (make
// cluster-up): the Runtime authenticates to the Site API with a
// service-account token of the local cluster, checked by TokenReview; the
// Site agent's report of the alpha record of waldur-resources.json and a
// ProjectChanged make the Project's allocation ready; Beto's site binding of
// the member, the agent's account lookup and its report of the member's
// real ServiceAccount (its UID) make the member's account ready and give
// the binding the commands name; delivery appends the member's bind-member
// by itself (with the account's UID); a Run is planned;
// prepare, start and observe commands are appended and the
// Runtime performs them. The Site's repository host is Gitea over HTTPS
// with LFS (standins/githost) at the real node's bridge address, and its
// grant provider a stand-in minting real Gitea tokens (standins/grantprovider): prepare
// checks a private repository out at an exact commit (not the branch
// head, an LFS object included) into the Attempt's workspace with the
// workspace helper Pod on the real node, and the demo checks, before
// start, that the helper reported the commit, that the grant's token is
// deleted and refused at Gitea, and that the API server has neither the
// credential Secret nor the helper. The Job is created as the member (the audit log
// says so) with the Site's scheduling flags, so its Pod lands on the local
// cluster's real node (a kubelet with containerd and runc) and its
// container runs for real in the platform image: it reads the checkout
// (README.md's content and an LFS object's digest are in its log) and
// writes a file in its workspace, observe reports its exit code, and the demo shows its log
// from pods/log and the file; the member then reads the same log through
// the stream (read-logs, after the Runtime's read checks) and the file (read-file, through the
// Runtime's workspace reader; a path out of the workspace and a link to /etc refused path-rejected).
// KWOK's fake Nodes are in the cluster too but
// nothing of this Run lands there. Then an application service (the
// httpservice image) is prepared, started as the member, observed until
// healthy on the real node, asked through proxy (its answer comes back
// through the stream), cancelled and observed gone. Then an inference service of
// format sklearn on the Runtime's pinned ServingRuntime for it (the local
// cluster's metallo-sklearnserver: the sklearnserver image, scikit-learn
// speaking the KServe v1 protocol) is prepared at the exact commit, whose
// checkout holds the member's trained iris model as an LFS object,
// started — its InferenceService created as the member —, observed until
// KServe's own controller has made its predictor Deployment and Service
// (the audit log says so), the Pod is Ready on the real node with the
// arguments of the private inference argument rule and KServe reports it
// Ready (healthy), its predictor's log read through the stream
// (read-logs) and the model asked for predictions of known samples through
// the stream's proxy as the member (the classes [0,1,2]), cancelled,
// observed gone and cleaned up; a second one at the branch head, which
// lacks the model, is observed failed / ModelLoadFailed with the model
// server's exit code 3, and cleaned up. An operator then lists
// every stream with `metallo ctl` and an operator:demo key: the environment
// with its lag, the member's read-logs results with the log as its size and
// SHA-256 only, its append refused 403 and named in the audit log. Last, `metallo workspace-init`, run
// as a process, verifies a complete checkout on a second run and
// refuses a commit whose link leaves the tree; and environments.yaml is
// changed while the central process serves: an environment added at another
// Site is known to both roles once the reload is logged, and a version that
// does not validate is refused while the previous stays in use. It exits 0 only if all of that
// happened, and stops every process it started (Gitea too).
//
// With --runtime pod (METALLO_DEMO_RUNTIME=pod) the Runtime is not a process
// but a Pod of the cluster, installed as a Site installs it (runtimepod.go):
// the central roles serve TLS on the real node's bridge address with a
// certificate of the local cluster's CA, deploy/localcluster/runtime is
// applied under the demo's overlay, its install hook Job runs, and the
// Deployment's Pod authenticates with its projected token.
//
// Usage: go run ./deploy/demo --metallo bin/metallo [--runtime process|pod]
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/runtimepod"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/auditlog"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/certauthority"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

const (
	environment    = "alpha-k8s"
	site           = "alpha"
	waldurInstance = "https://waldur.example.org"
	demoLabel      = "metallo.dev/demo"
	// platformImage is the name of the platform image in the cluster's
	// image manifest (deploy/images): the Runtime's batch image.
	platformImage = "platform"
	// httpServiceImage is the small HTTP service image (deploy/images/httpservice) the demo's
	// application service runs.
	httpServiceImage = "httpservice"
)

func main() {
	var (
		bin     = flag.String("metallo", "bin/metallo", "the metallo binary")
		dir     = flag.String("dir", "var/demo", "the demo's state directory (emptied first)")
		cases   = flag.String("resources", "deploy/demo/waldur-resources.json", "Waldur resource records (the alpha record is reported)")
		cluster = flag.String("cluster-dir", envOr("METALLO_CLUSTER_DIR", "var/localcluster"), "the local cluster's state directory")
		mode    = flag.String("runtime", envOr("METALLO_DEMO_RUNTIME", runtimeProcess), "how the Runtime runs: process (a process of this machine) or pod (deploy/runtime applied to the local cluster)")
	)
	flag.Parse()
	if *mode != runtimeProcess && *mode != runtimePod {
		fmt.Fprintf(os.Stderr, "demo: --runtime (METALLO_DEMO_RUNTIME) must be %s or %s, not %q\n", runtimeProcess, runtimePod, *mode)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	d := &demo{out: os.Stdout, bin: *bin, dir: *dir, cases: *cases, clusterDir: *cluster, keys: map[string]string{}, runtimeMode: *mode, client: http.DefaultClient}
	err := d.run(ctx)
	d.stopRuntimePod()
	d.stopProcesses()
	d.git.close()
	stop()
	if err != nil {
		fmt.Fprintf(os.Stdout, "\nDEMO FAILED: %v\n(logs in %s)\n", err, *dir)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stdout, "\nDemo complete: every step above happened.")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type demo struct {
	out        io.Writer
	bin        string
	dir        string
	cases      string
	clusterDir string
	base       string
	keys       map[string]string
	admin      kubernetes.Interface
	adminCfg   *rest.Config
	audit      string
	nodes      []string
	realNode   realNode
	procs      []*process
	git        *gitHost
	step       int
	// runtimeMode is runtimeProcess or runtimePod (--runtime).
	runtimeMode string
	// client calls the Site API (it trusts caFile's CA when the Site API serves TLS).
	client *http.Client
	caFile string
	// ca is the local cluster's CA once read (bridgeListener).
	ca *certauthority.CA
	// podInstalled and podName: the Runtime installed as a Pod, and its Pod.
	podInstalled bool
	podName      string
}

// realNode is cluster.json's realNode: the node where containers run.
type realNode struct {
	Name   string            `json:"name"`
	Absent string            `json:"absent"`
	Label  string            `json:"label"`
	Taint  string            `json:"taint"`
	Subnet string            `json:"subnet"`
	HostIP string            `json:"hostIP"`
	Images map[string]string `json:"images"`
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, "    "+format+"\n", args...) }

func (d *demo) section(title string) {
	d.step++
	fmt.Fprintf(d.out, "\n%d. %s\n", d.step, title)
}

func (d *demo) run(ctx context.Context) error {
	fmt.Fprintln(d.out, "Metallo demo: a Run's batch Job created at a Site as its member, run on a real node, observed to its end.")
	if d.runtimeMode == runtimePod {
		fmt.Fprintln(d.out, "The Site Runtime runs as a Pod of the local cluster, installed from deploy/runtime (METALLO_DEMO_RUNTIME=pod).")
	} else {
		fmt.Fprintln(d.out, "The Site Runtime runs as a process of this machine (METALLO_DEMO_RUNTIME=pod runs it as a Pod of the cluster).")
	}
	if err := d.prepareDir(); err != nil {
		return err
	}
	if err := d.attachCluster(ctx); err != nil {
		return err
	}
	project, member := uuid.NewString(), uuid.NewString()
	ns, err := d.siteProject(ctx, project, member)
	if err != nil {
		return err
	}
	if err := d.repositoryHost(ctx, ns, member); err != nil {
		return err
	}
	var tokenFile, kubeconfig string
	if d.runtimeMode == runtimeProcess {
		if tokenFile, kubeconfig, err = d.runtimeCredentials(ctx); err != nil {
			return err
		}
	}
	if err := d.startCentral(ctx); err != nil {
		return err
	}
	if err := d.startRuntime(ctx, tokenFile, kubeconfig, project, member); err != nil {
		return err
	}
	if err := d.allocation(ctx, ns, project, member); err != nil {
		return err
	}
	binding, err := d.memberAccount(ctx, ns, project, member)
	if err != nil {
		return err
	}
	// What one Run of the demo asks: small enough for the real node (this
	// machine's two cores) beside what else runs there.
	demand := map[string]int64{"cpu": 500, "memory": 256 << 20}
	if err := d.plan(ctx, project, demand); err != nil {
		return err
	}
	if err := d.commands(ctx, ns, project, member, binding, demand); err != nil {
		return err
	}
	if err := d.inferenceService(ctx, ns, project, member, binding); err != nil {
		return err
	}
	if err := d.checkout(ctx); err != nil {
		return err
	}
	if err := d.operatorView(ctx); err != nil {
		return err
	}
	return d.reloadEnvironments(ctx)
}

func (d *demo) prepareDir() error {
	d.section("Fresh state under " + d.dir)
	// What the demo needs is checked before the previous run's logs are removed.
	if _, err := exec.LookPath(d.bin); err != nil {
		return fmt.Errorf("the metallo binary %s: %w (make build, or make demo)", d.bin, err)
	}
	if _, err := os.Stat(filepath.Join(d.clusterDir, "cluster.json")); err != nil {
		return fmt.Errorf("no local cluster (run make cluster-up): %w", err)
	}
	if err := d.sayVersion(); err != nil {
		return err
	}
	abs, err := filepath.Abs(d.dir)
	if err != nil {
		return err
	}
	d.dir = abs
	// A previous demo killed before it could stop its processes (the central roles, a
	// Runtime process, Gitea) left them running on what is removed next.
	for _, left := range leftoverProcesses(d.dir) {
		if err := syscall.Kill(left.pid, syscall.SIGKILL); err == nil {
			d.say("stopped pid %d left by a previous demo: %s", left.pid, left.cmd)
		}
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(d.dir, "runtime"), 0o750); err != nil {
		return err
	}
	for _, p := range []string{"site:alpha", "service:beto", "service:execution", "operator:demo"} {
		out, err := exec.Command(d.bin, "keys", "new", "--principal", p, "--append", d.path("keys.yaml")).Output()
		if err != nil {
			return fmt.Errorf("metallo keys new --principal %s: %w", p, err)
		}
		m := regexp.MustCompile(`(?m)^key: (\S+)$`).FindSubmatch(out)
		if m == nil {
			return fmt.Errorf("metallo keys new printed no key: %s", out)
		}
		d.keys[p] = string(m[1])
	}
	if err := os.WriteFile(d.path("site-alpha.key"), []byte(d.keys["site:alpha"]+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(d.path("operator.key"), []byte(d.keys["operator:demo"]+"\n"), 0o600); err != nil {
		return err
	}
	d.say("keys for site:alpha (the Site agent), service:beto (Project events), service:execution and operator:demo (metallo ctl) in keys.yaml (hashes only)")
	return nil
}

func (d *demo) path(name string) string { return filepath.Join(d.dir, name) }

// sayVersion names the binary every process of the demo runs: `metallo
// version -o json` (docs/operations.md#versions), which every role also
// serves as metallo_build_info.
func (d *demo) sayVersion() error {
	out, err := exec.Command(d.bin, "version", "--output", "json").Output()
	if err != nil {
		return fmt.Errorf("metallo version: %w", err)
	}
	var v struct {
		Version, Revision string
		Modified          *bool
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return fmt.Errorf("metallo version -o json: %w: %s", err, out)
	}
	state := "modified unknown"
	if v.Modified != nil {
		state = map[bool]string{true: "with uncommitted changes", false: "clean tree"}[*v.Modified]
	}
	d.say("the binary: metallo %s, commit %s (%s)", v.Version, v.Revision, state)
	return nil
}

type leftover struct {
	pid int
	cmd string
}

// leftoverProcesses lists the processes (other than this one) with an argument under dir:
// what a previous demo started there (its metallo serve processes name their files under it,
// Gitea its configuration).
func leftoverProcesses(dir string) []leftover {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []leftover
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		for _, a := range args {
			if strings.HasPrefix(a, dir+string(filepath.Separator)) || strings.Contains(a, "="+dir+string(filepath.Separator)) {
				cmd := strings.Join(args, " ")
				if len(cmd) > 100 {
					cmd = cmd[:100] + "…"
				}
				out = append(out, leftover{pid: pid, cmd: cmd})
				break
			}
		}
	}
	return out
}

type clusterState struct {
	Kubeconfig string    `json:"kubeconfig"`
	AuditLog   string    `json:"auditLog"`
	Nodes      []string  `json:"nodes"`
	Server     string    `json:"server"`
	RealNode   *realNode `json:"realNode"`
}

func (d *demo) attachCluster(ctx context.Context) error {
	d.section("The local cluster (make cluster-up)")
	b, err := os.ReadFile(filepath.Join(d.clusterDir, "cluster.json"))
	if err != nil {
		return fmt.Errorf("no local cluster (run make cluster-up): %w", err)
	}
	var s clusterState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("cluster.json: %w", err)
	}
	if d.adminCfg, err = kubeconfig.Load(s.Kubeconfig); err != nil {
		return err
	}
	if d.admin, err = kubernetes.NewForConfig(d.adminCfg); err != nil {
		return err
	}
	if _, err := d.admin.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("the local cluster does not answer: %w", err)
	}
	d.audit, d.nodes = s.AuditLog, s.Nodes
	switch {
	case s.RealNode == nil:
		return errors.New("the local cluster has no real node (it predates it): make cluster-down, then make cluster-up")
	case s.RealNode.Name == "":
		return fmt.Errorf("the local cluster has no real node, and the demo's Job must run for real: %s", s.RealNode.Absent)
	case s.RealNode.Images[platformImage] == "":
		return fmt.Errorf("the real node has no %s image (make image)", platformImage)
	}
	d.realNode = *s.RealNode
	d.say("a real kube-apiserver, controller-manager, scheduler and etcd at %s", s.Server)
	d.say("the real node %s: a kubelet built from the same Kubernetes sources, Debian's containerd and runc,", d.realNode.Name)
	d.say("images built here without a registry; tainted %s=true:NoSchedule, so only Pods that ask land there;", d.realNode.Taint)
	d.say("its Pods on a bridge of this machine only (%s: no uplink, no masquerade)", d.realNode.Subnet)
	d.say("beside it KWOK's fake Nodes %v, where KWOK simulates the kubelet (no container runs there);", s.Nodes)
	d.say("nothing of this Run lands on them")
	return ctx.Err()
}

// siteProject sets up the Project namespace as the Site agent would.
func (d *demo) siteProject(ctx context.Context, project, member string) (string, error) {
	d.section("The Site's project namespace, set up as the Site agent does (a stand-in: the agent is not part of Metallo)")
	old, err := d.admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: demoLabel + "=true"})
	if err != nil {
		return "", err
	}
	for _, n := range old.Items {
		if err := d.admin.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{}); err == nil {
			d.say("removing the previous demo's namespace %s", n.Name)
		}
	}
	ns := "demo-" + project[:8]
	if _, err := d.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{demoLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if err := siteagent.Project(ctx, d.admin, ns, project, true); err != nil {
		return "", err
	}
	if err := siteagent.Member(ctx, d.admin, ns, member); err != nil {
		return "", err
	}
	d.say("namespace %s labelled project-id=%s and %s=%s (the admission policies of deploy/cluster guard it)", ns, project, kube.NamespacePolicyLabel, kube.NamespacePolicyValue)
	d.say("member %s: service account %s bound to ClusterRole metallo-member (create only)", member, siteprotocol.MemberAccount(member))
	d.say("the Runtime %s bound to ClusterRole metallo-runtime in the namespace", siteagent.RuntimeUser())
	return ns, nil
}

// runtimeCredentials writes the Runtime's Site API token (audience
// metallo, checked by TokenReview) and its kubeconfig for the cluster.
func (d *demo) runtimeCredentials(ctx context.Context) (tokenFile, kubeconfig string, err error) {
	d.section("The Runtime's credentials from the TokenRequest API")
	siteToken, err := siteagent.RuntimeToken(ctx, d.admin, time.Hour, "metallo")
	if err != nil {
		return "", "", err
	}
	tokenFile = d.path("runtime/site-api.token")
	if err := os.WriteFile(tokenFile, []byte(siteToken), 0o600); err != nil {
		return "", "", err
	}
	apiToken, err := siteagent.RuntimeToken(ctx, d.admin, time.Hour)
	if err != nil {
		return "", "", err
	}
	kubeconfig = d.path("runtime/kubeconfig")
	if err := siteagent.WriteKubeconfig(kubeconfig, d.adminCfg, apiToken); err != nil {
		return "", "", err
	}
	d.say("%s: a token of %s for audience metallo (the Site API checks it with a TokenReview)", rel(tokenFile), siteagent.RuntimeUser())
	d.say("%s: the same service account for the cluster's API server", rel(kubeconfig))
	return tokenFile, kubeconfig, nil
}

func rel(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil {
			return r
		}
	}
	return p
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (d *demo) start(name string, args ...string) (*process, error) {
	log, err := os.Create(d.path(name + ".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(d.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	d.procs = append(d.procs, p)
	return p, nil
}

// stopProcesses ends every process the demo started, by its own pid:
// SIGTERM, then SIGKILL after 15 seconds.
func (d *demo) stopProcesses() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	d.procs = nil
}

func (d *demo) startCentral(ctx context.Context) error {
	d.section("provisioning,execution on SQLite (one process), the Runtime's environment authenticated by TokenReview")
	listen, tlsArgs, err := d.siteAPIListen()
	if err != nil {
		return err
	}
	cs, err := readClusterKubeconfig(d.clusterDir)
	if err != nil {
		return err
	}
	envs := fmt.Sprintf(`environments:
  - id: %s
    site: %s
    authority: %s
    auth:
      tokenreview:
        kubeconfig: %s
        username: %s
        audience: metallo
`, environment, site, d.base, cs, siteagent.RuntimeUser())
	if err := os.WriteFile(d.path("environments.yaml"), []byte(envs), 0o600); err != nil {
		return err
	}
	p, err := d.start("central", append([]string{"serve", "--role", "provisioning,execution", "--listen", listen,
		"--admin-listen", "", "--keys-file", d.path("keys.yaml"), "--environments-file", d.path("environments.yaml"),
		"--provisioning-database-url", "sqlite:" + d.path("provisioning.sqlite"), "--execution-database-url", "sqlite:" + d.path("execution.sqlite"),
		"--migrate", "--waldur-instance", waldurInstance, "--resource-owner", "in-process", "--log-format", "json"}, tlsArgs...)...)
	if err != nil {
		return err
	}
	if err := d.waitHTTP(ctx, p, d.base+"/readyz"); err != nil {
		return err
	}
	d.say("metallo serve --role provisioning,execution at %s (pid %d; log %s)", d.base, p.cmd.Process.Pid, rel(d.path("central.log")))
	if len(tlsArgs) > 0 {
		d.say("over TLS on the real node's bridge address, where its Pods reach it: certificate %s issued by the local cluster's CA %s", rel(d.path("site-api.crt")), rel(d.caFile))
	}
	d.say("databases %s and %s; environment %s at Site %s trusts %s by TokenReview", rel(d.path("provisioning.sqlite")), rel(d.path("execution.sqlite")), environment, site, siteagent.RuntimeUser())
	d.say("both roles read each environment's Site from the one %s, re-read when it changes", rel(d.path("environments.yaml")))
	return nil
}

func readClusterKubeconfig(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return "", err
	}
	var s clusterState
	if err := json.Unmarshal(b, &s); err != nil {
		return "", err
	}
	return filepath.Abs(s.Kubeconfig)
}

func (d *demo) waitHTTP(ctx context.Context, p *process, url string) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := d.client.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s answered; see %s", p.name, url, d.path(p.name+".log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within 90 s; see %s", p.name, url, d.path(p.name+".log"))
		}
	}
}

func (d *demo) startRuntime(ctx context.Context, tokenFile, kubeconfig, project, member string) error {
	grants, err := json.Marshal([]permissions.Grant{{Member: member, Project: project,
		Actions: []domain.PermissionAction{domain.ActionStart, domain.ActionRead, domain.ActionCancel}}})
	if err != nil {
		return err
	}
	if d.runtimeMode == runtimePod {
		return d.startRuntimePod(ctx, grants)
	}
	d.section("The Site Runtime: install, check (TokenReview), serve")
	// A Runtime Pod of a killed pod-mode demo would pull from this environment too.
	if _, err := d.admin.AppsV1().Deployments(siteagent.RuntimeNamespace).Get(ctx, runtimepod.Deployment, metav1.GetOptions{}); err == nil {
		if err := d.removeRuntimePod(ctx); err != nil {
			return err
		}
		d.say("removed the Runtime Pod a previous pod-mode demo left in %s", siteagent.RuntimeNamespace)
	}
	journals, record := d.path("runtime/journals"), "file:"+d.path("runtime/installation.json")
	out, err := exec.CommandContext(ctx, d.bin, "runtime", "install", "--journal-dir", journals, "--environment", environment,
		"--authority", d.base, "--installation-record", record, "--log-level", "error").CombinedOutput()
	if err != nil {
		return fmt.Errorf("metallo runtime install: %v: %s", err, out)
	}
	d.say("metallo runtime install: %s", strings.TrimSpace(string(out)))
	out, err = exec.CommandContext(ctx, d.bin, "runtime", "check", "--environment", environment, "--authority", d.base,
		"--token-file", tokenFile, "--installation-record", record).CombinedOutput()
	if err != nil {
		return fmt.Errorf("metallo runtime check: %v: %s", err, out)
	}
	d.say("metallo runtime check (the Site API reviewed the token with the cluster): %s", strings.TrimSpace(string(out)))
	if err := os.WriteFile(d.path("runtime/permissions.yaml"), grants, 0o600); err != nil {
		return err
	}
	batchImage := d.realNode.Images[platformImage]
	provider, caConfigMap, repositoryAbout := d.repositoryGrants()
	repositoryFlags := []string{"--repository-grants", provider, "--repository-ca-configmap", caConfigMap}
	p, err := d.start("runtime", append([]string{"serve", "--role", "runtime", "--journal-dir", journals, "--environment", environment,
		"--authority", d.base, "--token-file", tokenFile, "--kubeconfig", kubeconfig, "--batch-image", batchImage,
		"--permissions", "policy:" + d.path("runtime/permissions.yaml"), "--installation-record", record,
		"--heartbeat-file", d.path("runtime/heartbeat"), "--admin-listen", "", "--pull-wait", "2s",
		"--serving-runtimes", servingRuntimes,
		"--pod-node-selector", d.realNode.Label + "=true", "--pod-tolerations", d.realNode.Taint + "=true:NoSchedule",
		"--log-format", "json"}, repositoryFlags...)...)
	if err != nil {
		return err
	}
	if err := d.waitRuntimeAlive(ctx, p); err != nil {
		return err
	}
	d.say("metallo serve --role runtime (pid %d; log %s), a separate process with its own journals in %s", p.cmd.Process.Pid, rel(d.path("runtime.log")), rel(journals))
	d.say("permissions from the policy file %s (standalone Site): the member may start, read and cancel", rel(d.path("runtime/permissions.yaml")))
	d.say("batch image %s: the platform image (metallo, a shell, git, git-lfs, CA certificates), by digest", batchImage)
	d.say("Site scheduling: every Pod it renders selects %s=true and tolerates the taint %s=true:NoSchedule", d.realNode.Label, d.realNode.Taint)
	d.say("%s", repositoryAbout)
	return nil
}

func (d *demo) waitRuntimeAlive(ctx context.Context, p *process) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := exec.CommandContext(ctx, d.bin, "runtime", "liveness", "--heartbeat-file", d.path("runtime/heartbeat")).Run(); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the Runtime exited; see %s", d.path("runtime.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Runtime never beat its heartbeat; see %s", d.path("runtime.log"))
		}
	}
}

func (d *demo) call(ctx context.Context, method, path, key string, body, out any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, raw, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return resp.StatusCode, raw, json.Unmarshal(raw, out)
	}
	return resp.StatusCode, raw, nil
}

func (d *demo) allocation(ctx context.Context, ns, project, member string) error {
	d.section("The Project's allocation at Site alpha: a ProjectChanged, then the Site agent's report")
	b, err := os.ReadFile(d.cases)
	if err != nil {
		return err
	}
	var records []map[string]any
	if err := json.Unmarshal(b, &records); err != nil {
		return fmt.Errorf("%s: %w", d.cases, err)
	}
	var alpha map[string]any
	for _, r := range records {
		if r["name"] == "alpha-gpu-ns" {
			alpha = r
		}
	}
	if alpha == nil {
		return fmt.Errorf("%s has no alpha-gpu-ns record", d.cases)
	}
	ev := map[string]any{
		"event_id": "demo-" + project, "type": "project.ProjectChanged", "occurred_at": time.Now().UTC().Format(time.RFC3339),
		"project": map[string]any{"id": project, "revision": 1, "state": "active",
			"provider_bindings": []map[string]any{{"provider": "waldur", "instance": waldurInstance, "external_id": alpha["project_uuid"]}},
			"memberships":       []map[string]any{{"party_id": member, "role": "member"}}},
	}
	if _, raw, err := d.call(ctx, http.MethodPost, "/resource-provisioning/events/beto", d.keys["service:beto"], ev, nil); err != nil {
		return err
	} else {
		d.say("ProjectChanged: canonical Project %s is Waldur Project %s, member %s (%s)", project, alpha["project_uuid"], member, strings.TrimSpace(string(raw)))
	}
	// The record's namespace is the demo's (the agent created it above).
	if md, ok := alpha["backend_metadata"].(map[string]any); ok {
		md["name"] = ns
	}
	one, _ := json.Marshal(alpha)
	if err := os.WriteFile(d.path("alpha-resource.json"), one, 0o600); err != nil {
		return err
	}
	args := []string{"provisioning", "waldur-report", "--site", site, "--resource", d.path("alpha-resource.json"),
		"--post", d.base, "--key-file", d.path("site-alpha.key")}
	if d.caFile != "" {
		// Over TLS the API's certificate is the local cluster CA's.
		args = append(args, "--provisioning-ca-file", d.caFile)
	}
	report := exec.CommandContext(ctx, d.bin, args...)
	out, err := report.CombinedOutput()
	if err != nil {
		return fmt.Errorf("metallo provisioning waldur-report: %v: %s", err, out)
	}
	d.say("metallo provisioning waldur-report --site alpha --resource <alpha-gpu-ns> --post: %s", oneLine(out))
	var mine struct {
		Allocations []struct {
			Lifecycle     string           `json:"lifecycle"`
			AppliedLimits map[string]int64 `json:"applied_limits"`
		} `json:"allocations"`
	}
	if _, _, err := d.call(ctx, http.MethodGet, "/resource-provisioning/projects/"+project+"/allocations?site="+site, d.keys["service:execution"], nil, &mine); err != nil {
		return err
	}
	if len(mine.Allocations) != 1 || mine.Allocations[0].Lifecycle != "ready" {
		return fmt.Errorf("the Project's allocation is not ready: %+v", mine.Allocations)
	}
	d.say("allocation ready, applied limits %v (cpu millicores, memory bytes, gpu devices)", mine.Allocations[0].AppliedLimits)
	// An operator's view of what does not add up (docs/resource-provisioning.md#the-inconsistencies-read): a ready
	// allocation whose limits are applied is not in it.
	var inc struct {
		Allocations []struct {
			Kinds      []string `json:"kinds"`
			Allocation struct {
				ProjectID string `json:"project_id"`
			} `json:"allocation"`
		} `json:"allocations"`
		AmbiguousResources []json.RawMessage `json:"ambiguous_resources"`
		BindingConflicts   []json.RawMessage `json:"binding_conflicts"`
	}
	if _, _, err := d.call(ctx, http.MethodGet, "/resource-provisioning/inconsistencies", d.keys["service:execution"], nil, &inc); err != nil {
		return err
	}
	for _, a := range inc.Allocations {
		if a.Allocation.ProjectID == project {
			return fmt.Errorf("the ready allocation is listed as inconsistent: %v", a.Kinds)
		}
	}
	d.say("GET /resource-provisioning/inconsistencies: %d allocations whose limits differ, are not applied or are stale, %d ambiguous resources, %d binding conflicts (this Project's allocation is not among them)",
		len(inc.Allocations), len(inc.AmbiguousResources), len(inc.BindingConflicts))
	return nil
}

// memberAccount is the member's native account: Beto's site binding of
// the member, the Site agent's lookup of its username (the binding's ID and
// generation), its account report naming the real ServiceAccount's UID, and
// Execution's read of the ready account. It returns the binding ID the
// commands' account_ref names.
func (d *demo) memberAccount(ctx context.Context, ns, project, member string) (string, error) {
	d.section("The member's native account: Beto's site binding, the agent's lookup and account report, the ready account")
	username := "demo-" + member[:8]
	ev := map[string]any{
		"event_id": "demo-site-" + member, "type": "party.PartyProviderBindingChanged", "occurred_at": time.Now().UTC().Format(time.RFC3339),
		"binding": map[string]any{"id": uuid.NewString(), "party_id": member, "revision": 1, "provider": "site", "instance": environment,
			"external_id": username, "state": "verified", "generation": 1},
	}
	if _, _, err := d.call(ctx, http.MethodPost, "/resource-provisioning/events/beto", d.keys["service:beto"], ev, nil); err != nil {
		return "", err
	}
	d.say("PartyProviderBindingChanged: member %s is Site user %s at environment %s (verified)", member, username, environment)
	b, err := os.ReadFile(d.path("alpha-resource.json"))
	if err != nil {
		return "", err
	}
	var resource struct {
		UUID        string `json:"uuid"`
		ProjectUUID string `json:"project_uuid"`
	}
	if err := json.Unmarshal(b, &resource); err != nil {
		return "", err
	}
	var lookup struct {
		State      string `json:"state"`
		BindingID  string `json:"binding_id"`
		Generation int64  `json:"generation"`
		Revision   int64  `json:"revision"`
	}
	if _, _, err := d.call(ctx, http.MethodGet, "/resource-provisioning/"+site+"/account-lookup?username="+username+"&provider_project="+resource.ProjectUUID, d.keys["site:alpha"], nil, &lookup); err != nil {
		return "", err
	}
	if lookup.State != "bound" {
		return "", fmt.Errorf("the agent's lookup of %s: %+v", username, lookup)
	}
	d.say("the agent's lookup of %s in Waldur Project %s: %s, binding %s generation %d revision %d", username, resource.ProjectUUID, lookup.State, lookup.BindingID, lookup.Generation, lookup.Revision)
	sa, err := d.admin.CoreV1().ServiceAccounts(ns).Get(ctx, siteprotocol.MemberAccount(member), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	report := map[string]any{"provider_resource_id": resource.UUID, "observed_at": time.Now().UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano),
		"accounts": []map[string]any{{"party_id": member, "account": sa.Name, "uid": string(sa.UID), "binding_id": lookup.BindingID, "generation": lookup.Generation, "state": "ready"}}}
	if _, raw, err := d.call(ctx, http.MethodPost, "/resource-provisioning/"+site+"/accounts", d.keys["site:alpha"], report, nil); err != nil {
		return "", err
	} else {
		d.say("the agent's account report of namespace %s (ServiceAccount %s, UID %s): %s", ns, sa.Name, sa.UID, oneLine(raw))
	}
	var accounts struct {
		Accounts []struct {
			State     string `json:"state"`
			UID       string `json:"uid"`
			Namespace string `json:"namespace"`
		} `json:"accounts"`
	}
	if _, _, err := d.call(ctx, http.MethodGet, "/resource-provisioning/projects/"+project+"/accounts?site="+site+"&party="+member, d.keys["service:execution"], nil, &accounts); err != nil {
		return "", err
	}
	if len(accounts.Accounts) != 1 || accounts.Accounts[0].State != "ready" || accounts.Accounts[0].UID != string(sa.UID) {
		return "", fmt.Errorf("the member's account is not ready with the ServiceAccount's UID: %+v", accounts.Accounts)
	}
	d.say("Execution reads the ready account: %s in %s, UID %s", sa.Name, accounts.Accounts[0].Namespace, accounts.Accounts[0].UID)
	return lookup.BindingID, nil
}

func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

func (d *demo) plan(ctx context.Context, project string, demand map[string]int64) error {
	d.section("Plan the Run (POST /execution/v1/plans)")
	var a struct {
		Answer string `json:"answer"`
		Reason string `json:"reason"`
		Site   string `json:"site"`
	}
	if _, _, err := d.call(ctx, http.MethodPost, "/execution/v1/plans", d.keys["service:execution"],
		map[string]any{"project": project, "environment": environment, "demand": demand}, &a); err != nil {
		return err
	}
	if a.Answer != "admissible" {
		return fmt.Errorf("the plan answered %s (%s)", a.Answer, a.Reason)
	}
	d.say("demand %v: %s at Site %s", demand, a.Answer, a.Site)
	return nil
}

// sent is an appended command and its acknowledged result.
type sent struct {
	id       string
	op       siteprotocol.Operation
	sequence int64
	result   siteprotocol.Result
}

func (d *demo) commands(ctx context.Context, ns, project, member, binding string, demand map[string]int64) error {
	d.section("Commands appended to stream " + environment + "; the Runtime pulls, performs and acknowledges each")
	run, attempt := uuid.NewString(), uuid.NewString()
	var all []sent
	doAs := func(family siteprotocol.Family, run, attempt string, op siteprotocol.Operation, payload any) (siteprotocol.Result, error) {
		c, err := d.send(ctx, family, run, attempt, member, project, binding, op, payload)
		if err != nil {
			return c.result, err
		}
		all = append(all, c)
		return c.result, nil
	}
	do := func(op siteprotocol.Operation, payload any) (siteprotocol.Result, error) {
		return doAs(siteprotocol.FamilyBatch, run, attempt, op, payload)
	}
	// The member's binding is not written by hand: delivery appends
	// bind-member once the account is ready with its UID
	// (docs/execution-ports.md#delivery-of-member-bindings).
	delivered, err := d.delivered(ctx, binding)
	if err != nil {
		return err
	}
	if r, err := d.acknowledged(ctx, delivered.CommandID); err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("bind-member", r, err)
	} else {
		all = append(all, sent{id: delivered.CommandID, op: siteprotocol.OpBindMember, sequence: delivered.Sequence, result: r})
		d.say("#%d %-11s → %s / %s: %s %s (appended by delivery; desired revision %d, applied %d)", delivered.Sequence, siteprotocol.OpBindMember,
			r.Outcome, r.Reason, r.Message, compact(r.Detail), delivered.DesiredRevision, delivered.AppliedRevision)
	}
	if err := d.preparedCheckout(ctx, ns, attempt, func() (siteprotocol.Result, error) {
		return do(siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 10 << 30, "repository": d.git.repository()})
	}); err != nil {
		return err
	}
	start, err := do(siteprotocol.OpStart, map[string]any{"demand": demand, "time_limit_seconds": 600,
		"argv": []string{"sh", "-c", checkoutScript + trainScript}, "env": map[string]string{"EPOCHS": "3"}})
	if err != nil || start.Outcome != siteprotocol.OutcomeSucceeded || len(start.NativeRefs) != 1 {
		return failed("start", start, err)
	}
	job := start.NativeRefs[0]
	final, err := observeUntil(ctx, do, "the Job did not succeed", 60, siteprotocol.StateSucceeded, siteprotocol.StateFailed)
	if err != nil {
		return err
	}
	if err := d.showJob(ctx, job, final); err != nil {
		return err
	}
	if err := d.readLogs(ctx, job, do); err != nil {
		return err
	}
	if err := d.readFile(ctx, attempt, job, do); err != nil {
		return err
	}
	if err := d.applicationService(ctx, func(attempt, run string) func(siteprotocol.Operation, any) (siteprotocol.Result, error) {
		return func(op siteprotocol.Operation, payload any) (siteprotocol.Result, error) {
			return doAs(siteprotocol.FamilyApplication, run, attempt, op, payload)
		}
	}); err != nil {
		return err
	}
	d.section("Every result acknowledged by the execution role")
	for _, s := range all {
		rec, err := d.acknowledged(ctx, s.id)
		if err != nil {
			return err
		}
		if rec.Digest != s.result.Digest {
			return fmt.Errorf("command %d: the recorded result changed", s.sequence)
		}
		d.say("#%d %-11s result %s… recorded (exact bytes, digest-checked)", s.sequence, s.op, s.result.Digest[:16])
	}
	return nil
}

func failed(op string, r siteprotocol.Result, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s answered %s / %s: %s", op, r.Outcome, r.Reason, r.Message)
}

func compact(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

// acknowledged waits until the server recorded command id's result.
func (d *demo) acknowledged(ctx context.Context, id string) (siteprotocol.Result, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var rec siteprotocol.CommandRecord
		if _, _, err := d.call(ctx, http.MethodGet, "/execution/v1/streams/"+environment+"/commands/"+id, d.keys["service:execution"], nil, &rec); err != nil {
			return siteprotocol.Result{}, err
		}
		if len(rec.Result) > 0 {
			return siteprotocol.ParseResult(rec.Result)
		}
		for _, p := range d.procs {
			select {
			case <-p.done:
				return siteprotocol.Result{}, fmt.Errorf("%s exited; see %s", p.name, d.path(p.name+".log"))
			default:
			}
		}
		if time.Now().After(deadline) {
			return siteprotocol.Result{}, fmt.Errorf("command %s was not acknowledged within 3 minutes", id)
		}
		select {
		case <-ctx.Done():
			return siteprotocol.Result{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bindingDelivery is one binding's entry of the delivery read.
type bindingDelivery struct {
	BindingID         string `json:"binding_id"`
	DesiredRevision   int64  `json:"desired_revision"`
	DeliveredRevision int64  `json:"delivered_revision"`
	CommandID         string `json:"command_id"`
	Sequence          int64  `json:"sequence"`
	AppliedRevision   int64  `json:"applied_revision"`
}

// delivered waits until delivery appended binding's desired revision and
// the Runtime applied it (GET /execution/v1/streams/{environment}/bindings).
func (d *demo) delivered(ctx context.Context, binding string) (bindingDelivery, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var read struct {
			Bindings []bindingDelivery `json:"bindings"`
		}
		if _, _, err := d.call(ctx, http.MethodGet, "/execution/v1/streams/"+environment+"/bindings", d.keys["service:execution"], nil, &read); err != nil {
			return bindingDelivery{}, err
		}
		for _, b := range read.Bindings {
			if b.BindingID == binding && b.DesiredRevision > 0 && b.AppliedRevision == b.DesiredRevision {
				return b, nil
			}
		}
		if time.Now().After(deadline) {
			return bindingDelivery{}, fmt.Errorf("binding %s was not delivered and applied within 3 minutes: %+v", binding, read.Bindings)
		}
		select {
		case <-ctx.Done():
			return bindingDelivery{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// trainScript is the demo Run's program: a stand-in for training that the
// platform image's shell runs, writing its metrics into the workspace.
const trainScript = `echo "training for $EPOCHS epochs as uid $(id -u) in $(pwd)"
for e in $(seq 1 "$EPOCHS"); do echo "epoch $e loss 0.$((10 - e))"; done > metrics.txt
echo "wrote $(wc -l < metrics.txt) lines to $(pwd)/metrics.txt"
ln -s /etc host-etc`

// showJob shows, from the API server itself, who created the Job, where
// its Pod ran and how the Job ended: the container's exit code (observe's
// and the kubelet's), its log from pods/log and the file it wrote.
func (d *demo) showJob(ctx context.Context, ref siteprotocol.NativeRef, observed siteprotocol.ObserveDetail) error {
	d.section("The Job in the real API server")
	j, err := d.admin.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if string(j.UID) != ref.UID {
		return fmt.Errorf("job %s has uid %s; the start result names %s", ref.Name, j.UID, ref.UID)
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ev, err := (&auditlog.Log{Path: d.audit}).Creation(actx, "jobs", ref.Namespace, ref.Name)
	if err != nil {
		return err
	}
	member := kubeconfig.ServiceAccountUser(ref.Namespace, j.Spec.Template.Spec.ServiceAccountName)
	if ev.Actor() != member || ev.User.Username != siteagent.RuntimeUser() {
		return fmt.Errorf("audit log: the Job was created by %q as %q; want %s impersonated by the Runtime", ev.User.Username, ev.Actor(), member)
	}
	d.say("Job %s/%s uid %s", ref.Namespace, ref.Name, j.UID)
	d.say("audit log: created by %s, authenticated as %s (the Runtime impersonating the member)", ev.Actor(), ev.User.Username)
	pods, err := d.admin.CoreV1().Pods(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID)})
	if err != nil {
		return err
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != d.realNode.Name {
		return fmt.Errorf("want one Pod on the real node %s, got %d", d.realNode.Name, len(pods.Items))
	}
	pod := pods.Items[0]
	d.say("Pod %s ran on %s, the real node: kubelet, containerd and runc ran its container (IP %s)", pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
	d.say("Pod phase %s; activeDeadlineSeconds %d on the Pod (the Run's time limit), restartPolicy %s, service account %s",
		pod.Status.Phase, deref(pod.Spec.ActiveDeadlineSeconds), pod.Spec.RestartPolicy, pod.Spec.ServiceAccountName)
	c := pod.Spec.Containers[0]
	d.say("image %s, args %q, requests = limits = cpu %s memory %s", c.Image, c.Args, c.Resources.Limits.Cpu(), c.Resources.Limits.Memory())
	complete := false
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
			d.say("Job condition Complete (%s) at %s", cond.Reason, cond.LastTransitionTime.UTC().Format(time.RFC3339))
			complete = true
		}
	}
	if !complete {
		return errors.New("the Job has no Complete condition")
	}
	var term *corev1.ContainerStateTerminated
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == kube.ContainerName {
			term = cs.State.Terminated
		}
	}
	if term == nil || observed.ExitCode == nil || *observed.ExitCode != term.ExitCode || term.ExitCode != 0 {
		return fmt.Errorf("the container's termination %+v, observe's exit_code %v: want both 0", term, observed.ExitCode)
	}
	d.say("the container exited %d at %s (observe's exit_code %d, from the kubelet's container status)", term.ExitCode,
		term.FinishedAt.UTC().Format(time.RFC3339), *observed.ExitCode)
	logs, err := d.admin.CoreV1().Pods(ref.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: kube.ContainerName}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("pods/log: %w", err)
	}
	d.say("its log (pods/log through the API server, read from the kubelet):")
	for _, line := range strings.Split(strings.TrimRight(string(logs), "\n"), "\n") {
		d.say("  | %s", line)
	}
	if !strings.Contains(string(logs), "wrote 3 lines") {
		return errors.New("the container's log does not say it wrote its metrics")
	}
	if err := d.git.readCheckout(string(logs)); err != nil {
		return err
	}
	return d.showWorkspace(ctx, ref.Namespace, pod)
}

// readLogs reads the Job's log through the command stream, as the member
// (read-logs, docs/site-runtime.md#private-reads): the Runtime checks the
// binding, a fresh execution.read answer and the Pod → Job UID chain, then
// answers the log's last bytes exactly; they equal what pods/log gives the
// administrator.
func (d *demo) readLogs(ctx context.Context, job siteprotocol.NativeRef, do func(siteprotocol.Operation, any) (siteprotocol.Result, error)) error {
	d.section("The member reads its Job's log through the stream (read-logs)")
	r, err := do(siteprotocol.OpReadLogs, map[string]any{"tail_bytes": 4096})
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("read-logs", r, err)
	}
	rd, err := siteprotocol.DecodeDetail[siteprotocol.ReadLogsDetail](r)
	if err != nil {
		return err
	}
	got, err := base64.StdEncoding.DecodeString(rd.ContentBase64)
	if err != nil {
		return err
	}
	d.say("container %s, %d bytes, truncated %v; decoded:", rd.Container, len(got), rd.Truncated)
	for _, line := range strings.Split(strings.TrimRight(string(got), "\n"), "\n") {
		d.say("  | %s", line)
	}
	pods, err := d.admin.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + job.UID})
	if err != nil || len(pods.Items) != 1 {
		return fmt.Errorf("the Job's Pod: %d Pods (%v)", len(pods.Items), err)
	}
	logs, err := d.admin.CoreV1().Pods(job.Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: kube.ContainerName}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("pods/log: %w", err)
	}
	if !bytes.Equal(got, logs) || rd.Truncated {
		return fmt.Errorf("read-logs answered %q; pods/log holds %q", got, logs)
	}
	d.say("the same bytes as pods/log gives the administrator")
	return nil
}

// readFile reads the file the Job wrote through the stream (read-file): the
// Runtime's workspace reader attempt-<id>-read, a Pod of the platform image
// created as the member with the claim mounted read-only
// (docs/site-runtime.md#private-reads), answers its exact bytes, which the
// demo compares with the volume's file; then a path that leaves the
// workspace is refused on append, and the Job's link to /etc is refused by
// the reader, which resolves links inside the workspace
// only.
func (d *demo) readFile(ctx context.Context, attempt string, job siteprotocol.NativeRef, do func(siteprotocol.Operation, any) (siteprotocol.Result, error)) error {
	d.section("The member reads a file of its workspace through the stream (read-file)")
	r, err := do(siteprotocol.OpReadFile, map[string]any{"path": "metrics.txt", "max_bytes": 4096})
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("read-file", r, err)
	}
	rd, err := siteprotocol.DecodeDetail[siteprotocol.ReadFileDetail](r)
	if err != nil {
		return err
	}
	got, err := base64.StdEncoding.DecodeString(rd.ContentBase64)
	if err != nil {
		return err
	}
	d.say("metrics.txt, %d bytes, truncated %v; decoded:", len(got), rd.Truncated)
	for _, line := range strings.Split(strings.TrimRight(string(got), "\n"), "\n") {
		d.say("  | %s", line)
	}
	want, err := d.workspaceFile(ctx, job.Namespace, job.UID, "metrics.txt")
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) || rd.Truncated {
		return fmt.Errorf("read-file answered %q; the volume holds %q", got, want)
	}
	d.say("the same bytes as the volume holds")
	reader := domain.AttemptObjectName(attempt, domain.SuffixReader)
	if _, err := d.admin.CoreV1().Pods(job.Namespace).Get(ctx, reader, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("the workspace reader %s is still there after the read (%v)", reader, err)
	}
	d.say("the reader Pod %s is gone (deleted by UID once its line was read)", reader)
	// A path with .. never reaches the Runtime: the execution role refuses
	// the append (a Runtime would refuse it path-rejected before any Pod).
	if _, err := do(siteprotocol.OpReadFile, map[string]any{"path": "../metrics.txt", "max_bytes": 4096}); err == nil ||
		!strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), siteprotocol.ProblemInvalidCommand) {
		return fmt.Errorf("read-file ../metrics.txt must be refused on append with 422 invalid-command: %v", err)
	}
	d.say("read-file ../metrics.txt → 422 %s on append: a path that leaves the workspace is never appended", siteprotocol.ProblemInvalidCommand)
	r, err = do(siteprotocol.OpReadFile, map[string]any{"path": "host-etc/passwd", "max_bytes": 4096})
	if err != nil || r.Outcome != siteprotocol.OutcomeRefused || r.Reason != siteprotocol.ReasonPathRejected {
		return failed("read-file host-etc/passwd (must be refused path-rejected)", r, err)
	}
	d.say("the Job's link host-etc -> /etc leaves the workspace: the reader resolves links inside it only, never on the host")
	return nil
}

// workspaceFile reads name from the workspace claim of the Job whose UID
// is jobUID, as the administrator on this machine.
func (d *demo) workspaceFile(ctx context.Context, namespace, jobUID, name string) ([]byte, error) {
	pods, err := d.admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + jobUID})
	if err != nil || len(pods.Items) != 1 {
		return nil, fmt.Errorf("the Job's Pod: %d Pods (%v)", len(pods.Items), err)
	}
	_, _, dir, err := d.workspaceVolume(ctx, namespace, pods.Items[0])
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, name))
}

// workspaceVolume names the workspace claim pod mounts, its volume and the
// volume's directory (a hostPath volume of the local cluster, on this
// machine like the node).
func (d *demo) workspaceVolume(ctx context.Context, namespace string, pod corev1.Pod) (claim, volume, dir string, err error) {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	pvc, err := d.admin.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", "", "", fmt.Errorf("workspace claim %q: %w", claim, err)
	}
	pv, err := d.admin.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		return "", "", "", fmt.Errorf("the workspace's volume %s: %v", pvc.Spec.VolumeName, err)
	}
	return claim, pv.Name, pv.Spec.HostPath.Path, nil
}

// observeHealthy observes the service (family for the messages) every 2 seconds until it is
// healthy; it fails on an observe that does not succeed, a failed state, or after tries
// observes.
func observeHealthy(ctx context.Context, do func(siteprotocol.Operation, any) (siteprotocol.Result, error), family string, tries int) error {
	_, err := observeUntil(ctx, do, "the "+family+" service did not become healthy", tries, siteprotocol.StateHealthy, siteprotocol.StateFailed)
	return err
}

// observeUntil observes by do every 2 seconds until the state is want and
// answers that observation; it fails, its error beginning with what, on an
// observe that does not succeed, the state stop, or after tries observes.
func observeUntil(ctx context.Context, do func(siteprotocol.Operation, any) (siteprotocol.Result, error), what string, tries int, want, stop siteprotocol.State) (siteprotocol.ObserveDetail, error) {
	for i := 0; ; i++ {
		r, err := do(siteprotocol.OpObserve, nil)
		if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
			return siteprotocol.ObserveDetail{}, failed("observe", r, err)
		}
		st, err := siteprotocol.DecodeDetail[siteprotocol.ObserveDetail](r)
		if err != nil {
			return siteprotocol.ObserveDetail{}, err
		}
		if st.State == want {
			return st, nil
		}
		if st.State == stop || i >= tries {
			return siteprotocol.ObserveDetail{}, fmt.Errorf("%s: %s", what, r.Detail)
		}
		select {
		case <-ctx.Done():
			return siteprotocol.ObserveDetail{}, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// showWorkspace prints the file the Job wrote in its workspace claim.
func (d *demo) showWorkspace(ctx context.Context, namespace string, pod corev1.Pod) error {
	claim, volume, dir, err := d.workspaceVolume(ctx, namespace, pod)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "metrics.txt")
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("the file the Job wrote: %w", err)
	}
	d.say("the file it wrote in its workspace %s (volume %s at %s):", claim, volume, rel(file))
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		d.say("  | %s", line)
	}
	return nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// applicationService is the demo's application service
// (docs/site-runtime.md#application-services-on-kubernetes): an Attempt
// of family application prepared with the local cluster's httpservice
// image (pinned by digest) on port 8080 and its readiness probe /healthz,
// started — a Deployment and a ClusterIP Service created as the member —,
// observed until healthy (the real node's kubelet runs it and probes it),
// cancelled, and observed once more: gone.
func (d *demo) applicationService(ctx context.Context, commands func(attempt, run string) func(siteprotocol.Operation, any) (siteprotocol.Result, error)) error {
	d.section("An application service: prepared, started as the member, healthy, asked through proxy, cancelled")
	image := d.realNode.Images[httpServiceImage]
	if image == "" {
		return fmt.Errorf("the real node has no %s image (make image)", httpServiceImage)
	}
	do := commands(uuid.NewString(), uuid.NewString())
	r, err := do(siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 30, "service_kind": "application", "image": image,
		"port": 8080, "readiness": map[string]any{"path": "/healthz", "period_seconds": 2}, "demand": map[string]int64{"cpu": 100, "memory": 64 << 20}})
	if err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("prepare (application)", r, err)
	}
	d.say("prepare rendered the Deployment and the Service and saved them in services.sqlite; start creates exactly them")
	start, err := do(siteprotocol.OpStart, nil)
	if err != nil || start.Outcome != siteprotocol.OutcomeSucceeded || len(start.NativeRefs) != 2 {
		return failed("start (application)", start, err)
	}
	if err := observeHealthy(ctx, do, "application", 60); err != nil {
		return err
	}
	dep, svc := start.NativeRefs[0], start.NativeRefs[1]
	d.say("Deployment %s (uid %s) and Service %s (uid %s, ClusterIP) are the member's: healthy, its Pod Ready on %s", dep.Name, dep.UID, svc.Name, svc.UID, d.realNode.Name)
	// The member asks its service through the stream (proxy): the Runtime
	// checks the Service and the Pods, then sends the request through the
	// API server's service proxy.
	pr, err := do(siteprotocol.OpProxy, map[string]any{"method": "POST", "path": "/echo", "body_base64": base64.StdEncoding.EncodeToString([]byte(`{"question":"ready?"}`)),
		"headers": map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer not-forwarded"}}})
	if err != nil || pr.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("proxy (application)", pr, err)
	}
	pd, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](pr)
	if err != nil {
		return err
	}
	answer, err := base64.StdEncoding.DecodeString(pd.BodyBase64)
	if err != nil {
		return err
	}
	if pd.Status != http.StatusCreated || !strings.Contains(string(answer), `{\"question\":\"ready?\"}`) || strings.Contains(string(answer), "not-forwarded") {
		return fmt.Errorf("the service answered %d %s", pd.Status, answer)
	}
	d.say("proxy: the service answered %d with headers %v:", pd.Status, pd.Headers)
	d.say("  | %s", strings.TrimSpace(string(answer)))
	d.say("(the member's Authorization header was dropped before the request left the Runtime)")
	if r, err := do(siteprotocol.OpCancel, nil); err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		return failed("cancel (application)", r, err)
	}
	r, err = do(siteprotocol.OpObserve, nil)
	if err != nil || r.Reason != siteprotocol.ReasonNativeMissing {
		return failed("observe after cancel (application)", r, err)
	}
	d.say("cancel deleted both by their UIDs, in the foreground, as the Runtime; observe reports them gone")
	return nil
}
