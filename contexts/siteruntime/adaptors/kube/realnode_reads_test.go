package kube_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// readLogsBytes reads the Attempt's log tail and decodes it; it fails
// unless the read succeeded and its encoded result is within the
// protocol's result bound.
func (s *site) readLogsBytes(attempt string, tail int64) ([]byte, siteprotocol.ReadLogsDetail) {
	s.t.Helper()
	p := s.command(siteprotocol.OpReadLogs, attempt, map[string]any{"tail_bytes": tail})
	a, err := s.registry.Execute(testContext(s.t), p)
	if err != nil {
		s.t.Fatalf("read-logs: %v", err)
	}
	r, encoded, err := siteprotocol.NewResult(p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
	if err != nil {
		s.t.Fatalf("read-logs answer %+v: %v", a, err)
	}
	want(s.t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	if len(encoded) > siteprotocol.MaxResultBytes {
		s.t.Fatalf("the result is %d bytes, over the protocol's %d", len(encoded), siteprotocol.MaxResultBytes)
	}
	d := detail[siteprotocol.ReadLogsDetail](s.t, r)
	b, err := base64.StdEncoding.DecodeString(d.ContentBase64)
	if err != nil {
		s.t.Fatal(err)
	}
	return b, d
}

// A batch Attempt on the real node writes a log of about 4 MiB — ANSI
// escape sequences, invalid UTF-8, NUL bytes, and a last line of 300 KiB
// without a newline, which containerd stores as several partial records.
// read-logs answers exactly the last 1 MiB of the full log (compared with
// the whole log as the kubelet gives it), truncated, within the result
// bound; a tail of 100 bytes is the log's last 100 bytes. Real: the
// container's own output through containerd and the kubelet; KWOK is not
// involved.
func TestReadLogsOnTheRealNodeAnswersExactlyTheLastBytesOfARealLogOfSeveralMiB(t *testing.T) {
	t.Parallel()
	s, _ := newRealNodeSite(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	// 40,000 lines of about 100 bytes, then 300 KiB of "z" without a
	// newline (head and tr of coreutils).
	// NUL bytes come from tr: a printf format ends at one.
	script := `i=0; pad=$(printf '%060d' 0); { while [ $i -lt 40000 ]; do printf '\033[31mline %d\033[0m \377\376\303\050 @ %s\n' $i "$pad"; i=$((i+1)); done; } | tr '@' '\000'; ` +
		`head -c 307200 /dev/zero | tr '\000' z`
	want(t, s.startArgv(attempt, 600, []string{"sh", "-c", script}, nil), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "succeeded", func(r siteprotocol.Result) bool {
		st := state(t, r)
		if st == siteprotocol.StateFailed {
			t.Fatalf("the Attempt failed: %s", r.Detail)
		}
		return st == siteprotocol.StateSucceeded
	})
	pod := s.podOf(attempt)
	full := []byte(s.e.PodLogs(s.ns, pod.Name, kube.ContainerName))
	if len(full) < 3<<20 || !bytes.Contains(full, []byte("\x1b[31mline 39999\x1b[0m \xff\xfe\xc3\x28 \x00 ")) || !bytes.HasSuffix(full, bytes.Repeat([]byte("z"), 307200)) {
		t.Fatalf("the full log (%d bytes) is not what the container wrote", len(full))
	}
	for _, tail := range []int64{siteprotocol.MaxReadBytes, 100} {
		got, d := s.readLogsBytes(attempt, tail)
		if !bytes.Equal(got, full[int64(len(full))-tail:]) || !d.Truncated || d.Container != kube.ContainerName {
			t.Fatalf("tail %d: %d bytes, truncated %v, container %s; not the full log's last %d bytes", tail, len(got), d.Truncated, d.Container, tail)
		}
	}
	t.Logf("full log %d bytes; the 1 MiB tail is exact", len(full))
}

// An application service on the real node (the httpservice image, made
// healthy by its readiness probe): read-logs of its Pod — found by Pod →
// ReplicaSet → Deployment UID — answers the whole log, what the server
// printed at start, not truncated. Then proxy, through the API server's
// service proxy to the real server: a POST's status, filtered headers
// (credentials, cookies and hop-by-hop dropped both ways, multi-valued
// kept) and body; a 2 MiB answer truncated to 1 MiB; the service's own 400
// answered as its status. Real: containerd, the kubelet, the Deployment
// and ReplicaSet controllers, the API server's service proxy, the Pod's
// network.
func TestReadLogsOfAnApplicationServiceOnTheRealNodeIsItsServersOutput(t *testing.T) {
	t.Parallel()
	var node *kubetest.RealNode
	var image string
	s := newAppSite(t, appOptions{siteOptions: siteOptions{realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
		node = e.RealNode()
		image = node.Image(t, kubetest.ImageHTTPService)
		return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
	}}})
	attempt := uuid.NewString()
	p := appPrepare(8080, map[string]any{"path": "/healthz", "period_seconds": 1})
	p["image"] = image
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, p)), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	got, d := s.readLogsBytes(attempt, 4096)
	if d.Truncated || !strings.HasPrefix(string(got), "httpservice listening on :8080 as attempt-"+attempt) {
		t.Fatalf("the service's log: %q (truncated %v)", got, d.Truncated)
	}

	// proxy: a POST with its body and headers; the credential, cookie
	// and hop-by-hop headers are dropped both ways, multi-valued headers
	// kept in order.
	post := s.proxy(attempt, map[string]any{"method": "POST", "path": "/echo?x=1", "body_base64": base64.StdEncoding.EncodeToString([]byte(`{"inputs":[1,2]}`)),
		"headers": map[string][]string{"Content-Type": {"application/json"}, "X-Req": {"one", "two"}, "Authorization": {"Bearer member-secret"},
			"Cookie": {"a=b"}, "Connection": {"X-Hop"}, "X-Hop": {"dropped"}}})
	pd := detail[siteprotocol.ProxyDetail](t, post)
	var echo struct {
		Host    string              `json:"host"`
		Headers map[string][]string `json:"headers"`
		Body    string              `json:"body"`
	}
	body, _ := base64.StdEncoding.DecodeString(pd.BodyBase64)
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("the echo: %q: %v", body, err)
	}
	switch {
	case pd.Status != 201 || pd.Truncated:
		t.Fatalf("status %d truncated %v", pd.Status, pd.Truncated)
	case !slices.Equal(pd.Headers["X-Multi"], []string{"a", "b"}) || pd.Headers["Set-Cookie"] != nil || pd.Headers["Audit-Id"] != nil:
		t.Fatalf("answer headers %v: want X-Multi a, b and no Set-Cookie or Audit-Id", pd.Headers)
	case echo.Body != `{"inputs":[1,2]}` || !slices.Equal(echo.Headers["X-Req"], []string{"one", "two"}):
		t.Fatalf("the service got body %q headers %v", echo.Body, echo.Headers)
	case echo.Headers["Authorization"] != nil || echo.Headers["Cookie"] != nil || echo.Headers["X-Hop"] != nil:
		t.Fatalf("the service got a dropped header: %v", echo.Headers)
	case !strings.HasPrefix(echo.Host, "attempt-"+attempt):
		t.Fatalf("answered by %q, not the Attempt's Pod", echo.Host)
	}
	// 2 MiB answered: the first 1 MiB, truncated.
	big := detail[siteprotocol.ProxyDetail](t, s.proxy(attempt, map[string]any{"method": "GET", "path": "/bytes?n=2097152"}))
	b, _ := base64.StdEncoding.DecodeString(big.BodyBase64)
	if big.Status != 200 || !big.Truncated || !bytes.Equal(b, bytes.Repeat([]byte("b"), siteprotocol.MaxReadBytes)) {
		t.Fatalf("2 MiB answer: status %d, %d bytes, truncated %v", big.Status, len(b), big.Truncated)
	}
	// An upstream error is the service's answer.
	if bad := detail[siteprotocol.ProxyDetail](t, s.proxy(attempt, map[string]any{"method": "GET", "path": "/bytes?n=x"})); bad.Status != 400 {
		t.Fatalf("the service's 400 came back as %d", bad.Status)
	}
	want(t, s.simple(siteprotocol.OpCleanup, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
}

// proxy sends a proxy command of the Attempt and wants it proxied.
func (s *site) proxy(attempt string, payload map[string]any) siteprotocol.Result {
	s.t.Helper()
	r := s.execute(s.command(siteprotocol.OpProxy, attempt, payload))
	want(s.t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonProxied)
	return r
}
