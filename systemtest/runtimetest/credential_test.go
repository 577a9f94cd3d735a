package runtimetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// writeAtomically replaces path's content the way a projected token or a
// mounted Secret is rotated: a new file renamed over the old one.
func writeAtomically(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// pollLiveness runs the liveness probe until ok(output, err) holds, failing
// the test when p exits or a minute passes.
func pollLiveness(t *testing.T, e *env, p *harness.Process, what string, ok func(string, error) bool) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := e.rt.Liveness()
		if ok(out, err) {
			return out
		}
		if p.Exited() {
			t.Fatalf("the Runtime exited while waiting for liveness to %s:\n%s", what, p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("liveness did not %s within a minute; last answer %v: %s\n%s", what, err, out, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestARefusedCredentialFailsLivenessNamingItAndAValidOneRecoversWithoutARestart:
// the Runtime's key file holds a key the execution role does not know, so
// every request is answered 401 unauthenticated. The Runtime keeps
// retrying; once the refusals outlast the liveness bound, `runtime
// liveness` fails naming the key file and the refusal, and
// metallo_runtime_credential_refused is 1. A valid key written to the same
// file later is picked up by the same process: every command is delivered
// once, in order, with one native effect each, and liveness passes again
// (docs/site-runtime.md#a-refused-credential). The execution role counts
// the refusals and the results under the stream's environment
// (docs/operations.md#metrics).
func TestARefusedCredentialFailsLivenessNamingItAndAValidOneRecoversWithoutARestart(t *testing.T) {
	e := newEnv(t)
	e.site.ServerArgs = []string{"--admin-listen", "127.0.0.1:0"}
	if err := e.site.StartServer("execution.sqlite", ""); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(e.site.EnvKey)
	if err != nil {
		t.Fatal(err)
	}
	unknown, _, err := auth.NewKey(auth.Principal{Kind: auth.KindEnvironment, ID: e.site.Environment})
	if err != nil {
		t.Fatal(err)
	}
	e.rt.KeyFile = filepath.Join(t.TempDir(), "runtime.key")
	writeAtomically(t, e.rt.KeyFile, []byte(unknown+"\n"))
	e.append(t, startCmd(1, nil), bindCmd(2, 1), startCmd(3, nil))
	p := e.start(t, "")

	out := pollLiveness(t, e, p, "fail for the refused credential", func(out string, err error) bool {
		return err != nil && strings.Contains(out, heartbeat.ErrCredentialRefused.Error())
	})
	mustContain(t, out, "--key-file "+e.rt.KeyFile, "401", "unauthenticated")
	waitMetric(t, p, "metallo_runtime_credential_refused", 1)
	if puts := e.site.Proxy.Puts(); len(puts) != 0 {
		t.Fatalf("%d results sent with a refused credential", len(puts))
	}
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"the Site API refuses the credential`), time.Minute); err != nil {
		t.Fatal(err)
	}

	writeAtomically(t, e.rt.KeyFile, valid)
	for n := 1; n <= 3; n++ {
		e.waitAcknowledged(t, p, id(1, n))
	}
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", 3)
	waitMetric(t, p, "metallo_runtime_credential_refused", 0)
	pollLiveness(t, e, p, "pass again", func(_ string, err error) bool { return err == nil })
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"the Site API no longer refuses the credential"`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatalf("the Runtime restarted:\n%s", p.Output())
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"runtime worker shut down`), time.Second); err != nil {
		t.Fatal(err)
	}

	central, err := harness.AdminAddr(e.site.Server)
	if err != nil {
		t.Fatal(err)
	}
	refusals := `metallo_http_requests_total{code="401",environment="alpha-k8s",operation="get-stream-state"}`
	results := `metallo_http_requests_total{code="200",environment="alpha-k8s",operation="record-result"}`
	values, err := harness.Metrics(central, refusals, results)
	if err != nil {
		t.Fatal(err)
	}
	if values[refusals] < 1 || values[results] != 3 {
		t.Fatalf("the execution role counted %v refused stream reads and %v recorded results for alpha-k8s; want at least 1 and 3", values[refusals], values[results])
	}

	puts := e.site.Proxy.Puts()
	if len(puts) != 3 {
		t.Fatalf("%d result PUTs for 3 commands", len(puts))
	}
	for i, put := range puts {
		if put.Sequence != int64(i+1) || put.Status != 200 {
			t.Fatalf("PUT %d: sequence %d status %d", i, put.Sequence, put.Status)
		}
	}
	effects, err := harness.ReadEffects(e.rt.Effects)
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) != 2 || effects[0].CommandID != id(1, 1) || effects[1].CommandID != id(1, 3) {
		t.Fatalf("native effects %+v, want one for each start (commands 1 and 3)", effects)
	}
	if cp := checkpoint(t, e.rt.JournalDir); cp.Acknowledged != 3 || cp.Pending != nil {
		t.Fatalf("journal after recovery: %+v", cp)
	}
}

// TestAnUnavailableSiteAPIKeepsLivenessHealthy: with the execution role
// stopped, every request fails (the proxy answers 502). However long that
// lasts — here until the heartbeat shows the Runtime waited more than
// twice the liveness bound — liveness passes: the Runtime is never
// restarted because the Site API is down. When the server is back, the
// end of the outage is logged with its duration and delivery goes on. The
// gauges an operator alerts on follow (docs/operations.md#metrics).
func TestAnUnavailableSiteAPIKeepsLivenessHealthy(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	p := e.start(t, "")
	e.waitAcknowledged(t, p, id(1, 1))
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", 1)
	waitMetric(t, p, "metallo_runtime_stream_head_sequence", 1)
	waitMetric(t, p, "metallo_runtime_pending_sequence", 0)
	waitMetric(t, p, `metallo_runtime_retries_total{step="record acknowledgement"}`, 0)
	if err := e.site.Server.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	if _, err := p.WaitForLog(regexp.MustCompile(`"msg":"transient failure; retrying".*answered 502`), time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := e.rt.Liveness()
		if err != nil {
			t.Fatalf("liveness failed while the Site API was down: %v: %s", err, out)
		}
		r, err := heartbeat.Check(e.rt.Heartbeat, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if r.CredentialRefusedSince != nil {
			t.Fatalf("an unavailable Site API recorded as a refused credential: %+v", r)
		}
		if r.BeatAt.After(down.Add(2 * harness.LivenessBound)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no beat %s after the outage began within a minute:\n%s", 2*harness.LivenessBound, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	addr, err := harness.AdminAddr(p)
	if err != nil {
		t.Fatal(err)
	}
	const accepted = "metallo_runtime_last_accepted_request_timestamp_seconds"
	before, err := harness.Metrics(addr, accepted, `metallo_runtime_retries_total{step="pull"}`)
	if err != nil {
		t.Fatal(err)
	}
	if before[accepted] > float64(down.UnixNano())/1e9 || before[`metallo_runtime_retries_total{step="pull"}`] < 1 {
		t.Fatalf("during the outage: %v; want the last accepted request before it began (%d) and pull retries counted", before, down.Unix())
	}
	if err := e.site.StartServer("execution.sqlite", ""); err != nil {
		t.Fatal(err)
	}
	e.append(t, startCmd(2, nil))
	e.waitAcknowledged(t, p, id(1, 2))
	waitMetric(t, p, "metallo_runtime_stream_head_sequence", 2)
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", 2)
	after, err := harness.Metrics(addr, accepted)
	if err != nil {
		t.Fatal(err)
	}
	if after[accepted] <= float64(down.UnixNano())/1e9 {
		t.Fatalf("last accepted request %v after the outage, want after %d", after[accepted], down.Unix())
	}
	line, err := p.WaitForLog(regexp.MustCompile(`"msg":"transient failure ended; the step succeeded".*`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`"outage":"[0-9.]+(ms|s|m)`).MatchString(line) {
		t.Fatalf("the outage's end does not carry its duration with a unit: %s", line)
	}
}
