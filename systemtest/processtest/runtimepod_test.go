package processtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/runtimepod"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
	"github.com/pharos-metallo/metallo/standins/certauthority"
	"github.com/pharos-metallo/metallo/standins/siteagent"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// The Runtime installed in the local cluster from deploy/localcluster/runtime (deploy/runtime's
// base applied for real): its install Job and its Deployment's Pod run on the real node in the
// Runtime image, reach the API server as kubernetes.default through kube-proxy with their
// in-cluster configuration, and pull from the execution role served over TLS on the bridge's
// host address with a certificate of the local cluster's CA (trusted through --ca-file); the
// Site API authenticates the Pod's projected service-account token with a TokenReview. The
// permission provider is the policy file of a ConfigMap (a test double of the Site's provider,
// outside the project). These tests share the namespace metallo-runtime and its fixed names,
// so they run one after another.

const (
	runtimeNS      = siteagent.RuntimeNamespace
	runtimeName    = runtimepod.Deployment
	installJobName = runtimepod.InstallJob
	journalsClaim  = runtimepod.JournalsClaim
	recordName     = runtimepod.Record
	fieldManager   = "metallo-processtest"
)

// podRuntime is one Runtime installed in the local cluster, its Site API and its member.
type podRuntime struct {
	t       *testing.T
	e       *kubetest.Env
	node    *kubetest.RealNode
	site    *harness.Site
	applier *runtimepod.Applier
	objects []*unstructured.Unstructured
	// project, member and binding are the Attempt's owner, bound in e.Namespace.
	project, member, binding string
	runs                     map[string]string
}

// newPodRuntime starts the Site API over TLS on the bridge's host address and renders the
// Runtime's objects (nothing is applied yet): deploy/localcluster/runtime under an overlay of
// the test's own that sets the images by digest, the authority, the CA and the grants, and
// quickens the liveness probe (5 s) and the Runtime's bound (10 s) so a stopped worker is seen
// within a test. extraEnv is added to the Runtime container's environment (failpoints).
func newPodRuntime(t *testing.T) *podRuntime {
	t.Helper()
	e := kubetest.New(t)
	node := e.RealNode()
	ctx := testCtx(t)
	r := &podRuntime{t: t, e: e, node: node, project: uuid.NewString(), member: uuid.NewString(), binding: uuid.NewString(), runs: map[string]string{}}
	if err := siteagent.EnsureRuntimeIdentity(ctx, e.Client); err != nil {
		t.Fatal(err)
	}
	if err := siteagent.Project(ctx, e.Client, e.Namespace, r.project, true); err != nil {
		t.Fatal(err)
	}
	if err := siteagent.Member(ctx, e.Client, e.Namespace, r.member); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	site, err := harness.NewSite(testsetup.Binary(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	// The environment trusts the Runtime's projected token by TokenReview against this cluster.
	site.Auth = fmt.Sprintf("      tokenreview:\n        kubeconfig: %s\n        username: %s\n        audience: metallo\n",
		filepath.Join(e.Dir, "kubeconfig"), siteagent.RuntimeUser())
	ca := certauthority.LoadCA(t, filepath.Join(e.Dir, "pki", "ca.crt"), filepath.Join(e.Dir, "pki", "ca.key"))
	certFile, keyFile := filepath.Join(dir, "site-api.crt"), filepath.Join(dir, "site-api.key")
	ca.Issue(t, node.HostIP).Write(t, certFile, keyFile)
	authority, err := site.StartTLS("execution.sqlite", node.HostIP, certFile, keyFile, ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	r.site = site

	// The top overlay: what changes per cluster and per Site API process.
	base, err := filepath.Abs(filepath.Join("..", "..", "deploy", "localcluster", "runtime"))
	if err != nil {
		t.Fatal(err)
	}
	grants, _ := json.Marshal([]permissions.Grant{{Member: r.member, Project: r.project, Actions: []domain.PermissionAction{domain.ActionStart}}})
	caPEM, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	overlay := runtimepod.Overlay{Base: base, Namespace: runtimeNS, Image: node.Image(t, kubetest.ImageRuntime),
		Environment: site.Environment, Authority: authority, BatchImage: node.Image(t, kubetest.ImagePlatform),
		CAPEM: caPEM, Policy: grants,
		Literals: []string{"METALLO_PULL_WAIT=1s", "METALLO_BACKOFF_INITIAL=20ms", "METALLO_BACKOFF_MAX=500ms", "METALLO_LIVENESS_BOUND=10s"},
		Patches: `- target: {kind: Deployment, name: metallo-runtime}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/livenessProbe/initialDelaySeconds
      value: 5
    - op: replace
      path: /spec/template/spec/containers/0/livenessProbe/periodSeconds
      value: 5
`}
	if r.objects, err = overlay.Render(filepath.Join(dir, "overlay")); err != nil {
		t.Fatal(err)
	}
	if r.applier, err = runtimepod.NewApplier(e.Config, fieldManager); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.cleanUp)
	return r
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// object returns the rendered object of kind and name, converted to T.
func object[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("deploy/localcluster/runtime renders no %s %s", kind, name)
	return nil
}

// apply server-side applies the rendered objects of the given kinds, in order.
func (r *podRuntime) apply(kinds ...string) {
	r.t.Helper()
	if err := r.applier.ApplyKinds(testCtx(r.t), r.objects, kinds...); err != nil {
		r.t.Fatal(err)
	}
}

// cleanUp removes what the test created in metallo-runtime (the namespace and the service
// account stay: the cluster's other tests use them) and waits until the Pods are gone.
func (r *podRuntime) cleanUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Only the ConfigMaps these tests make (the base's, the generated CA and permissions, the
	// records); the base's Role is applied again as rendered (the fencing test widens it),
	// since deploy/policytest relies on it and its binding.
	if err := runtimepod.Remove(ctx, r.e.Client, runtimeNS, func(c string) bool {
		return c == runtimeName || strings.HasPrefix(c, recordName) || strings.HasPrefix(c, "metallo-site-api-ca") || strings.HasPrefix(c, "metallo-runtime-permissions")
	}); err != nil {
		r.t.Logf("cleanup of %s: %v", runtimeNS, err)
	}
	if err := r.applier.ApplyKinds(ctx, r.objects, "Role"); err != nil {
		r.t.Logf("cleanup of %s: %v", runtimeNS, err)
	}
}

// install runs the install Job to its end and returns its Pod's log; it fails the test when
// the Job fails.
func (r *podRuntime) install(job *batchv1.Job) string {
	r.t.Helper()
	log, err := runtimepod.Install(testCtx(r.t), r.e.Client, runtimeNS, job, 4*time.Minute)
	if err != nil {
		r.t.Fatal(err)
	}
	return log
}

// journalDir is the host directory of a journal claim (the local cluster's hostPath volume).
func (r *podRuntime) journalDir(claim string) string {
	r.t.Helper()
	ctx := testCtx(r.t)
	pvc, err := r.e.Client.CoreV1().PersistentVolumeClaims(runtimeNS).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	pv, err := r.e.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		r.t.Fatalf("the volume of claim %s: %v", claim, err)
	}
	return pv.Spec.HostPath.Path
}

// deploy applies the Deployment (with extra environment on its container) and waits for its
// one Pod, other than the Pod with UID not (the one a changed template replaces), to run on the
// real node; it returns the Pod.
func (r *podRuntime) deploy(d *appsv1.Deployment, not types.UID, env ...corev1.EnvVar) *corev1.Pod {
	r.t.Helper()
	ctx := testCtx(r.t)
	d = d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Env = append(d.Spec.Template.Spec.Containers[0].Env, env...)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		r.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	if err := r.applier.Apply(ctx, u); err != nil {
		r.t.Fatal(err)
	}
	return r.runningPod(d.Name, not)
}

// runningPod waits for the Deployment's one running Pod other than the one with UID not, on
// the real node.
func (r *podRuntime) runningPod(deployment string, not types.UID) *corev1.Pod {
	r.t.Helper()
	p, err := runtimepod.RunningPod(testCtx(r.t), r.e.Client, runtimeNS, deployment, not, 4*time.Minute)
	if err != nil {
		r.t.Fatal(err)
	}
	if p.Spec.NodeName != r.node.Name {
		r.t.Fatalf("the Runtime's Pod %s runs on %s, not the real node", p.Name, p.Spec.NodeName)
	}
	return p
}

// appendCmd appends a command of the test's member and project; workload ones carry the
// batch family, the Attempt's run and the binding.
func (r *podRuntime) appendCmd(op siteprotocol.Operation, attempt string, payload any) string {
	r.t.Helper()
	c := map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": "2026-12-02T05:00:00Z", "member_id": r.member, "project_id": r.project}
	if op == siteprotocol.OpBindMember {
		c["payload"] = map[string]any{"party_id": r.member, "namespace": r.e.Namespace, "account": siteprotocol.MemberAccount(r.member),
			"binding_id": r.binding, "revision": 1, "generation": 1}
	} else {
		if r.runs[attempt] == "" {
			r.runs[attempt] = uuid.NewString()
		}
		c["family"], c["run_id"], c["attempt_id"] = "batch", r.runs[attempt], attempt
		c["account_ref"] = map[string]any{"binding_id": r.binding, "generation": 1}
		c["payload"] = payload
	}
	raw, _ := json.Marshal(c)
	if _, err := r.site.Append(raw); err != nil {
		r.t.Fatal(err)
	}
	return c["id"].(string)
}

func prepareOf() map[string]any { return map[string]any{"workspace_size_bytes": 1 << 20} }

func startOf(mark string) map[string]any {
	return map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20}, "time_limit_seconds": 600,
		"argv": []string{"sh", "-c", "echo run of " + mark}}
}

// result waits until command id's result is recorded by the Site API and returns it.
func (r *podRuntime) result(id string, pod string) (siteprotocol.Result, []byte) {
	r.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		rec, err := r.site.Command(id)
		if err == nil && len(rec.Result) > 0 {
			res, err := siteprotocol.ParseResult(rec.Result)
			if err != nil {
				r.t.Fatal(err)
			}
			return res, rec.Result
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("command %s not acknowledged (%v); the Runtime's log:\n%s", id, err, r.podLog(pod, false))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// podLog is the Runtime container's log (previous: the container before its last restart).
func (r *podRuntime) podLog(pod string, previous bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := r.e.Client.CoreV1().Pods(runtimeNS).GetLogs(pod, &corev1.PodLogOptions{Container: "runtime", Previous: previous}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(log of %s: %v)", pod, err)
	}
	return string(b)
}

// jobsOf lists the Jobs of an Attempt in the project namespace.
func (r *podRuntime) jobsOf(attempt string) []batchv1.Job {
	r.t.Helper()
	jobs, err := r.e.Client.BatchV1().Jobs(r.e.Namespace).List(testCtx(r.t), metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
	if err != nil {
		r.t.Fatal(err)
	}
	return jobs.Items
}

// record returns the installation record ConfigMap.
func (r *podRuntime) record(name string) *corev1.ConfigMap {
	r.t.Helper()
	cm, err := r.e.Client.CoreV1().ConfigMaps(runtimeNS).Get(testCtx(r.t), name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatalf("installation record %s: %v", name, err)
	}
	return cm
}

// installed applies the base's objects but the Deployment, runs the install Job and checks
// the journals it initialised and the record it wrote; it returns the record.
func (r *podRuntime) installed() *corev1.ConfigMap {
	r.t.Helper()
	r.apply("Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "PersistentVolumeClaim")
	log := r.install(object[batchv1.Job](r.t, r.objects, "Job", installJobName))
	dir := r.journalDir(journalsClaim)
	for _, f := range []string{"delivery.sqlite", "jobs.sqlite", "services.sqlite"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			r.t.Fatalf("the install Job left no %s on the claim: %v\n%s", f, err, log)
		}
	}
	return r.record(recordName)
}

// The install Job initialises the journals on the claim and records the installation (the
// ConfigMap); run again it changes nothing (the record's UID and content, every journal file
// byte for byte); run against a claim with journals but no record it records them as they
// are. Real: the kubelet, containerd, the Runtime image, the claim on the real node, the
// in-cluster configuration through kube-proxy, RBAC of the Runtime's Role.
func TestTheInstallJobInitialisesTheJournalsOnceAndRecordsThemAsTheyAre(t *testing.T) {
	r := newPodRuntime(t)
	first := r.installed()
	if len(first.Data) == 0 {
		t.Fatalf("the installation record %s is empty", first.Name)
	}
	dir := r.journalDir(journalsClaim)
	before, err := harness.Snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	job := object[batchv1.Job](t, r.objects, "Job", installJobName)
	log := r.install(job)
	again := r.record(recordName)
	if again.UID != first.UID || again.ResourceVersion != first.ResourceVersion || !equalData(again.Data, first.Data) {
		t.Fatalf("the second install changed the record: %v → %v\n%s", first.Data, again.Data, log)
	}
	after, err := harness.Snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := harness.SnapshotDiff(before, after); d != "" {
		t.Fatalf("the second install changed the journals: %s\n%s", d, log)
	}

	// The record removed, the journals kept: install records them as they are.
	if err := r.e.Client.CoreV1().ConfigMaps(runtimeNS).Delete(testCtx(t), recordName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	log = r.install(job)
	third := r.record(recordName)
	if third.UID == first.UID {
		t.Fatalf("the record was not written again")
	}
	after, err = harness.Snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := harness.SnapshotDiff(before, after); d != "" {
		t.Fatalf("installing over journals without a record changed them: %s\n%s", d, log)
	}
	// The journals' own installation: the same identity, environment, authority and journal
	// set (installed_at is when this record was written).
	for _, k := range []string{installation.KeyInstallationID, installation.KeyEnvironment, installation.KeyAuthority, installation.KeyJournals} {
		if third.Data[k] != first.Data[k] || first.Data[k] == "" {
			t.Fatalf("the record of the existing journals has %s %q, the first %q: they were not recorded as they are\n%s", k, third.Data[k], first.Data[k], log)
		}
	}
	t.Logf("installed once, again (no change), and over kept journals without a record: %v", third.Data)
}

func equalData(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The Deployment's Pod pulls with its projected token, which the Site API checks by
// TokenReview (the environment has no other credential), acknowledges a bind, a prepare and a
// start whose Job it creates as the member through kubernetes.default, and its liveness probe
// (`metallo runtime liveness`, every 5 s here) keeps passing: no restart, no Unhealthy event.
// Then the process is killed in its Pod by a failpoint after the next Job create returned and
// before its result was saved: the container restarts in the same Pod and recovery adopts the
// Job (same UID, one Job, its result acknowledged naming it). Real: everything but the
// permission provider (a policy file).
func TestTheRuntimePodAuthenticatesByItsTokenAndAdoptsTheJobAfterItsProcessIsKilledInThePod(t *testing.T) {
	r := newPodRuntime(t)
	r.installed()
	r.apply("ConfigMap")
	dep := object[appsv1.Deployment](t, r.objects, "Deployment", runtimeName)
	if p := dep.Spec.Template.Spec.Containers[0].LivenessProbe; p == nil || p.Exec == nil || strings.Join(p.Exec.Command, " ") != "metallo runtime liveness" {
		t.Fatalf("the Runtime's liveness probe is %+v; want exec metallo runtime liveness", p)
	}
	pod := r.deploy(dep, "")
	r.appendCmd(siteprotocol.OpBindMember, "", nil)
	a := uuid.NewString()
	prep := r.appendCmd(siteprotocol.OpPrepare, a, prepareOf())
	start := r.appendCmd(siteprotocol.OpStart, a, startOf(a))
	res, _ := r.result(start, pod.Name)
	jobs := r.jobsOf(a)
	if len(jobs) != 1 || res.Outcome != siteprotocol.OutcomeSucceeded || len(res.NativeRefs) != 1 || res.NativeRefs[0].UID != string(jobs[0].UID) {
		t.Fatalf("start of %s: result %+v, Jobs %d", a, res, len(jobs))
	}
	if pr, _ := r.result(prep, pod.Name); pr.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("prepare: %+v", pr)
	}
	if who := r.e.WhoCreated("jobs", r.e.Namespace, jobs[0].Name); who.Actor() != "system:serviceaccount:"+r.e.Namespace+":"+siteprotocol.MemberAccount(r.member) {
		t.Fatalf("the Job was created by %s", who.Actor())
	}
	// The liveness probe runs every 5 s after 5 s; 20 s is three verdicts.
	time.Sleep(20 * time.Second)
	p, err := r.e.Client.CoreV1().Pods(runtimeNS).Get(testCtx(t), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Fatalf("the healthy Runtime restarted %d times:\n%s", n, r.podLog(pod.Name, true))
	}
	if ev := r.unhealthy(pod.Name); ev != "" {
		t.Fatalf("the healthy Runtime's probe failed: %s", ev)
	}

	// Attempt b prepared (its claim created) by the unarmed Runtime; then the Runtime armed to
	// be killed after its next native call, the start's Job create: a new Pod (Recreate).
	b := uuid.NewString()
	if pr, raw := r.result(r.appendCmd(siteprotocol.OpPrepare, b, prepareOf()), pod.Name); pr.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("prepare of %s: %s", b, raw)
	}
	killed := r.deploy(dep, pod.UID, corev1.EnvVar{Name: "METALLO_FAILPOINTS", Value: application.FailAfterNativeCall + "@1"})
	startB := r.appendCmd(siteprotocol.OpStart, b, startOf(b))
	res, raw := r.result(startB, killed.Name)
	// The kubelet reports the restart in the Pod's status after the
	// restarted container may already have answered: wait for it (bounded).
	var cst corev1.ContainerStatus
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		after, err := r.e.Client.CoreV1().Pods(runtimeNS).Get(testCtx(t), killed.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the killed Runtime's Pod %s is gone: %v", killed.Name, err)
		}
		if len(after.Status.ContainerStatuses) > 0 {
			cst = after.Status.ContainerStatuses[0]
		}
		if cst.RestartCount > 0 || time.Now().After(deadline) {
			break
		}
	}
	if cst.RestartCount != 1 || cst.LastTerminationState.Terminated == nil || cst.LastTerminationState.Terminated.ExitCode != 137 {
		t.Fatalf("the Runtime's container was not killed and restarted in its Pod: %+v", cst)
	}
	if prev := r.podLog(killed.Name, true); !killLine.MatchString(prev) {
		t.Fatalf("the previous container's log names no failpoint kill:\n%s", prev)
	}
	jobs = r.jobsOf(b)
	if len(jobs) != 1 {
		t.Fatalf("attempt %s has %d Jobs after the kill; want one", b, len(jobs))
	}
	if res.Outcome != siteprotocol.OutcomeSucceeded || res.Reason != siteprotocol.ReasonCreated || len(res.NativeRefs) != 1 || res.NativeRefs[0].UID != string(jobs[0].UID) {
		t.Fatalf("the acknowledged result %s does not name the one Job %s", raw, jobs[0].UID)
	}
	t.Logf("killed in Pod %s (%d restarts, exit %d); Job %s adopted, result %s", killed.Name, cst.RestartCount, cst.LastTerminationState.Terminated.ExitCode, jobs[0].UID, raw)
}

// unhealthy names an Unhealthy event (a failed probe) of the Pod, or "".
func (r *podRuntime) unhealthy(pod string) string {
	evs, err := r.e.Client.CoreV1().Events(runtimeNS).List(testCtx(r.t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Reason == "Unhealthy" {
			return ev.Message
		}
	}
	return ""
}

// appendApp appends an application command of the test's member (prepare carries the payload).
func (r *podRuntime) appendApp(op siteprotocol.Operation, attempt string, payload any) string {
	r.t.Helper()
	if r.runs[attempt] == "" {
		r.runs[attempt] = uuid.NewString()
	}
	c := map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": "2026-12-02T05:00:00Z", "member_id": r.member, "project_id": r.project,
		"family": siteprotocol.FamilyApplication, "run_id": r.runs[attempt], "attempt_id": attempt,
		"account_ref": map[string]any{"binding_id": r.binding, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	raw, _ := json.Marshal(c)
	if _, err := r.site.Append(raw); err != nil {
		r.t.Fatal(err)
	}
	return c["id"].(string)
}

// observeHealthy observes the application Attempt until the Runtime answers healthy.
func (r *podRuntime) observeHealthy(attempt, pod string) {
	r.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		res, raw := r.result(r.appendApp(siteprotocol.OpObserve, attempt, nil), pod)
		d, err := siteprotocol.DecodeDetail[siteprotocol.ObserveDetail](res)
		if err != nil {
			r.t.Fatal(err)
		}
		if d.State == siteprotocol.StateHealthy {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("application %s never observed healthy: %s", attempt, raw)
		}
		time.Sleep(time.Second)
	}
}

// uids maps every Deployment, Service, Job and PersistentVolumeClaim of the project namespace
// (by name) to its UID.
func (r *podRuntime) uids() map[string]types.UID {
	r.t.Helper()
	ctx := testCtx(r.t)
	ns := r.e.Namespace
	out := map[string]types.UID{}
	deps, err := r.e.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, o := range deps.Items {
		out["deployment/"+o.Name] = o.UID
	}
	svcs, err := r.e.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, o := range svcs.Items {
		out["service/"+o.Name] = o.UID
	}
	jobs, err := r.e.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, o := range jobs.Items {
		out["job/"+o.Name] = o.UID
	}
	claims, err := r.e.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, o := range claims.Items {
		out["claim/"+o.Name] = o.UID
	}
	return out
}

// The Runtime's Pod deleted mid-run: two application services are healthy and a batch start
// was just appended when the Pod is deleted; the ReplicaSet's new Pod resumes on the same
// journal claim with the same installation record, finishes the start (one Job, its result
// naming it), and observes both services healthy. Every native object that existed keeps its
// UID (Jobs, Deployments, Services, claims), none is duplicated (one Job per batch Attempt,
// one Deployment and one Service per application Attempt), and every command has exactly one
// recorded result. Real: everything but the permission provider (a policy file).
func TestTheRuntimePodReplacedMidRunResumesOnItsClaimAndDuplicatesNothing(t *testing.T) {
	r := newPodRuntime(t)
	rec := r.installed()
	claim, err := r.e.Client.CoreV1().PersistentVolumeClaims(runtimeNS).Get(testCtx(t), journalsClaim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep := object[appsv1.Deployment](t, r.objects, "Deployment", runtimeName)
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Fatalf("the Runtime's strategy is %s; want Recreate", dep.Spec.Strategy.Type)
	}
	first := r.deploy(dep, "")
	var cmds []string
	cmds = append(cmds, r.appendCmd(siteprotocol.OpBindMember, "", nil))
	image := r.node.Image(t, kubetest.ImageHTTPService)
	apps := []string{uuid.NewString(), uuid.NewString()}
	for _, a := range apps {
		cmds = append(cmds, r.appendApp(siteprotocol.OpPrepare, a, map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "application",
			"image": image, "port": 8080, "readiness": map[string]any{"path": "/healthz"}, "demand": map[string]int64{"cpu": 100, "memory": 64 << 20}}))
		cmds = append(cmds, r.appendApp(siteprotocol.OpStart, a, nil))
	}
	batchA := uuid.NewString()
	cmds = append(cmds, r.appendCmd(siteprotocol.OpPrepare, batchA, prepareOf()), r.appendCmd(siteprotocol.OpStart, batchA, startOf(batchA)))
	for _, id := range cmds {
		if res, raw := r.result(id, first.Name); res.Outcome != siteprotocol.OutcomeSucceeded {
			t.Fatalf("command %s: %s", id, raw)
		}
	}
	for _, a := range apps {
		r.observeHealthy(a, first.Name)
	}
	before := r.uids()

	// Mid-run: a batch Attempt's prepare and start appended, the Pod deleted at once.
	batchB := uuid.NewString()
	late := []string{r.appendCmd(siteprotocol.OpPrepare, batchB, prepareOf()), r.appendCmd(siteprotocol.OpStart, batchB, startOf(batchB))}
	if err := r.e.Client.CoreV1().Pods(runtimeNS).Delete(testCtx(t), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := r.runningPod(runtimeName, first.UID)
	for _, id := range late {
		if res, raw := r.result(id, second.Name); res.Outcome != siteprotocol.OutcomeSucceeded {
			t.Fatalf("command %s after the replacement: %s\n%s", id, raw, r.podLog(second.Name, false))
		}
	}
	for _, a := range apps {
		r.observeHealthy(a, second.Name)
	}
	after := r.uids()
	for k, uid := range before {
		if after[k] != uid {
			t.Fatalf("%s: UID %s before the Runtime's Pod was replaced, %q after", k, uid, after[k])
		}
	}
	for _, a := range apps {
		for _, kind := range []string{"deployments", "services"} {
			var n int
			sel := metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + a}
			if kind == "deployments" {
				l, err := r.e.Client.AppsV1().Deployments(r.e.Namespace).List(testCtx(t), sel)
				if err != nil {
					t.Fatal(err)
				}
				n = len(l.Items)
				for _, d := range l.Items {
					if d.Status.AvailableReplicas != 1 {
						t.Fatalf("application %s's Deployment is not available after the replacement: %+v", a, d.Status)
					}
				}
			} else {
				l, err := r.e.Client.CoreV1().Services(r.e.Namespace).List(testCtx(t), sel)
				if err != nil {
					t.Fatal(err)
				}
				n = len(l.Items)
			}
			if n != 1 {
				t.Fatalf("application %s has %d %s; want one", a, n, kind)
			}
		}
	}
	for _, a := range []string{batchA, batchB} {
		if jobs := r.jobsOf(a); len(jobs) != 1 {
			t.Fatalf("batch Attempt %s has %d Jobs; want one", a, len(jobs))
		}
	}
	if res, _ := r.result(late[1], second.Name); len(res.NativeRefs) != 1 || res.NativeRefs[0].UID != string(r.jobsOf(batchB)[0].UID) {
		t.Fatalf("the start after the replacement names %+v, not its one Job", res.NativeRefs)
	}
	if again := r.record(recordName); again.UID != rec.UID || !equalData(again.Data, rec.Data) {
		t.Fatalf("the installation record changed across the replacement: %v → %v", rec.Data, again.Data)
	}
	if c, err := r.e.Client.CoreV1().PersistentVolumeClaims(runtimeNS).Get(testCtx(t), journalsClaim, metav1.GetOptions{}); err != nil || c.UID != claim.UID {
		t.Fatalf("the journal claim after the replacement: %v (UID %s, was %s)", err, c.UID, claim.UID)
	}
	t.Logf("Pod %s replaced by %s on claim %s, installation %v: %d native objects unchanged, two services healthy, batch %s one Job", first.Name, second.Name, claim.UID, rec.Data, len(before), batchB)
}

// Fencing: a second Runtime Deployment with the same service account but another journal
// claim and another installation record (its own install Job initialised both) pulls from the
// same stream: the Site API refuses it installation-mismatch, it stops and acknowledges
// nothing, and its liveness probe (`metallo runtime liveness`) then fails and restarts it,
// while the first Runtime goes on acknowledging. Real: everything but the permission provider.
func TestASecondRuntimeWithAnotherInstallationIsRefusedAndAcknowledgesNothing(t *testing.T) {
	r := newPodRuntime(t)
	rec := r.installed()
	dep := object[appsv1.Deployment](t, r.objects, "Deployment", runtimeName)
	first := r.deploy(dep, "")
	r.appendCmd(siteprotocol.OpBindMember, "", nil)
	a := uuid.NewString()
	if res, raw := r.result(r.appendCmd(siteprotocol.OpPrepare, a, prepareOf()), first.Name); res.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("prepare: %s", raw)
	}

	// The second Runtime: same service account, claim metallo-runtime-journals-b, record
	// runtime-installation-b (the Role lets it read that record too).
	ctx := testCtx(t)
	const claimB, recordB = journalsClaim + "-b", recordName + "-b"
	pvc := object[corev1.PersistentVolumeClaim](t, r.objects, "PersistentVolumeClaim", journalsClaim)
	pvc.ObjectMeta = metav1.ObjectMeta{Name: claimB, Namespace: runtimeNS, Labels: pvc.Labels}
	if _, err := r.e.Client.CoreV1().PersistentVolumeClaims(runtimeNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role, err := r.e.Client.RbacV1().Roles(runtimeNS).Get(ctx, "metallo-runtime-installation", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules[0].ResourceNames = append(role.Rules[0].ResourceNames, recordB)
	if _, err := r.e.Client.RbacV1().Roles(runtimeNS).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	recordEnv := corev1.EnvVar{Name: "METALLO_INSTALLATION_RECORD", Value: "configmap:" + runtimeNS + "/" + recordB}
	job := object[batchv1.Job](t, r.objects, "Job", installJobName)
	job.Name += "-b"
	job.Spec.Template.Labels = map[string]string{"app.kubernetes.io/name": installJobName + "-b"}
	job.Spec.Template.Spec.Containers[0].Env = append(job.Spec.Template.Spec.Containers[0].Env, recordEnv)
	setClaim(&job.Spec.Template.Spec, claimB)
	r.install(job)
	second := r.record(recordB)
	if id := second.Data[installation.KeyInstallationID]; id == "" || id == rec.Data[installation.KeyInstallationID] {
		t.Fatalf("the second installation's identity %q; want one of its own (the first's is %q)", id, rec.Data[installation.KeyInstallationID])
	}
	depB := dep.DeepCopy()
	depB.ObjectMeta = metav1.ObjectMeta{Name: runtimeName + "-b", Namespace: runtimeNS, Labels: map[string]string{"app.kubernetes.io/name": runtimeName + "-b", "app.kubernetes.io/part-of": "metallo"}}
	depB.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": runtimeName + "-b"}}
	depB.Spec.Template.Labels = map[string]string{"app.kubernetes.io/name": runtimeName + "-b"}
	setClaim(&depB.Spec.Template.Spec, claimB)
	podB := r.deploy(depB, "", recordEnv)

	// Its metrics (the admin listener on its Pod IP, which the host reaches): stopped for
	// installation-mismatch, nothing acknowledged; the first Runtime's for contrast.
	stopped := `metallo_runtime_stopped{reason="` + siteprotocol.ProblemInstallationMismatch + `"}`
	const acked = "metallo_runtime_acknowledged_sequence"
	deadline := time.Now().Add(2 * time.Minute)
	var mB map[string]float64
	for {
		p, err := r.e.Client.CoreV1().Pods(runtimeNS).Get(ctx, podB.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := harness.Metrics(p.Status.PodIP+":9090", stopped, acked); err == nil && m[stopped] == 1 {
			mB = m
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second Runtime was not stopped %s:\n%s", siteprotocol.ProblemInstallationMismatch, r.podLog(podB.Name, false))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if mB[acked] != 0 {
		t.Fatalf("the refused Runtime acknowledged up to sequence %v", mB[acked])
	}
	if log := r.podLog(podB.Name, false); !strings.Contains(log, siteprotocol.ProblemInstallationMismatch) {
		t.Fatalf("the refused Runtime's log does not name %s:\n%s", siteprotocol.ProblemInstallationMismatch, log)
	}
	// The first Runtime goes on: a start appended now is acknowledged, by it.
	start := r.appendCmd(siteprotocol.OpStart, a, startOf(a))
	res, raw := r.result(start, first.Name)
	jobs := r.jobsOf(a)
	if len(jobs) != 1 || len(res.NativeRefs) != 1 || res.NativeRefs[0].UID != string(jobs[0].UID) {
		t.Fatalf("the start with two Runtimes: %s, %d Jobs", raw, len(jobs))
	}
	mA, err := harness.Metrics(first.Status.PodIP+":9090", acked)
	if err != nil || mA[acked] < float64(res.Sequence) {
		t.Fatalf("the first Runtime's acknowledged sequence %v (%v); want at least %d", mA[acked], err, res.Sequence)
	}
	// Stopped, its heartbeat ends: the liveness probe fails and the kubelet restarts it.
	deadline = time.Now().Add(2 * time.Minute)
	for r.unhealthy(podB.Name) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the refused Runtime's liveness probe never failed:\n%s", r.podLog(podB.Name, false))
		}
		time.Sleep(time.Second)
	}
	t.Logf("second Runtime %s (installation %v) stopped %s, acknowledged sequence %v; probe: %s", podB.Name, second.Data, siteprotocol.ProblemInstallationMismatch, mB[acked], r.unhealthy(podB.Name))
}

// setClaim points the journals volume of spec at claim.
func setClaim(spec *corev1.PodSpec, claim string) {
	for i := range spec.Volumes {
		if spec.Volumes[i].PersistentVolumeClaim != nil && spec.Volumes[i].Name == "journals" {
			spec.Volumes[i].PersistentVolumeClaim.ClaimName = claim
		}
	}
}
