package processtest

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// resultOf is the acknowledged result of command id (failing the test
// when it has none).
func resultOf(t *testing.T, site *harness.Site, id string) siteprotocol.Result {
	t.Helper()
	rec, err := site.Command(id)
	if err != nil || len(rec.Result) == 0 {
		t.Fatalf("command %s has no result (%v)", id, err)
	}
	r, err := siteprotocol.ParseResult(rec.Result)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// acknowledged reports whether command id has a recorded result.
func acknowledged(site *harness.Site, id string) bool {
	rec, err := site.Command(id)
	return err == nil && len(rec.Result) > 0
}

// liveUntil runs `metallo runtime liveness` (the probe, with the harness's
// --liveness-bound, far shorter than the waits here) while p runs, until
// done reports true, failing the test at the first failed verdict; busy
// sees the heartbeat's command record of each pass (nil between commands).
func liveUntil(t *testing.T, rt *harness.Runtime, p *harness.Process, what string, done func() bool, busy func(*heartbeat.Command)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for verdicts := 0; !done(); verdicts++ {
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("%s: not done after %d liveness verdicts (exited %v):\n%s", what, verdicts, p.Exited(), p.Output())
		}
		if out, err := rt.Liveness(); err != nil {
			t.Fatalf("%s: liveness failed after %d verdicts: %v\n%s", what, verdicts, err, out)
		}
		if busy != nil {
			if r, err := heartbeat.Check(rt.Heartbeat, time.Hour, time.Now()); err == nil {
				busy(r.Command)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A member's service that trickles its answer — its headers at once, then
// one byte a second for a day — holds the ordered stream only until the
// proxy's bound (--proxy-timeout 8s, beyond the harness's liveness bound
// of 3s): the proxy answers at its bound with the status, the headers and
// the bytes that came, truncated; the next command, another member's
// prepare appended behind it, is answered right after; and the Runtime's
// liveness probe never fails meanwhile, its heartbeat showing the proxy's
// wait while it lasts (docs/site-runtime.md#command-bounds). Real: the
// metallo processes, the API server and its service proxy, the real node's
// kubelet, containerd and Pod network, the httpservice image's /trickle.
func TestATricklingServiceIsAnsweredAtTheProxysBoundAndTheStreamMovesOn(t *testing.T) {
	a := newAppSetup(t)
	e, site, rt, ctx := a.Env, a.Site, a.Runtime, a.Ctx
	node := e.RealNode()
	image := node.Image(t, kubetest.ImageHTTPService)
	member, project := a.Member, a.Project

	// Member B of the same Project, with its own binding.
	other, otherBinding := uuid.NewString(), uuid.NewString()
	if err := siteagent.Member(ctx, e.Client, e.Namespace, other); err != nil {
		t.Fatal(err)
	}
	grants, _ := json.Marshal([]permissions.Grant{
		{Member: member, Project: project, Actions: []domain.PermissionAction{domain.ActionStart, domain.ActionRead}},
		{Member: other, Project: project, Actions: []domain.PermissionAction{domain.ActionStart}},
	})
	if err := os.WriteFile(rt.Policy, grants, 0o600); err != nil {
		t.Fatal(err)
	}
	appendRaw := func(c map[string]any) string {
		raw, _ := json.Marshal(c)
		if _, err := site.Append(raw); err != nil {
			t.Fatal(err)
		}
		return c["id"].(string)
	}
	appendRaw(map[string]any{"id": uuid.NewString(), "operation": siteprotocol.OpBindMember, "issued_at": "2026-12-04T10:00:00Z",
		"member_id": other, "project_id": project, "payload": map[string]any{"party_id": other, "namespace": e.Namespace,
			"account": siteprotocol.MemberAccount(other), "binding_id": otherBinding, "revision": 1, "generation": 1}})

	attempt := uuid.NewString()
	prepare := appPreparePayload()
	prepare["image"] = image
	prepare["readiness"] = map[string]any{"path": "/healthz", "period_seconds": 1}
	appCommand(a, siteprotocol.OpPrepare, attempt, prepare)
	start := appCommand(a, siteprotocol.OpStart, attempt, nil)
	p, err := rt.Start("", append(node.RuntimeFlags(), "--proxy-timeout", "8s")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	waitAcknowledged(t, site, p, start)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		id := appCommand(a, siteprotocol.OpObserve, attempt, nil)
		waitAcknowledged(t, site, p, id)
		d, err := siteprotocol.DecodeDetail[siteprotocol.ObserveDetail](resultOf(t, site, id))
		if err != nil {
			t.Fatal(err)
		}
		if d.State == siteprotocol.StateHealthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service never became healthy: %+v", d)
		}
	}

	// The image's /trickle, briefly: one byte (an image built before it
	// answers its catch-all JSON instead).
	short := appCommand(a, siteprotocol.OpProxy, attempt, map[string]any{"method": "GET", "path": "/trickle?n=1&every=1ms"})
	waitAcknowledged(t, site, p, short)
	if d, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](resultOf(t, site, short)); err != nil || d.BodyBase64 != base64.StdEncoding.EncodeToString([]byte("t")) {
		t.Fatalf("the real node's httpservice image %s does not trickle (%+v, %v): import this tree's images (deploy/localcluster/cluster.sh image)", image, d, err)
	}
	proxy := appCommand(a, siteprotocol.OpProxy, attempt, map[string]any{"method": "GET", "path": "/trickle?n=86400&every=1s"})
	next := appendRaw(map[string]any{"id": uuid.NewString(), "operation": siteprotocol.OpPrepare, "issued_at": "2026-12-04T10:00:00Z",
		"member_id": other, "project_id": project, "family": "batch", "run_id": uuid.NewString(), "attempt_id": uuid.NewString(),
		"account_ref": map[string]any{"binding_id": otherBinding, "generation": 1}, "payload": map[string]any{"workspace_size_bytes": 1 << 20}})
	var sawWait bool
	liveUntil(t, rt, p, "the proxy and the next command", func() bool { return acknowledged(site, next) }, func(c *heartbeat.Command) {
		sawWait = sawWait || (c != nil && c.Operation == string(siteprotocol.OpProxy) && c.Waiting != "")
	})
	if !sawWait {
		t.Error("the heartbeat never showed the proxy's wait while it lasted")
	}
	r := resultOf(t, site, proxy)
	if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonProxied || !strings.Contains(r.Message, "still arriving") {
		t.Fatalf("the proxy of the trickle: %s / %s: %s", r.Outcome, r.Reason, r.Message)
	}
	d, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
	if d.Status != 200 || !d.Truncated || strings.Trim(string(body), "t") != "" || len(body) >= 86400 {
		t.Fatalf("the trickle's answer: status %d, truncated %v, body %q", d.Status, d.Truncated, body)
	}
	if n := resultOf(t, site, next); n.Outcome != siteprotocol.OutcomeSucceeded || n.Reason != siteprotocol.ReasonPrepared {
		t.Fatalf("the other member's prepare after the proxy: %s / %s: %s", n.Outcome, n.Reason, n.Message)
	}
	t.Logf("the trickle answered at the bound with %d bytes; the next command answered after it", len(body))
	cleanup := appCommand(a, siteprotocol.OpCleanup, attempt, nil)
	waitAcknowledged(t, site, p, cleanup)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A read-file whose workspace reader cannot be scheduled (the Site's node
// selector names no node) waits for its line until its bound
// (--read-file-wait 20s, beyond the harness's liveness bound of 3s) and
// answers failed / deadline-exceeded: one reader Pod in all — the
// Runtime, SIGKILLed while the reader waits and restarted, adopts it and
// waits only for what is left of the same bound (the heartbeat's wait
// ends at the same time before and after the restart) — liveness never
// fails while a Runtime runs, and no reader is left. read-logs of the
// Job's container, which never started, answers failed / native-error
// (docs/site-runtime.md#command-bounds, docs/site-runtime.md#private-reads).
// Real: the metallo processes, the API server, admission, the scheduler;
// no container runs.
func TestAnUnschedulableReaderIsOneReaderAnsweredAtItsBoundAcrossARestart(t *testing.T) {
	image := "registry.example/metallo-platform@sha256:" + strings.Repeat("7", 64)
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithImage(image), harness.WithPlatformImage(),
		harness.WithGrants(domain.ActionStart, domain.ActionRead), harness.Bound())
	e, ctx, rt, attempt := s.Env, s.Ctx, s.Runtime, uuid.NewString()
	flags := []string{"--batch-image", image, "--pod-node-selector", "metallo.test/nowhere=" + attempt, "--read-file-timeout", "5s", "--read-file-wait", "20s"}
	workload := func(op siteprotocol.Operation, payload any) string {
		return s.Command(siteprotocol.FamilyBatch, op, attempt, payload)
	}
	workload(siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20})
	start := workload(siteprotocol.OpStart, map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20}, "time_limit_seconds": 600, "argv": []string{"true"}})

	// Every reader Pod the API server ever holds for the Attempt, by UID.
	readerName := domain.AttemptObjectName(attempt, domain.SuffixReader)
	var mu sync.Mutex
	readers := map[types.UID]bool{}
	w, err := e.Client.CoreV1().Pods(e.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + readerName})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				mu.Lock()
				readers[pod.UID] = true
				mu.Unlock()
			}
		}
	}()
	readerUIDs := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(readers)
	}

	p, err := rt.Start("", flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	waitAcknowledged(t, rt.Site, p, start)
	// The Job controller makes the Job's Pod, which no node can take.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err == nil && len(pods.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Job of attempt %s has no Pod (%v)", attempt, err)
		}
	}
	logs := workload(siteprotocol.OpReadLogs, map[string]any{"tail_bytes": 100})
	waitAcknowledged(t, rt.Site, p, logs)
	if r := resultOf(t, rt.Site, logs); r.Outcome != siteprotocol.OutcomeFailed || r.Reason != siteprotocol.ReasonNativeError || !strings.Contains(r.Message, "has not started") {
		t.Fatalf("read-logs of a container that never started: %s / %s: %s", r.Outcome, r.Reason, r.Message)
	}

	read := workload(siteprotocol.OpReadFile, map[string]any{"path": "out.txt", "max_bytes": 100})
	// The wait for the reader's line (not its removal's).
	readerWait := func(c *heartbeat.Command) bool {
		return c.WaitUntil != nil && strings.Contains(c.Waiting, readerName) && strings.HasSuffix(c.Waiting, "to end")
	}
	var before *time.Time
	liveUntil(t, rt, p, "the reader's wait", func() bool { return before != nil && readerUIDs() == 1 }, func(c *heartbeat.Command) {
		if c != nil && c.Operation == string(siteprotocol.OpReadFile) && readerWait(c) {
			before = c.WaitUntil
		}
	})
	p.Kill()
	if acknowledged(rt.Site, read) {
		t.Fatal("the read was answered before the kill: the bound is too short for this test")
	}
	p, err = rt.Start("", flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	mustLog(t, p, `"msg":"runtime worker started"`)
	var after *time.Time
	liveUntil(t, rt, p, "the recovered read", func() bool { return acknowledged(rt.Site, read) }, func(c *heartbeat.Command) {
		if c != nil && c.Operation == string(siteprotocol.OpReadFile) && readerWait(c) {
			after = c.WaitUntil
		}
	})
	r := resultOf(t, rt.Site, read)
	if r.Outcome != siteprotocol.OutcomeFailed || r.Reason != siteprotocol.ReasonDeadlineExceeded {
		t.Fatalf("the unschedulable read: %s / %s: %s", r.Outcome, r.Reason, r.Message)
	}
	if after == nil || !after.Equal(*before) {
		t.Fatalf("the recovered wait ends at %v; the first run's at %v: a restart must not start the wait again", after, before)
	}
	if n := readerUIDs(); n != 1 {
		t.Fatalf("%d reader Pods were created; want one in all", n)
	}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, readerName, metav1.GetOptions{}); err == nil {
		t.Fatal("a reader is left")
	}
	cleanup := workload(siteprotocol.OpCleanup, nil)
	waitAcknowledged(t, rt.Site, p, cleanup)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}
