package kube_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubebatch "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// long is generous: the Job controller backs off for up to about a minute
// after a quota-refused Pod create.
const long = 3 * time.Minute

const (
	testImage = "registry.example/metallo-batch@sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

// siteOptions shape a test Site.
type siteOptions struct {
	// noPolicy leaves out the access-policy label, so the admission
	// policies do not guard the namespace (recovery tests create objects
	// the policies would refuse outright).
	noPolicy bool
	// podAnnotations go on every batch Pod template (KWOK's run time).
	podAnnotations map[string]string
	deletionWait   time.Duration
	// image is the batch image (testImage when empty: never pulled, KWOK
	// runs nothing); scheduling the Site's node selector and tolerations
	// (the real node's, for a test whose container runs).
	image      string
	scheduling kube.Scheduling
	// realNode, when set, gives image and scheduling from the cluster
	// (kubetest's RealNode).
	realNode func(e *kubetest.Env) (string, kube.Scheduling)
	// watch runs the Runtime's watch of its Jobs (terminal states).
	watch bool
	// grants, when set, makes prepare check out repositories through the
	// workspace helper with this provider (and names the platform image
	// in the namespace's ConfigMap metallo-site, as the Site agent does).
	grants application.RepositoryGrants
	// checkoutCA is the helper's --repository-ca-configmap.
	checkoutCA string
	// fp are the batch executor's failpoints (none when nil).
	fp application.Failpoints
	// fileReads, when set, makes the batch executor (and the service
	// executors of newAppSite and newIsvcSite) answer read-file through
	// the workspace reader with this configuration (its image the batch
	// image; the namespace's ConfigMap metallo-site names it).
	fileReads *application.FileReadConfig
}

// site is a Site project namespace set up as the Site agent would, and a
// Runtime's batch executors over a real journal, acting with the Runtime's
// own service-account token (system:serviceaccount:metallo-runtime:
// runtime-k8s, ClusterRole metallo-runtime bound in the namespace).
type site struct {
	t        testing.TB
	e        *kubetest.Env
	ns       string
	project  string
	member   string
	binding  string
	policy   string
	journal  *journal.Journal
	registry *application.Registry
	renderer *kube.Renderer
	image    string
	runtime  kubernetes.Interface
	seq      int64
	// stopWatch ends the watch of the Runtime's Jobs (siteOptions.watch),
	// as a Runtime that is down.
	stopWatch func()
	// family is the family of the workload commands s builds (batch when
	// empty).
	family siteprotocol.Family
	// setup is the Site agent's part (harness.NewSetup).
	setup *harness.Setup
}

func newSite(t testing.TB, o siteOptions) *site {
	t.Helper()
	// The Site agent's part: the Project's namespace, the member and its
	// grants (the one setup of the process tests, systemtest/harness).
	project := harness.WithProject()
	if o.noPolicy {
		project = harness.WithUnguardedProject()
	}
	setup := harness.NewSetup(t, project, harness.WithMember(), harness.WithGrants(domain.ActionStart, domain.ActionRead, domain.ActionCancel))
	e := setup.Env
	if o.realNode != nil {
		o.image, o.scheduling = o.realNode(e)
	}
	s := &site{t: t, e: e, ns: e.Namespace, project: setup.Project, member: setup.Member, binding: setup.Binding, policy: setup.Policy, setup: setup}
	ctx := testContext(t)

	dir := t.TempDir()
	set, err := journal.OpenSet(filepath.Join(dir, "journals"))
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Initialise(ctx, domain.Binding{Environment: "alpha-k8s", Authority: "https://site.example", InstallationID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	_ = set.Close()
	if s.journal, err = journal.Open(ctx, filepath.Join(dir, "journals"), journal.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.journal.Close() })

	runtimeCfg := e.ServiceAccountConfig(siteagent.RuntimeNamespace, siteagent.RuntimeAccount)
	s.runtime = e.ClientFor(runtimeCfg)
	// METALLO_BENCH_KUBE_QPS raises the Runtime's client rate limit
	// (--kube-api-qps; the burst twice it) out of a benchmark's way
	// (BENCHMARKS.md).
	if qps, err := strconv.Atoi(os.Getenv("METALLO_BENCH_KUBE_QPS")); err == nil && qps > 0 {
		runtimeCfg.QPS, runtimeCfg.Burst = float32(qps), 2*qps
	}
	workloads, err := kube.New(runtimeCfg)
	if err != nil {
		t.Fatal(err)
	}
	perms, err := permissions.NewPolicy(s.policy, systemClock{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.renderer = kube.NewRenderer(nil, o.podAnnotations)
	s.renderer.Scheduling = o.scheduling
	if o.image == "" {
		o.image = testImage
	}
	s.image = o.image
	access := application.NewAccess(s.journal, workloads, perms, systemClock{})
	family := batch.New(kubebatch.New(workloads), kubebatch.NewRenderer(s.renderer), images{ref: o.image})
	jobs := application.NewExecutor(family, access, workloads, s.journal.Batch(), o.fp, application.ExecutorConfig{DeletionWait: o.deletionWait}).
		WithReads(workloads)
	if o.grants != nil {
		if err := siteagent.PlatformImage(ctx, e.Client, s.ns, o.image); err != nil {
			t.Fatal(err)
		}
		jobs.WithCheckout(o.grants, s.renderer, workloads, application.CheckoutConfig{Image: o.image, Timeout: time.Minute, Wait: 2 * time.Minute, CAConfigMap: o.checkoutCA})
	}
	if o.fileReads != nil {
		if o.grants == nil {
			if err := siteagent.PlatformImage(ctx, e.Client, s.ns, o.image); err != nil {
				t.Fatal(err)
			}
		}
		cfg := *o.fileReads
		cfg.Image = o.image
		jobs.WithFileReads(s.renderer, workloads, cfg)
	}
	if o.watch {
		w := application.NewJobWatcher(kubebatch.New(workloads), s.journal.Batch(), s.journal.Batch(), systemClock{}, testWatchEvents{t}, 0)
		wctx, cancel := context.WithCancel(context.Background())
		if err := w.Start(wctx); err != nil {
			t.Fatal(err)
		}
		s.stopWatch = func() { cancel(); w.Wait() }
		t.Cleanup(s.stopWatch) // before the journal closes
		family.WithTerminalStates(s.journal.Batch(), w, systemClock{})
	}
	if s.registry, err = application.NewRegistry(append(application.NewMemberExecutor(s.journal, nil).Registrations(), jobs.Registrations()...)...); err != nil {
		t.Fatal(err)
	}
	s.bind(1)
	return s
}

// testWatchEvents logs what the watch does.
type testWatchEvents struct{ t testing.TB }

func (e testWatchEvents) TerminalRecorded(ts domain.TerminalState) {
	e.t.Logf("watch recorded %s %s/%s: %s (%s)", ts.Kind, ts.Namespace, ts.Name, ts.State, ts.Reason)
}

func (e testWatchEvents) TerminalNotRecorded(ts domain.TerminalState, err error) {
	e.t.Logf("watch did not record %s %s/%s: %v", ts.Kind, ts.Namespace, ts.Name, err)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

type images struct{ ref string }

func (i images) BatchImage() string { return i.ref }

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return ctx
}

func (s *site) account() string { return siteprotocol.MemberAccount(s.member) }

func (s *site) memberUser() string { return kubeconfig.ServiceAccountUser(s.ns, s.account()) }

func (s *site) labelNamespace(labels map[string]string) {
	s.t.Helper()
	if err := siteagent.LabelNamespace(testContext(s.t), s.e.Client, s.ns, labels); err != nil {
		s.t.Fatal(err)
	}
}

// grant rewrites the policy file: the member may do actions in the Project.
func (s *site) grant(actions ...domain.PermissionAction) {
	s.t.Helper()
	s.setup.Grant(actions...)
}

// command builds cmd as the Runtime pulls it (canonical, digested,
// sequenced).
func (s *site) command(op siteprotocol.Operation, attempt string, payload any) *domain.Pending {
	s.t.Helper()
	s.seq++
	c := map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": s.member, "project_id": s.project}
	switch op {
	case siteprotocol.OpBindMember, siteprotocol.OpRetireMember:
	default:
		family := siteprotocol.FamilyBatch
		if s.family != "" {
			family = s.family
		}
		c["family"], c["run_id"], c["attempt_id"] = family, runOf(attempt), attempt
		c["account_ref"] = map[string]any{"binding_id": s.binding, "generation": 1}
	}
	if payload != nil {
		c["payload"] = payload
	}
	raw, _ := json.Marshal(c)
	_, canonical, err := siteprotocol.ParseAppend(raw)
	if err != nil {
		s.t.Fatalf("command %s: %v", raw, err)
	}
	digest, _, _ := siteprotocol.CommandDigest(canonical)
	stored, err := siteprotocol.EncodeStored(canonical, s.seq, digest)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd, err := siteprotocol.ParsePulled(stored)
	if err != nil {
		s.t.Fatal(err)
	}
	return &domain.Pending{Sequence: s.seq, Raw: stored, Command: cmd}
}

// runOf derives a Run ID from an Attempt ID (one Attempt per Run here).
func runOf(attempt string) string { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(attempt)).String() }

// execute runs p through the registry and returns its result as it would
// be sent (the answer encoded and validated).
func (s *site) execute(p *domain.Pending) siteprotocol.Result {
	s.t.Helper()
	a, err := s.registry.Execute(testContext(s.t), p)
	if err != nil {
		s.t.Fatalf("%s: %v", p.Command.Operation, err)
	}
	return s.result(p, a)
}

func (s *site) result(p *domain.Pending, a domain.Answer) siteprotocol.Result {
	s.t.Helper()
	r, _, err := siteprotocol.NewResult(p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
	if err != nil {
		s.t.Fatalf("%s answer %+v: %v", p.Command.Operation, a, err)
	}
	return r
}

func (s *site) bind(generation int64) {
	s.t.Helper()
	r := s.execute(s.command(siteprotocol.OpBindMember, "", map[string]any{"party_id": s.member, "namespace": s.ns,
		"account": s.account(), "binding_id": s.binding, "revision": generation, "generation": generation}))
	want(s.t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied)
}

func (s *site) retire() {
	s.t.Helper()
	r := s.execute(s.command(siteprotocol.OpRetireMember, "", map[string]any{"binding_id": s.binding, "generation": 1}))
	want(s.t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied)
}

func (s *site) prepare(attempt string) siteprotocol.Result {
	s.t.Helper()
	return s.execute(s.command(siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 1 << 30}))
}

// startPayload is a batch start of cpu millicores for limit seconds.
func startPayload(cpu, limit int64) map[string]any {
	return map[string]any{"demand": map[string]int64{"cpu": cpu, "memory": 512 << 20}, "time_limit_seconds": limit,
		"argv": []string{"python", "train.py", "--epochs", "3"}, "env": map[string]string{"EPOCHS": "3", "SEED": "7"}}
}

func (s *site) start(attempt string, cpu, limit int64) siteprotocol.Result {
	s.t.Helper()
	return s.execute(s.command(siteprotocol.OpStart, attempt, startPayload(cpu, limit)))
}

func (s *site) simple(op siteprotocol.Operation, attempt string) siteprotocol.Result {
	s.t.Helper()
	return s.execute(s.command(op, attempt, nil))
}

func want(t testing.TB, r siteprotocol.Result, outcome siteprotocol.Outcome, reason siteprotocol.Reason) {
	t.Helper()
	if r.Outcome != outcome || r.Reason != reason {
		t.Fatalf("want %s/%s, got %s/%s: %s (detail %s)", outcome, reason, r.Outcome, r.Reason, r.Message, r.Detail)
	}
}

func detail[T any](t testing.TB, r siteprotocol.Result) T {
	t.Helper()
	d, err := siteprotocol.DecodeDetail[T](r)
	if err != nil {
		t.Fatalf("detail %s: %v", r.Detail, err)
	}
	return d
}

// jobsOf lists the Jobs labelled with the Attempt.
func (s *site) jobsOf(attempt string) []batchv1.Job {
	s.t.Helper()
	list, err := s.e.Client.BatchV1().Jobs(s.ns).List(testContext(s.t), metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
	if err != nil {
		s.t.Fatal(err)
	}
	return list.Items
}

// memberConfig acts as the member the way a Runtime does: the Runtime's
// own token impersonating the member with its user extra (a member's own
// token creates nothing in a guarded namespace).
func (s *site) memberConfig() *rest.Config {
	return kube.ImpersonateMember(s.e.ServiceAccountConfig(siteagent.RuntimeNamespace, siteagent.RuntimeAccount), s.memberUser())
}

// waitPodRunning waits for the Attempt's Pod to run on a KWOK Node.
func (s *site) waitPodRunning(attempt string) *corev1.Pod {
	s.t.Helper()
	return kubetest.Until(s.t, long, "attempt "+attempt+"'s Pod Running", s.e.Pods(""), func(p *corev1.Pod) bool {
		return p.Labels[kube.LabelAttempt] == attempt && p.Status.Phase == corev1.PodRunning
	})
}

// waitPodRan waits for the Attempt's Pod to have run on a KWOK Node
// (Running, or already Succeeded on a loaded machine).
func (s *site) waitPodRan(attempt string) *corev1.Pod {
	s.t.Helper()
	return kubetest.Until(s.t, long, "attempt "+attempt+"'s Pod running or done on a Node", s.e.Pods(""), func(p *corev1.Pod) bool {
		return p.Labels[kube.LabelAttempt] == attempt && p.Spec.NodeName != "" &&
			(p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded)
	})
}

// observeUntil observes the Attempt until cond holds for its result.
func (s *site) observeUntil(attempt, what string, cond func(siteprotocol.Result) bool) siteprotocol.Result {
	s.t.Helper()
	var last siteprotocol.Result
	err := kubetest.Poll(testContext(s.t), 250*time.Millisecond, long, func(context.Context) (bool, error) {
		last = s.simple(siteprotocol.OpObserve, attempt)
		return cond(last), nil
	})
	if err != nil {
		s.t.Fatalf("observe %s: never %s: %v; last %s/%s %s", attempt, what, err, last.Outcome, last.Reason, last.Detail)
	}
	return last
}

func state(t *testing.T, r siteprotocol.Result) siteprotocol.State {
	return detail[siteprotocol.ObserveDetail](t, r).State
}

func listByAttempt(attempt string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt}
}

// revokeMember removes the member's RoleBinding and waits until RBAC
// refuses the member's creates.
func (s *site) revokeMember() {
	s.t.Helper()
	if err := siteagent.RevokeMember(testContext(s.t), s.e.Client, s.ns, s.member); err != nil {
		s.t.Fatal(err)
	}
}

// renderJob renders the Job the Runtime renders for start command p (the
// same inputs as the batch executor) and decodes it.
func (s *site) renderJob(p *domain.Pending) (application.NativeObject, *batchv1.Job) {
	s.t.Helper()
	sp, err := siteprotocol.DecodePayload[siteprotocol.StartPayload](p.Command)
	if err != nil {
		s.t.Fatal(err)
	}
	obj, err := kubebatch.NewRenderer(s.renderer).RenderJob(application.BatchJobSpec{
		Identity: application.IdentityOf(p.Command), Namespace: s.ns, ServiceAccount: s.account(), Image: s.image,
		WorkspaceClaim: domain.AttemptObjectName(p.Command.AttemptID, domain.SuffixWorkspace),
		Demand:         sp.Demand, TimeLimitSeconds: sp.TimeLimitSeconds, Argv: sp.Argv, Env: sp.Env,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	var job batchv1.Job
	if err := json.Unmarshal(obj.Spec, &job); err != nil {
		s.t.Fatal(err)
	}
	job.Annotations = map[string]string{kube.AnnotationSpecDigest: siteprotocol.Digest(obj.Spec)}
	return obj, &job
}
