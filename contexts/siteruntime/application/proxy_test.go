package application_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// fakeProxy stands in for the API server's service proxy and the service
// behind it (outside the application layer): it records what was sent
// and answers what a test sets.
type fakeProxy struct {
	mu      sync.Mutex
	err     error
	resp    application.ProxyResponse
	sent    []application.ProxyRequest
	targets []application.ProxyTarget // every target asked, sent or not
	// deadlines are the deadlines of the contexts the sends were given.
	deadlines []time.Time
}

func (p *fakeProxy) ProxyService(ctx context.Context, t application.ProxyTarget, _ application.ObjectIdentity, req application.ProxyRequest) (application.ProxyResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = append(p.targets, t)
	d, _ := ctx.Deadline()
	p.deadlines = append(p.deadlines, d)
	if p.err != nil {
		return application.ProxyResponse{}, p.err
	}
	p.sent = append(p.sent, req)
	return p.resp, nil
}

// readyPods is fakePods whose Pod is Ready (or not).
type readyPods struct {
	*fakePods
	ready bool
}

func (p readyPods) WorkloadPod(ctx context.Context, root siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity) (application.WorkloadPod, error) {
	pod, err := p.fakePods.WorkloadPod(ctx, root, saved, id)
	pod.Ready = p.ready
	return pod, err
}

// newProxyFixture is an application Attempt prepared and started, with
// reads over pods and the proxy over proxy.
func newProxyFixture(t *testing.T, pods application.WorkloadPods, proxy application.ServiceProxy) *appFixture {
	t.Helper()
	f := newAppFixture(t, 600*time.Second)
	access := application.NewAccess(f.bindings, f.app, f.perms, fixedClock{now})
	exec := appservice.NewExecutor(access, f.app, jsonAppSpecs{}, f.records, f.fp,
		application.ExecutorConfig{DeletionWait: time.Second}, 0).WithReads(pods).WithProxy(proxy)
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	return f
}

// A proxy by the Attempt's member with a fresh execution.read answer
// reaches the service once, with its body and its headers filtered (the
// member's Authorization and Cookie, the hop-by-hop headers and those
// Connection names dropped; multi-valued headers kept in order); the
// answer is the service's status — a 503 of the service itself is its
// answer, succeeded / proxied — its filtered headers and body, truncated
// as the port said. Recover never sends again: native-error. The native
// side is doubled (fakeProxy, readyPods: the API server and the service).
func TestProxySendsOnceWithFilteredHeadersAndAnswersTheServicesStatus(t *testing.T) {
	proxy := &fakeProxy{resp: application.ProxyResponse{Status: 503, Body: []byte("overloaded"), Truncated: true,
		Headers: map[string][]string{"X-Multi": {"a", "b"}, "Set-Cookie": {"s=1"}, "Connection": {"keep-alive"}, "content-type": {"text/plain"}}}}
	f := newProxyFixture(t, readyPods{fakePods: &fakePods{}, ready: true}, proxy)
	p := f.cmd(t, siteprotocol.OpProxy, map[string]any{"method": "POST", "path": "/v2/models/m/infer?verbose=1", "body_base64": base64.StdEncoding.EncodeToString([]byte("{}")),
		"headers": map[string][]string{"X-Req": {"1", "2"}, "authorization": {"Bearer x"}, "Cookie": {"c=d"}, "Connection": {"X-Hop"}, "X-Hop": {"h"}, "Impersonate-Extra-Scopes": {"x"}}})
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonProxied)
	d, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
	switch {
	case d.Status != 503 || string(body) != "overloaded" || !d.Truncated || d.HeadersTruncated:
		t.Fatalf("detail %+v", d)
	case !slices.Equal(d.Headers["X-Multi"], []string{"a", "b"}) || d.Headers["Set-Cookie"] != nil || d.Headers["Connection"] != nil ||
		!slices.Equal(d.Headers["Content-Type"], []string{"text/plain"}):
		t.Fatalf("answer headers %v", d.Headers)
	}
	if len(proxy.sent) != 1 {
		t.Fatalf("%d requests sent", len(proxy.sent))
	}
	sent := proxy.sent[0]
	if sent.Method != "POST" || sent.Path != "/v2/models/m/infer?verbose=1" || string(sent.Body) != "{}" || !slices.Equal(sent.Headers["X-Req"], []string{"1", "2"}) || len(sent.Headers) != 1 {
		t.Fatalf("sent %+v", sent)
	}
	if q := f.perms.queries[len(f.perms.queries)-1]; q.Action != domain.ActionRead {
		t.Fatalf("permission asked for %s", q.Action)
	}
	rec := f.run(t, p, true)
	expect(t, rec, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if len(proxy.sent) != 1 || !strings.Contains(rec.Message, "not sent again") {
		t.Fatalf("recovery sent the request again (%d sent): %s", len(proxy.sent), rec.Message)
	}
}

// The proxy's exchange is bounded by --proxy-timeout from its send (the
// port's context carries the deadline): a body still arriving at it is
// answered as read so far, succeeded / proxied with truncated true and a
// message saying the bound cut it; an answer that did not begin by it is
// failed / deadline-exceeded, saying the request was sent and is not sent
// again (docs/site-runtime.md#command-bounds). The service side is doubled
// (fakeProxy: what the kube adaptor answers at the deadline).
func TestAProxyAtItsBoundAnswersWhatCameOrDeadlineExceeded(t *testing.T) {
	proxy := &fakeProxy{resp: application.ProxyResponse{Status: 200, Body: []byte("abc"), Cut: true}}
	f := newProxyFixture(t, readyPods{fakePods: &fakePods{}, ready: true}, proxy)
	before := time.Now()
	r := f.run(t, f.cmd(t, siteprotocol.OpProxy, map[string]any{"method": "GET", "path": "/trickle"}), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonProxied)
	d, err := siteprotocol.DecodeDetail[siteprotocol.ProxyDetail](r)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := base64.StdEncoding.DecodeString(d.BodyBase64); string(body) != "abc" || !d.Truncated || d.Status != 200 || !strings.Contains(r.Message, "still arriving") {
		t.Fatalf("%s: detail %+v", r.Message, d)
	}
	if dl := proxy.deadlines[0]; dl.IsZero() || dl.Before(before.Add(application.DefaultProxyTimeout)) {
		t.Fatalf("the send's context has deadline %v, want --proxy-timeout after the send", dl)
	}

	proxy.err = fmt.Errorf("%w: no status line", application.ErrNoAnswer)
	r = f.run(t, f.cmd(t, siteprotocol.OpProxy, map[string]any{"method": "GET", "path": "/silent"}), false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if !strings.Contains(r.Message, "was sent") || !strings.Contains(r.Message, "not sent again") {
		t.Fatalf("message %q", r.Message)
	}
}

// Nothing is sent when a check fails: a Pod not Ready and a workload
// without a Pod are endpoint-unavailable; a Service that is not the
// recorded one is native-identity-mismatch; an API server that reaches
// no endpoint is endpoint-unavailable; a path the protocol does not admit
// (a percent-encoded dot, reaching another path once decoded) is
// invalid-payload; a withdrawn permission is permission-denied.
func TestProxyRefusesWithNothingSentBeforeEveryCheckPasses(t *testing.T) {
	get := map[string]any{"method": "GET", "path": "/v1/models"}
	cases := []struct {
		name    string
		ready   bool
		podErr  error
		sendErr error
		payload map[string]any
		arrange func(f *appFixture)
		outcome siteprotocol.Outcome
		reason  siteprotocol.Reason
	}{
		{name: "pod not ready", payload: get, outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonEndpointUnavailable},
		{name: "no pod", ready: true, podErr: fmt.Errorf("%w: none", application.ErrNoWorkloadPod), payload: get, outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonEndpointUnavailable},
		{name: "pod chain broken", ready: true, podErr: fmt.Errorf("%w: forged", application.ErrNativeIdentityMismatch), payload: get, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNativeIdentityMismatch},
		{name: "service not the recorded one", ready: true, sendErr: fmt.Errorf("%w: other uid", application.ErrNativeIdentityMismatch), payload: get, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonNativeIdentityMismatch},
		{name: "service gone", ready: true, sendErr: fmt.Errorf("%w: gone", application.ErrWorkloadGone), payload: get, outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonNativeMissing},
		{name: "no endpoint reached", ready: true, sendErr: fmt.Errorf("%w: 503 no endpoints", application.ErrEndpointUnavailable), payload: get, outcome: siteprotocol.OutcomeFailed, reason: siteprotocol.ReasonEndpointUnavailable},
		{name: "encoded dot dot", ready: true, payload: map[string]any{"method": "GET", "path": "/a/%2e%2e/secret"}, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonInvalidPayload},
		{name: "permission withdrawn", ready: true, payload: get, arrange: func(f *appFixture) {
			f.perms.answer = domain.Permission{Allowed: false, Reason: "revoked", EvidenceID: "ev-9", ValidUntil: now.Add(time.Minute)}
		}, outcome: siteprotocol.OutcomeRefused, reason: siteprotocol.ReasonPermissionDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			proxy := &fakeProxy{err: c.sendErr, resp: application.ProxyResponse{Status: 200}}
			f := newProxyFixture(t, readyPods{fakePods: &fakePods{chainErr: c.podErr}, ready: c.ready}, proxy)
			if c.arrange != nil {
				c.arrange(f)
			}
			p := pendingUnchecked(t, f.rawCmd(t, siteprotocol.OpProxy, c.payload))
			expect(t, f.run(t, p, false), c.outcome, c.reason)
			if len(proxy.sent) != 0 {
				t.Fatalf("%d requests sent", len(proxy.sent))
			}
		})
	}
}

// FilterHeaders keeps at most MaxProxyHeaders values and
// MaxProxyHeaderBytes bytes, in name order, and says when it left some out.
func TestFilterHeadersIsBoundedInCountAndBytes(t *testing.T) {
	h := map[string][]string{}
	for i := range 100 {
		h[fmt.Sprintf("X-H%03d", i)] = []string{"v"}
	}
	out, truncated := application.FilterHeaders(h)
	if !truncated || len(out) != siteprotocol.MaxProxyHeaders || out["X-H000"] == nil || out["X-H099"] != nil {
		t.Fatalf("%d headers, truncated %v", len(out), truncated)
	}
	big := map[string][]string{"X-Big": {strings.Repeat("x", siteprotocol.MaxProxyHeaderBytes)}, "X-A": {"small"}}
	out, truncated = application.FilterHeaders(big)
	if !truncated || out["X-Big"] != nil || out["X-A"][0] != "small" {
		t.Fatalf("%v, truncated %v", out, truncated)
	}
	if out, truncated := application.FilterHeaders(map[string][]string{"x-one": {"1"}, "X-One": {"2"}}); truncated || len(out["X-One"]) != 2 {
		t.Fatalf("names not merged canonically: %v", out)
	}
}

// rawCmd is an application command of the fixture's Attempt, unchecked
// (the Runtime sees what a faulty server might send).
func (f *appFixture) rawCmd(t *testing.T, op siteprotocol.Operation, payload any) []byte {
	t.Helper()
	f.n++
	b, err := json.Marshal(map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": "application", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": bindingID, "generation": 1},
		"payload": payload})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
