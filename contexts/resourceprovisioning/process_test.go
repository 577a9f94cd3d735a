package resourceprovisioning_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// These tests run the real binary, built once into t.TempDir(): `metallo
// serve --role provisioning` processes on loopback, and `metallo
// provisioning waldur-report` as the Site agent's CLI.
func TestProvisioningProcesses(t *testing.T) {
	bin := testsetup.Binary(t)
	t.Run("WaldurCasesThroughTheCLIAndHTTPGiveTheDocumentedLifecycles", func(t *testing.T) { testWaldurCases(t, bin) })
	t.Run("ThirtyTwoAgentsOnTwoProcessesLoseNoUpdate", func(t *testing.T) { testTwoProcesses(t, bin) })
	t.Run("BadInputIsA4xxProblemAndStoresNothing", func(t *testing.T) { testBadInput(t, bin) })
	t.Run("ServeWithoutADatabaseURLUsesTheEmbeddedDefaultAndSaysSoFirst", func(t *testing.T) { testEmbeddedDefault(t, bin) })
	t.Run("ServeWithoutMigrateFailsWhileMigrationsArePending", func(t *testing.T) { testPendingMigrations(t, bin) })
	t.Run("ADroppedDatabaseIs503OnEveryRouteAndReadyzWithoutDriverText", func(t *testing.T) { testDroppedDatabase(t, bin) })
}

// cleanEnv is the test's environment without METALLO_* settings, so the
// processes see only the flags a test gives.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "METALLO_") {
			out = append(out, kv)
		}
	}
	return out
}

// run runs the binary to completion.
func run(t testing.TB, bin, dir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// keysFor makes a keys file in dir with `metallo keys new --append` and
// returns each principal's key.
func keysFor(t testing.TB, bin, dir string, principals ...string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, p := range principals {
		out, stderr, err := run(t, bin, dir, "keys", "new", "--principal", p, "--append", "keys.yaml")
		if err != nil {
			t.Fatalf("keys new: %v %s", err, stderr)
		}
		for line := range strings.SplitSeq(out, "\n") {
			if k, ok := strings.CutPrefix(line, "key: "); ok {
				keys[p] = k
			}
		}
	}
	return keys
}

type server struct {
	base string
	mu   sync.Mutex
	logs []string
}

func (s *server) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs)
}

// startServer starts `metallo serve --role provisioning` in dir on a free
// loopback port and waits until it serves; it is stopped with SIGTERM when
// the test ends.
func startServer(t testing.TB, bin, dir string, args ...string) *server {
	t.Helper()
	writeEnvironments(t, dir, "alpha-k8s")
	all := append([]string{"serve", "--role", "provisioning", "--listen", "127.0.0.1:0", "--admin-listen=", "--keys-file", "keys.yaml",
		"--environments-file", "environments.yaml", "--waldur-instance", "https://waldur.example.org", "--log-format", "json"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{}
	addr, exited := make(chan string, 1), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs = append(s.logs, line)
			s.mu.Unlock()
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving API" {
				addr <- entry.Addr
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			// Not checked: a SIGTERM that arrives before `metallo serve`
			// installs its signal handler (right after start) ends the
			// process by default.
			_ = err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("server did not stop on SIGTERM; logs:\n%s", strings.Join(s.log(), "\n"))
		}
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case err := <-exited:
		t.Fatalf("server exited: %v\n%s", err, strings.Join(s.log(), "\n"))
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not start:\n%s", strings.Join(s.log(), "\n"))
	}
	return s
}

// writeEnvironments writes dir/environments.yaml, unless there is one, with
// the environments ids at Site alpha (their Runtime keys are never used
// here).
func writeEnvironments(t testing.TB, dir string, ids ...string) {
	t.Helper()
	path := filepath.Join(dir, "environments.yaml")
	if _, err := os.Stat(path); err == nil {
		return
	}
	body := "environments:\n"
	for i, id := range ids {
		body += fmt.Sprintf("  - {id: %s, site: alpha, authority: 'https://metallo.example.org', auth: {key_sha256: '%064x'}}\n", id, i+1)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

type problem struct {
	Status int
	Reason string
	Detail string
	Errors []struct{ Location, Message string }
}

// do sends a request and decodes a JSON answer into out (when not nil).
func do(t *testing.T, method, url, key, contentType string, body []byte, out any) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
	}
	return resp.StatusCode, resp.Header, raw
}

func postJSON(t *testing.T, url, key string, body any, out any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	code, _, raw := do(t, http.MethodPost, url, key, "application/json", b, out)
	return code, raw
}

type allocation struct {
	ID                 string           `json:"id"`
	ProjectID          string           `json:"project_id"`
	ProviderResourceID string           `json:"provider_resource_id"`
	Lifecycle          string           `json:"lifecycle"`
	Reasons            []string         `json:"reasons"`
	ConfiguredLimits   map[string]int64 `json:"configured_limits"`
	AppliedLimits      map[string]int64 `json:"applied_limits"`
	Revision           int64            `json:"revision"`
	LastSeenAt         time.Time        `json:"last_seen_at"`
	Fresh              bool             `json:"fresh"`
}

// snapshot reads every allocation through the paginated snapshot.
func snapshot(t *testing.T, base, key string) map[string]allocation {
	t.Helper()
	out := map[string]allocation{}
	cursor := ""
	for {
		var page struct {
			Allocations []allocation `json:"allocations"`
			NextCursor  string       `json:"next_cursor"`
		}
		if code, _, raw := do(t, http.MethodGet, base+"/resource-provisioning/allocations?limit=2&cursor="+cursor, key, "", nil, &page); code != http.StatusOK {
			t.Fatalf("snapshot: %d %s", code, raw)
		}
		for _, a := range page.Allocations {
			out[a.ProviderResourceID] = a
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

func countChanges(t *testing.T, base, key string) int {
	t.Helper()
	var feed struct {
		Changes []json.RawMessage `json:"changes"`
	}
	if code, _, raw := do(t, http.MethodGet, base+"/resource-provisioning/changes?limit=1000", key, "", nil, &feed); code != http.StatusOK {
		t.Fatalf("changes: %d %s", code, raw)
	}
	return len(feed.Changes)
}

// caseRecords reads the realistic Waldur records of the waldur adaptor's
// testdata.
func caseRecords(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile("adaptors/waldur/testdata/waldur-resources.json")
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// projectOf is the canonical Project (a lower-case UUID, as Beto issues
// it) of a case record's Waldur Project.
func projectOf(name string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("project/"+name)).String()
}

func testWaldurCases(t *testing.T, bin string) {
	dir := t.TempDir()
	keys := keysFor(t, bin, dir, "site:alpha", "service:beto", "service:execution")
	srv := startServer(t, bin, dir, "--migrate", "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "p.sqlite"))
	siteKey := filepath.Join(dir, "site.key")
	if err := os.WriteFile(siteKey, []byte(keys["site:alpha"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := caseRecords(t)
	all := writeJSON(t, filepath.Join(dir, "all.json"), recs)
	exe := keys["service:execution"]
	cli := func(file, at string) (string, string, error) {
		return run(t, bin, dir, "provisioning", "waldur-report", "--site", "alpha", "--resource", file, "--post", srv.base, "--key-file", siteKey, "--observed-at", at)
	}
	outcomes := func(out string) []string {
		var res struct {
			Results []struct{ Outcome string } `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("CLI output %q: %v", out, err)
		}
		var o []string
		for _, r := range res.Results {
			o = append(o, r.Outcome)
		}
		return o
	}
	byName := func(s map[string]allocation) map[string]allocation {
		out := map[string]allocation{}
		for _, r := range recs {
			out[r["name"].(string)] = s[r["uuid"].(string)]
		}
		return out
	}

	// Reported before any ProjectChanged: the Projects are unbound. This
	// time the CLI only maps (no --post) and the body goes to the HTTP API
	// as it is.
	body, stderr, err := run(t, bin, dir, "provisioning", "waldur-report", "--site", "alpha", "--resource", all, "--observed-at", "2026-08-20T10:20:00Z")
	if err != nil {
		t.Fatalf("map: %v %s", err, stderr)
	}
	code, _, raw := do(t, http.MethodPost, srv.base+"/resource-provisioning/alpha/reports", keys["site:alpha"], "application/json", []byte(body), nil)
	if code != http.StatusOK || !slices.Equal(outcomes(string(raw)), []string{"created", "created", "created", "created", "created"}) {
		t.Fatalf("first post: %d %s", code, raw)
	}
	s := byName(snapshot(t, srv.base, exe))
	if a := s["alpha-gpu-ns"]; a.Lifecycle != "pending" || !slices.Equal(a.Reasons, []string{"project_unbound"}) || a.ProjectID != "" {
		t.Fatalf("alpha before its ProjectChanged: %+v", a)
	}
	for _, r := range recs {
		ev := map[string]any{
			"event_id": "ev-" + r["name"].(string), "type": "project.ProjectChanged", "occurred_at": "2026-08-20T10:00:00Z",
			"project": map[string]any{"id": projectOf(r["name"].(string)), "revision": 1, "state": "active",
				"provider_bindings": []map[string]any{{"provider": "waldur", "instance": "https://waldur.example.org", "external_id": r["project_uuid"]}}},
		}
		if code, raw := postJSON(t, srv.base+"/resource-provisioning/events/beto", keys["service:beto"], ev, nil); code != http.StatusOK || !strings.Contains(string(raw), `"applied"`) {
			t.Fatalf("event: %d %s", code, raw)
		}
	}
	if a := byName(snapshot(t, srv.base, exe))["alpha-gpu-ns"]; a.Lifecycle != "pending" || a.Revision != 1 {
		t.Fatalf("an event rewrote an allocation: %+v", a)
	}

	// The next reports resolve the Projects: the README's lifecycles.
	if out, stderr, err := cli(all, "2026-08-20T10:25:00Z"); err != nil || !slices.Equal(outcomes(out), []string{"changed", "changed", "changed", "changed", "changed"}) {
		t.Fatalf("second post: %v %s %s", err, out, stderr)
	}
	var mine struct{ Allocations []allocation }
	if code, _, raw := do(t, http.MethodGet, srv.base+"/resource-provisioning/projects/"+projectOf("alpha-gpu-ns")+"/allocations?site=alpha", exe, "", nil, &mine); code != http.StatusOK || len(mine.Allocations) != 1 {
		t.Fatalf("project allocations: %d %s", code, raw)
	}
	if a := mine.Allocations[0]; a.Lifecycle != "ready" || !a.Fresh || a.AppliedLimits["cpu"] != 32000 || a.AppliedLimits["gpu.nvidia"] != 2 || a.AppliedLimits["memory"] != 128<<30 {
		t.Fatalf("alpha: %+v", a)
	}
	s = byName(snapshot(t, srv.base, exe))
	if a := s["beta-cpu-ns"]; a.Lifecycle != "pending" || !slices.Equal(a.Reasons, []string{"provisioning", "limits_not_applied"}) || a.AppliedLimits != nil {
		t.Fatalf("beta: %+v", a)
	}
	if a := s["gamma-ns"]; a.Lifecycle != "changing" || a.AppliedLimits["cpu"] != 32000 || a.ConfiguredLimits["cpu"] != 64000 {
		t.Fatalf("gamma: %+v", a)
	}
	if a := s["delta-ns"]; a.Lifecycle != "suspended" {
		t.Fatalf("delta: %+v", a)
	}
	if a := s["epsilon-ns"]; a.Lifecycle != "retired" {
		t.Fatalf("epsilon: %+v", a)
	}

	// Renewal, duplicate, stale: one record read again.
	alpha := writeJSON(t, filepath.Join(dir, "alpha.json"), recs[0])
	before := s["alpha-gpu-ns"]
	if out, _, err := cli(alpha, "2026-08-20T10:30:00Z"); err != nil || !slices.Equal(outcomes(out), []string{"renewed"}) {
		t.Fatalf("renewal: %v %s", err, out)
	}
	renewed := byName(snapshot(t, srv.base, exe))["alpha-gpu-ns"]
	if renewed.Revision != before.Revision || !renewed.LastSeenAt.After(before.LastSeenAt) {
		t.Fatalf("a renewal moves only last_seen_at: before %+v after %+v", before, renewed)
	}
	if out, _, err := cli(alpha, "2026-08-20T10:30:00Z"); err != nil || !slices.Equal(outcomes(out), []string{"duplicate"}) {
		t.Fatalf("duplicate: %v %s", err, out)
	}
	if again := byName(snapshot(t, srv.base, exe))["alpha-gpu-ns"]; !again.LastSeenAt.Equal(renewed.LastSeenAt) || again.Revision != renewed.Revision {
		t.Fatalf("a duplicate moved something: %+v", again)
	}
	if _, stderr, err := cli(alpha, "2026-08-20T10:21:00Z"); err == nil || !strings.Contains(stderr, "409") || !strings.Contains(stderr, "stale_report") {
		t.Fatalf("an older report must be stale_report: %v %s", err, stderr)
	}

	// A later OK report for the retired resource is refused.
	eps := recs[4]
	eps["state"] = "OK"
	if _, stderr, err := cli(writeJSON(t, filepath.Join(dir, "eps.json"), eps), "2026-08-20T11:00:00Z"); err == nil || !strings.Contains(stderr, "allocation_retired") {
		t.Fatalf("a later OK report after Terminated: %v %s", err, stderr)
	}
	if n := countChanges(t, srv.base, exe); n != 10 {
		t.Fatalf("changes %d, want 10 (5 created + 5 changed)", n)
	}
}

func testTwoProcesses(t *testing.T, bin string) {
	dir := t.TempDir()
	keys := keysFor(t, bin, dir, "site:alpha", "service:execution")
	url := dbtest.NewPostgres(t)
	a := startServer(t, bin, dir, "--migrate", "--provisioning-database-url", url)
	b := startServer(t, bin, dir, "--migrate", "--provisioning-database-url", url)
	const agents, steps = 32, 12
	t0 := time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)
	var (
		mu       sync.Mutex
		material int
		stale    int
		bad      []string
		wg       sync.WaitGroup
		clock    atomic.Int64 // the agents' shared clock: mostly increasing arrivals, with races
	)
	for agent := range agents {
		base := a.base
		if agent%2 == 1 {
			base = b.base
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range steps {
				n := clock.Add(1)
				body := map[string]any{"reports": []map[string]any{{
					"provider_resource_id": "shared", "offering_id": "o", "provider_project_id": "pp", "state": "OK", "paused": false,
					"limits": map[string]int64{"cpu": 4000}, "applied_limits": map[string]int64{"cpu": (n%3 + 2) * 1000},
					"observed_at": t0.Add(time.Duration(n) * time.Millisecond),
				}}}
				var res struct {
					Results []struct{ Outcome string } `json:"results"`
				}
				code, raw := postJSON(t, base+"/resource-provisioning/alpha/reports", keys["site:alpha"], body, &res)
				mu.Lock()
				switch {
				case code == http.StatusOK && (res.Results[0].Outcome == "created" || res.Results[0].Outcome == "changed"):
					material++
				case code == http.StatusOK:
				case code == http.StatusConflict && strings.Contains(string(raw), `"reason":"stale_report"`):
					stale++
				default:
					bad = append(bad, fmt.Sprintf("%d %s", code, raw))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d unexpected answers (none may be 5xx), e.g. %s", len(bad), bad[0])
	}
	got := snapshot(t, a.base, keys["service:execution"])["shared"]
	if got.Revision != int64(material) {
		t.Fatalf("revision %d, but %d reports were answered created/changed (%d stale): a lost update", got.Revision, material, stale)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var receipts, positioned, maxRev int64
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM allocation_receipts), (SELECT count(position) FROM changes), (SELECT coalesce(max(revision), 0) FROM changes)`).Scan(&receipts, &positioned, &maxRev); err != nil {
		t.Fatal(err)
	}
	if receipts != int64(material) || positioned != int64(material) || maxRev != int64(material) {
		t.Fatalf("receipts %d, changes with a feed position %d, newest change revision %d; want %d each", receipts, positioned, maxRev, material)
	}
	t.Logf("%d reports from %d agents on 2 processes: %d material, %d stale, final revision %d", agents*steps, agents, material, stale, got.Revision)
}

func testBadInput(t *testing.T, bin string) {
	dir := t.TempDir()
	keys := keysFor(t, bin, dir, "site:alpha", "site:beta", "service:beto", "service:execution")
	url := dbtest.NewPostgres(t)
	srv := startServer(t, bin, dir, "--migrate", "--provisioning-database-url", url)
	reports := srv.base + "/resource-provisioning/alpha/reports"
	events := srv.base + "/resource-provisioning/events/beto"
	good := `{"provider_resource_id":"r1","offering_id":"o","provider_project_id":"pp","state":"OK","paused":false,"limits":{"cpu":1000},"observed_at":"2026-08-20T10:00:00Z"`
	many := strings.Repeat(good+"},", 100) + good + "}"
	huge := `{"reports":[` + good + `,"native_scope":"` + strings.Repeat("x", 1<<20) + `"}]}`
	alpha := keys["site:alpha"]
	for _, c := range []struct {
		name, url, key, body string
		status               int
		location             string
	}{
		{"malformed JSON", reports, alpha, `{"reports":[` + good, 400, ""},
		{"not JSON at all", reports, alpha, `reports=1`, 400, ""},
		{"unknown top-level field", reports, alpha, `{"reports":[` + good + `}],"extra":1}`, 422, "body.extra"},
		{"unknown report field", reports, alpha, `{"reports":[` + good + `,"colour":"red"}]}`, 422, "body.reports[0].colour"},
		{"negative limit", reports, alpha, `{"reports":[` + strings.Replace(good, `"cpu":1000`, `"cpu":-1`, 1) + `}]}`, 422, "body.reports[0].limits.cpu"},
		{"negative applied limit", reports, alpha, `{"reports":[` + good + `,"applied_limits":{"memory":-5}}]}`, 422, "body.reports[0].applied_limits.memory"},
		{"unknown limit key", reports, alpha, `{"reports":[` + strings.Replace(good, `"cpu":1000`, `"ram":16`, 1) + `}]}`, 422, "body.reports[0].limits.ram"},
		{"limit in the wrong unit type", reports, alpha, `{"reports":[` + strings.Replace(good, `"cpu":1000`, `"cpu":"1"`, 1) + `}]}`, 422, ""},
		{"a NUL byte in an identifier", reports, alpha, `{"reports":[` + strings.Replace(good, `"r1"`, `"r\u0000"`, 1) + `}]}`, 422, "body.reports[0].provider_resource_id"},
		{"a NUL byte in an event", events, keys["service:beto"], `{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d","revision":1,"state":"act\u0000ive","provider_bindings":[]}}`, 422, "body.project.state"},
		{"unknown Waldur state", reports, alpha, `{"reports":[` + strings.Replace(good, `"OK"`, `"Running"`, 1) + `}]}`, 422, ""},
		{"bad observed_at", reports, alpha, `{"reports":[` + strings.Replace(good, `2026-08-20T10:00:00Z`, `yesterday`, 1) + `}]}`, 422, ""},
		{"no reports", reports, alpha, `{"reports":[]}`, 422, ""},
		{"101 reports", reports, alpha, `{"reports":[` + many + `]}`, 422, ""},
		{"body over 1 MiB", reports, alpha, huge, 413, ""},
		{"no key", reports, "", `{"reports":[` + good + `}]}`, 401, ""},
		{"wrong key", reports, "mtl_not-a-key", `{"reports":[` + good + `}]}`, 401, ""},
		{"another Site's key", reports, keys["site:beta"], `{"reports":[` + good + `}]}`, 403, ""},
		{"a service key", reports, keys["service:execution"], `{"reports":[` + good + `}]}`, 403, ""},
		{"unknown event type", events, keys["service:beto"], `{"event_id":"e1","type":"project.ProjectDeleted","occurred_at":"2026-08-20T10:00:00Z"}`, 422, "body.type"},
		{"event from a Site key", events, alpha, `{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"p","revision":1,"state":"active","provider_bindings":[]}}`, 403, ""},
		{"event over 1 MiB", events, keys["service:beto"], `{"event_id":"` + strings.Repeat("e", 1<<20+1) + `"}`, 413, ""},
		{"reads need a service key", srv.base + "/resource-provisioning/allocations", alpha, "", 403, ""},
		{"a forged cursor", srv.base + "/resource-provisioning/changes?after=bm9wZQ", keys["service:execution"], "", 400, ""},
		{"a cursor beyond the feed head", srv.base + "/resource-provisioning/changes?after=YzE6OQ", keys["service:execution"], "", 400, ""},
		{"a limit named twice", reports, alpha, `{"reports":[` + strings.Replace(good, `"cpu":1000`, `"cpu":1000,"cpu":2000`, 1) + `}]}`, 400, "body.reports[0].limits.cpu"},
		{"invalid UTF-8", reports, alpha, `{"reports":[` + strings.Replace(good, `"r1"`, "\"r\xff\"", 1) + `}]}`, 400, ""},
		{"a null flag", reports, alpha, `{"reports":[` + strings.Replace(good, `"paused":false`, `"paused":null`, 1) + `}]}`, 422, "body.reports[0].paused"},
		{"observed_at beyond the clock skew", reports, alpha, `{"reports":[` + strings.Replace(good, `2026-08-20T10:00:00Z`, `2099-01-01T00:00:00Z`, 1) + `}]}`, 422, "body.reports[0].observed_at"},
		{"another Site's key with an invalid body", reports, keys["site:beta"], `{"reports":[` + strings.Replace(good, `"paused":false`, `"paused":null`, 1) + `}]}`, 403, ""},
		{"a Site key with an invalid event", events, alpha, `{"event_id":null}`, 403, ""},
		{"a project ID that is not a UUID", srv.base + "/resource-provisioning/projects/project-a/allocations", keys["service:execution"], "", 422, "path.project"},
		{"an event's project ID that is not a UUID", events, keys["service:beto"], `{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"p","revision":1,"state":"active","provider_bindings":[]}}`, 422, "body.project.id"},
	} {
		method := http.MethodPost
		if c.body == "" {
			method = http.MethodGet
		}
		ct := "application/json"
		if c.name == "not JSON at all" {
			ct = "application/x-www-form-urlencoded"
		}
		code, hdr, raw := do(t, method, c.url, c.key, ct, []byte(c.body), nil)
		if code/100 != 4 {
			t.Errorf("%s: %d %s, want a 4xx", c.name, code, raw)
			continue
		}
		if code != c.status && (c.status != 400 || code != 415) {
			t.Errorf("%s: %d, want %d (%s)", c.name, code, c.status, raw)
		}
		var p problem
		if !strings.HasPrefix(hdr.Get("Content-Type"), "application/problem+json") || json.Unmarshal(raw, &p) != nil || p.Status != code || p.Reason == "" {
			t.Errorf("%s: not a problem document with a reason: %s %s", c.name, hdr.Get("Content-Type"), raw)
		}
		if c.location != "" && !slices.ContainsFunc(p.Errors, func(e struct{ Location, Message string }) bool { return e.Location == c.location }) {
			t.Errorf("%s: no error at %s: %s", c.name, c.location, raw)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int64
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM allocations) + (SELECT count(*) FROM allocation_receipts) + (SELECT count(*) FROM changes) + (SELECT count(*) FROM beto_event_receipts) + (SELECT count(*) FROM projects)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("refused input stored %d rows", n)
	}
	for _, line := range srv.log() {
		if strings.Contains(line, `"level":"error"`) {
			t.Errorf("bad input logged an error: %s", line)
		}
	}
}

func testEmbeddedDefault(t *testing.T, bin string) {
	dir := t.TempDir()
	keysFor(t, bin, dir, "site:alpha")
	srv := startServer(t, bin, dir, "--migrate")
	logs := srv.log()
	if len(logs) == 0 || !strings.Contains(logs[0], "using the embedded default SQLite ./var/provisioning.sqlite") {
		t.Fatalf("first log line %q", logs[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "var", "provisioning.sqlite")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/docs", "/readyz"} {
		if code, _, raw := do(t, http.MethodGet, srv.base+path, "", "", nil, nil); code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, raw)
		}
	}
}

func testPendingMigrations(t *testing.T, bin string) {
	dir := t.TempDir()
	keysFor(t, bin, dir, "site:alpha")
	writeEnvironments(t, dir, "alpha-k8s")
	_, stderr, err := run(t, bin, dir, "serve", "--role", "provisioning", "--listen", "127.0.0.1:0", "--admin-listen=", "--keys-file", "keys.yaml",
		"--environments-file", "environments.yaml", "--waldur-instance", "https://waldur.example.org", "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "p.sqlite"))
	if err == nil || !strings.Contains(stderr, "pending migrations") || !strings.Contains(stderr, "--migrate") {
		t.Fatalf("want a clear refusal, got %v:\n%s", err, stderr)
	}
	if _, stderr, err := run(t, bin, dir, "migrate", "--role", "provisioning", "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "p.sqlite")); err != nil {
		t.Fatalf("metallo migrate: %v %s", err, stderr)
	}
	startServer(t, bin, dir, "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "p.sqlite"))
}

func testDroppedDatabase(t *testing.T, bin string) {
	dir := t.TempDir()
	keys := keysFor(t, bin, dir, "site:alpha", "service:beto", "service:execution")
	url := dbtest.NewPostgres(t)
	srv := startServer(t, bin, dir, "--migrate", "--provisioning-database-url", url)
	const project = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	report := func(r string) []byte {
		return []byte(`{"reports":[{"provider_resource_id":"` + r + `","offering_id":"o","provider_project_id":"pp","state":"OK","paused":false,"limits":{"cpu":1000},"observed_at":"2026-08-20T10:00:00Z"}]}`)
	}
	event := []byte(`{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"` + project + `","revision":1,"state":"active","provider_bindings":[]}}`)
	if code, _, raw := do(t, http.MethodPost, srv.base+"/resource-provisioning/alpha/reports", keys["site:alpha"], "application/json", report("r1"), nil); code != http.StatusOK {
		t.Fatalf("report: %d %s", code, raw)
	}
	if code, _, raw := do(t, http.MethodGet, srv.base+"/readyz", "", "", nil, nil); code != http.StatusOK {
		t.Fatalf("/readyz: %d %s", code, raw)
	}

	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(t.Context(), dbtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(t.Context(), "DROP DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close(context.Background())

	leaks := []string{cfg.Database, cfg.Host, cfg.User, "SQLSTATE", "postgres", "3D000"}
	exec := keys["service:execution"]
	for _, c := range []struct {
		method, path, key string
		body              []byte
	}{
		{http.MethodPost, "/resource-provisioning/alpha/reports", keys["site:alpha"], report("r2")},
		{http.MethodPost, "/resource-provisioning/events/beto", keys["service:beto"], event},
		{http.MethodGet, "/resource-provisioning/allocations", exec, nil},
		{http.MethodGet, "/resource-provisioning/changes", exec, nil},
		{http.MethodGet, "/resource-provisioning/project-binding-conflicts", exec, nil},
		{http.MethodGet, "/resource-provisioning/projects/" + project + "/allocations", exec, nil},
	} {
		ct := ""
		if c.body != nil {
			ct = "application/json"
		}
		var p problem
		code, hdr, raw := do(t, c.method, srv.base+c.path, c.key, ct, c.body, nil)
		_ = json.Unmarshal(raw, &p)
		if code != http.StatusServiceUnavailable || p.Reason != "unavailable" {
			t.Errorf("%s %s with the database dropped: %d %s, want 503 unavailable", c.method, c.path, code, raw)
		}
		if hdr.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", c.method, c.path)
		}
		for _, l := range leaks {
			if strings.Contains(string(raw), l) {
				t.Errorf("%s %s: the problem leaks %q: %s", c.method, c.path, l, raw)
			}
		}
	}
	code, _, raw := do(t, http.MethodGet, srv.base+"/readyz", "", "", nil, nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(raw), "resource_provisioning database: not ") {
		t.Fatalf("/readyz with the database dropped: %d %s", code, raw)
	}
	for _, l := range leaks {
		if strings.Contains(string(raw), l) {
			t.Errorf("/readyz leaks %q: %s", l, raw)
		}
	}
	// The cause is in the log, for the operator.
	if !slices.ContainsFunc(srv.log(), func(line string) bool { return strings.Contains(line, "3D000") }) {
		t.Errorf("no log line carries the driver's cause:\n%s", strings.Join(srv.log(), "\n"))
	}
	for _, line := range srv.log() {
		if strings.Contains(line, `"level":"error"`) {
			t.Errorf("an unavailable database logged an error (500 path): %s", line)
		}
	}
}
