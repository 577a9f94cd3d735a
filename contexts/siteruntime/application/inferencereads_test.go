package application_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// predictorService is the Service the fake proxy says it went through:
// KServe's predictor Service, which the Runtime never records.
var predictorService = siteprotocol.NativeRef{Kind: domain.KindService, Namespace: namespace, Name: domain.AttemptObjectName(attempt, "") + "-predictor", UID: "svc-uid-kserve"}

// newIsvcReadFixture is an inference Attempt prepared (and started unless
// started is false), its executor with private reads over pods and the
// proxy over proxy (none when nil).
func newIsvcReadFixture(t *testing.T, pods application.WorkloadPods, proxy application.ServiceProxy, started bool) *isvcFixture {
	t.Helper()
	f := newIsvcFixture(t)
	f.restartWithReads(t, pods, proxy)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	if started {
		expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	}
	return f
}

// restartWithReads is restart with the inference family's private reads.
func (f *isvcFixture) restartWithReads(t *testing.T, pods application.WorkloadPods, proxy application.ServiceProxy) {
	t.Helper()
	access := application.NewAccess(f.bindings, f.isvc, f.perms, fixedClock{now})
	exec, err := inference.NewExecutor(access, f.isvc, jsonIsvcSpecs{}, f.records, f.fp,
		application.ExecutorConfig{DeletionWait: time.Second}, inference.Config{ServingRuntimes: map[string]string{"huggingface": servingRuntime}})
	if err != nil {
		t.Fatal(err)
	}
	exec.WithReads(pods)
	if proxy != nil {
		exec.WithProxy(proxy)
	}
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
}

// asMember is a command of the fixture's inference Attempt and Run sent by
// member m under binding b, unchecked.
func (f *isvcFixture) asMember(t *testing.T, m, b string, op siteprotocol.Operation, payload any) *domain.Pending {
	t.Helper()
	f.n++
	raw, err := json.Marshal(map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": m, "project_id": project,
		"family": "inference", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": b, "generation": 1},
		"payload": payload})
	if err != nil {
		t.Fatal(err)
	}
	return pendingUnchecked(t, raw)
}

// An inference Attempt's read-logs and proxy, by its member with a fresh
// execution.read answer: read-logs reads the predictor Pod the port found
// by the InferenceService's chain — checked against the saved
// InferenceService specification, which the port is given for the private
// argument rule — and answers its log's tail; proxy asks the port for the
// recorded InferenceService's predictor Service (no Service is recorded),
// sends once and answers the service's status, naming the Service it went
// through; Recover of the proxy answers native-error without sending
// again. The native side is doubled (fakePods, fakeProxy: the API server,
// the kubelet and the model server).
func TestInferenceReadLogsAndProxyReadThePredictorAfterTheChecks(t *testing.T) {
	pods := &fakePods{log: []byte("INFO model attempt-x loaded\n")}
	proxy := &fakeProxy{resp: application.ProxyResponse{Status: 200, Body: []byte(`{"predictions":[1]}`), Service: predictorService,
		Headers: map[string][]string{"Content-Type": {"application/json"}, "Set-Cookie": {"s=1"}}}}
	f := newIsvcReadFixture(t, readyPods{fakePods: pods, ready: true}, proxy, true)
	saved := f.record(domain.KindInferenceService)

	r := f.run(t, f.cmd(t, siteprotocol.OpReadLogs, readLogs(1024, "")), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	d, err := siteprotocol.DecodeDetail[siteprotocol.ReadLogsDetail](r)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := base64.StdEncoding.DecodeString(d.ContentBase64); string(got) != string(pods.log) || d.Truncated {
		t.Fatalf("detail %+v", d)
	}
	if len(r.NativeRefs) != 2 || r.NativeRefs[0].Kind != domain.KindInferenceService || r.NativeRefs[0].UID != saved.UID || r.NativeRefs[1].Kind != domain.KindPod {
		t.Fatalf("native refs %+v, want the InferenceService and the Pod read", r.NativeRefs)
	}
	if len(pods.roots) != 1 || pods.roots[0].Kind != domain.KindInferenceService || pods.roots[0].UID != saved.UID || string(pods.saved[0]) != string(saved.Spec) {
		t.Fatalf("the chain was checked from %+v against %s; want the recorded InferenceService and its saved specification", pods.roots, pods.saved)
	}
	if q := f.perms.queries[len(f.perms.queries)-1]; q.Action != domain.ActionRead {
		t.Fatalf("permission asked for %s", q.Action)
	}

	p := f.cmd(t, siteprotocol.OpProxy, map[string]any{"method": "POST", "path": "/v1/models/attempt-x:predict",
		"body_base64": base64.StdEncoding.EncodeToString([]byte(`{"instances":[1]}`)), "headers": map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer m"}}})
	pr := f.run(t, p, false)
	expect(t, pr, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonProxied)
	pd, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](pr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := base64.StdEncoding.DecodeString(pd.BodyBase64)
	if pd.Status != 200 || string(body) != `{"predictions":[1]}` || pd.Headers["Set-Cookie"] != nil || pd.Headers["Content-Type"] == nil {
		t.Fatalf("detail %+v", pd)
	}
	if len(proxy.sent) != 1 || proxy.sent[0].Headers["Authorization"] != nil || string(proxy.sent[0].Body) != `{"instances":[1]}` {
		t.Fatalf("sent %+v", proxy.sent)
	}
	tg := proxy.targets[0]
	if tg.Root.Kind != domain.KindInferenceService || tg.Root.UID != saved.UID || string(tg.RootSpec) != string(saved.Spec) || tg.Service != (siteprotocol.NativeRef{}) || tg.ServiceSpec != nil {
		t.Fatalf("target %+v: want the recorded InferenceService and no recorded Service", tg)
	}
	if len(pr.NativeRefs) != 2 || pr.NativeRefs[0] != predictorService || pr.NativeRefs[1].Kind != domain.KindPod || !strings.Contains(pr.Message, predictorService.Name) {
		t.Fatalf("refs %+v, message %q: want the predictor Service and the Pod", pr.NativeRefs, pr.Message)
	}
	rec := f.run(t, p, true)
	expect(t, rec, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if len(proxy.sent) != 1 || !strings.Contains(rec.Message, "not sent again") {
		t.Fatalf("recovery sent the request again (%d sent): %s", len(proxy.sent), rec.Message)
	}
}

// Every check of an inference Attempt's read-logs and proxy comes before
// anything is read or sent: another member of the same Project (with its
// own current binding and execution.read) is attempt-conflict, a
// withdrawn permission permission-denied, an Attempt only prepared
// not-started, one cancelled native-missing — none looks at the cluster. A
// broken chain or argument rule (the port's native-identity-mismatch) is
// refused with no log read and nothing sent; for proxy a predictor Service
// that is not exact is refused the same, one KServe has not made (or no
// endpoint) and a Pod not Ready are endpoint-unavailable. The native side
// is doubled (fakePods, fakeProxy).
func TestInferenceReadsRefuseWithNothingReadOrSentBeforeEveryCheckPasses(t *testing.T) {
	other, otherBinding := uuidN(4242), uuidN(4243)
	get := map[string]any{"method": "GET", "path": "/v1/models/attempt-x"}
	cases := []struct {
		name    string
		op      siteprotocol.Operation
		started bool
		ready   bool
		podErr  error
		sendErr error
		arrange func(t *testing.T, f *isvcFixture) *domain.Pending
		outcome siteprotocol.Outcome
		reason  siteprotocol.Reason
		finds   int // chain checks the port may see
		asked   int // proxy targets the port may see
	}{
		{name: "another member reads", op: siteprotocol.OpReadLogs, started: true, arrange: func(t *testing.T, f *isvcFixture) *domain.Pending {
			f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
			return f.asMember(t, other, otherBinding, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonAttemptConflict},
		{name: "another member proxies", op: siteprotocol.OpProxy, started: true, arrange: func(t *testing.T, f *isvcFixture) *domain.Pending {
			f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
			return f.asMember(t, other, otherBinding, siteprotocol.OpProxy, get)
		}, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonAttemptConflict},
		{name: "permission withdrawn", op: siteprotocol.OpReadLogs, started: true, arrange: func(t *testing.T, f *isvcFixture) *domain.Pending {
			f.perms.answer = domain.Permission{Allowed: false, Reason: "grant removed", EvidenceID: "ev-2", ValidUntil: now.Add(time.Minute)}
			return nil
		}, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonPermissionDenied},
		{name: "permission withdrawn before a proxy", op: siteprotocol.OpProxy, started: true, ready: true, arrange: func(t *testing.T, f *isvcFixture) *domain.Pending {
			f.perms.answer = domain.Permission{Allowed: false, Reason: "grant removed", EvidenceID: "ev-2", ValidUntil: now.Add(time.Minute)}
			return nil
		}, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonPermissionDenied},
		{name: "only prepared", op: siteprotocol.OpReadLogs, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNotStarted},
		{name: "only prepared, proxy", op: siteprotocol.OpProxy, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNotStarted},
		{name: "cancelled", op: siteprotocol.OpProxy, started: true, ready: true, arrange: func(t *testing.T, f *isvcFixture) *domain.Pending {
			expect(t, f.run(t, f.cmd(t, siteprotocol.OpCancel, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
			return nil
		}, outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonNativeMissing},
		{name: "argument rule broken, read-logs", op: siteprotocol.OpReadLogs, started: true, ready: true,
			podErr:  fmt.Errorf("%w: Pod p breaks the private inference argument rule in container kserve-container: argument 3 is \"--trust_remote_code\"", application.ErrNativeIdentityMismatch),
			outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNativeIdentityMismatch, finds: 1},
		{name: "argument rule broken, proxy", op: siteprotocol.OpProxy, started: true, ready: true,
			podErr:  fmt.Errorf("%w: Pod p breaks the private inference argument rule", application.ErrNativeIdentityMismatch),
			outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNativeIdentityMismatch, finds: 1},
		{name: "predictor Service not exact", op: siteprotocol.OpProxy, started: true, ready: true,
			sendErr: fmt.Errorf("%w: Service attempt-x-predictor is controlled by nothing", application.ErrNativeIdentityMismatch),
			outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNativeIdentityMismatch, finds: 1, asked: 1},
		{name: "no predictor Service yet", op: siteprotocol.OpProxy, started: true, ready: true,
			sendErr: fmt.Errorf("%w: KServe's controller has no predictor Service now", application.ErrEndpointUnavailable),
			outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonEndpointUnavailable, finds: 1, asked: 1},
		{name: "predictor Pod not Ready", op: siteprotocol.OpProxy, started: true,
			outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonEndpointUnavailable, finds: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pods := &fakePods{chainErr: c.podErr, log: []byte("secret\n")}
			proxy := &fakeProxy{err: c.sendErr, resp: application.ProxyResponse{Status: 200, Service: predictorService}}
			f := newIsvcReadFixture(t, readyPods{fakePods: pods, ready: c.ready}, proxy, c.started)
			var p *domain.Pending
			if c.arrange != nil {
				p = c.arrange(t, f)
			}
			if p == nil {
				payload := any(readLogs(100, ""))
				if c.op == siteprotocol.OpProxy {
					payload = get
				}
				p = f.cmd(t, c.op, payload)
			}
			r := f.run(t, p, false)
			expect(t, r, c.outcome, c.reason)
			if len(r.Detail) > 0 && string(r.Detail) != "{}" && string(r.Detail) != "null" {
				t.Fatalf("a %s read carries a detail: %s", r.Outcome, r.Detail)
			}
			if finds, logs := pods.reads(); finds != c.finds || logs != 0 || len(proxy.targets) != c.asked || len(proxy.sent) != 0 {
				t.Fatalf("the ports saw %d chain checks, %d log reads, %d proxy targets and %d sends; want %d, 0, %d and 0",
					finds, logs, len(proxy.targets), len(proxy.sent), c.finds, c.asked)
			}
		})
	}
}

// An inference executor without WithReads answers read-logs and proxy
// unsupported-operation, and one with reads but no proxy answers proxy
// unsupported-operation, without looking at the cluster.
func TestInferenceReadsWithoutThePortsAreUnsupported(t *testing.T) {
	f := newIsvcFixture(t)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpReadLogs, readLogs(10, "")), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
	pods := &fakePods{}
	f.restartWithReads(t, pods, nil)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpProxy, map[string]any{"method": "GET", "path": "/"}), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
	if finds, _ := pods.reads(); finds != 0 {
		t.Fatal("the Pods were looked at")
	}
}
