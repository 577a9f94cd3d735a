package app

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	rphttp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/waldur"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/servingtls"
)

// configured returns r with its flags parsed from args.
func configured(t testing.TB, r Role, args ...string) Role {
	t.Helper()
	fs := pflag.NewFlagSet(r.Name, pflag.ContinueOnError)
	r.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return r
}

// provisioningOwner is the provisioning role started alone, as the
// resource owner an execution role reads over HTTP.
type provisioningOwner struct {
	app *fxtest.App
	srv *httpserver.Server
	// keyFile holds the service key of the files the role was started
	// with (for --provisioning-key-file).
	keyFile string
}

// startProvisioningOwner starts the provisioning role on SQLite in dir,
// with the keys of files, the clock clk and the further flags args, and
// writes files' service key to dir/provisioning.key. The caller stops it.
func startProvisioningOwner(t *testing.T, dir string, files executiontest.Files, clk clock.Clock, args ...string) provisioningOwner {
	t.Helper()
	return startProvisioningOwnerOver(t, dir, files, clk, servingtls.Files{}, args...)
}

// startProvisioningOwnerOver is startProvisioningOwner serving the serving
// pair pair (none: plain HTTP).
func startProvisioningOwnerOver(t *testing.T, dir string, files executiontest.Files, clk clock.Clock, pair servingtls.Files, args ...string) provisioningOwner {
	t.Helper()
	p := provisioningOwner{keyFile: filepath.Join(dir, "provisioning.key")}
	args = append([]string{"--provisioning-database-url", "sqlite:" + filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance}, args...)
	p.app = fxtest.New(t,
		Compose([]Role{configured(t, ProvisioningRole(), args...)},
			Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true, TLS: pair}, zaptest.NewLogger(t)),
		fx.Decorate(func(clock.Clock) clock.Clock { return clk }),
		fx.Populate(&p.srv),
	)
	p.app.RequireStart()
	if err := os.WriteFile(p.keyFile, []byte(files.ServiceKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// planningProcess is `serve --role provisioning,execution` composed in this
// test process (so its clock can be injected) on SQLite files, with the
// execution role reading its owner in process.
type planningProcess struct {
	executiontest.Client
	files executiontest.Files
	clock *clock.Manual
}

const waldurInstance = "https://waldur.example.org"

func startPlanningProcess(t *testing.T, start time.Time) *planningProcess {
	t.Helper()
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
			"--resource-owner", "in-process"),
	}
	p := &planningProcess{files: files, clock: clock.NewManual(start)}
	var srv *httpserver.Server
	app := fxtest.New(t,
		Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Decorate(func(clock.Clock) clock.Clock { return p.clock }),
		fx.Populate(&srv),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	p.Base = "http://" + srv.Addr()
	return p
}

// projectChanged binds canonical project to the Waldur provider Project.
func (p *planningProcess) projectChanged(t *testing.T, project, providerProject string) {
	t.Helper()
	ev := map[string]any{
		"event_id": "ev-" + project, "type": "project.ProjectChanged", "occurred_at": "2026-08-20T10:00:00Z",
		"project": map[string]any{"id": project, "revision": 1, "state": "active",
			"provider_bindings": []map[string]any{{"provider": "waldur", "instance": waldurInstance, "external_id": providerProject}}},
	}
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	executiontest.Want(t, p.Call(t, http.MethodPost, "/resource-provisioning/events/beto", p.files.ExtraKeys["service:beto"], "", body), http.StatusOK, "")
}

// report posts reports (the Site agent's request body) as site alpha.
func (p *planningProcess) report(t *testing.T, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	executiontest.Want(t, p.Call(t, http.MethodPost, "/resource-provisioning/alpha/reports", p.files.ExtraKeys["site:alpha"], "", b), http.StatusOK, "")
}

// planAnswer is the plan route's answer.
type planAnswer struct {
	Answer           string           `json:"answer"`
	Reason           string           `json:"reason"`
	Site             string           `json:"site"`
	AllocationID     string           `json:"allocation_id"`
	Candidates       []string         `json:"candidates"`
	LifecycleReasons []string         `json:"lifecycle_reasons"`
	TooLarge         []excess         `json:"too_large"`
	Limits           map[string]int64 `json:"limits"`
}

type excess struct {
	Resource string `json:"resource"`
	Unit     string `json:"unit"`
	Demand   int64  `json:"demand"`
	Limit    int64  `json:"limit"`
}

func (p *planningProcess) plan(t *testing.T, project string, demand map[string]int64) planAnswer {
	t.Helper()
	b, err := json.Marshal(map[string]any{"project": project, "environment": "alpha-k8s", "demand": demand})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Call(t, http.MethodPost, "/execution/v1/plans", p.files.ServiceKey, "", b)
	executiontest.Want(t, r, http.StatusOK, "")
	return executiontest.Decode[planAnswer](t, r)
}

func canonicalProject(n int) string { return fmt.Sprintf("7a1e4c2b-1d3f-4a5b-9c8d-%012x", n) }

const gib = int64(1) << 30

// TestPlanningOverTheWaldurCases drives the provisioning role's real API
// (Beto ProjectChanged events, the Site agent's reports mapped from the
// Waldur records in testdata) and plans through the execution role in the same
// process, reading its owner in process, with an injected clock.
func TestPlanningOverTheWaldurCases(t *testing.T) {
	observed := time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC)
	p := startPlanningProcess(t, observed)
	raw, err := os.ReadFile("../contexts/resourceprovisioning/adaptors/waldur/testdata/waldur-resources.json")
	if err != nil {
		t.Fatal(err)
	}
	records, err := waldur.ParseResources(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Two more ready resources of one more Project: ambiguous at alpha-k8s.
	var recs []map[string]any
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatal(err)
	}
	for i, uuid := range []string{"aa000000000040000000000000000001", "aa000000000040000000000000000002"} {
		twin := maps.Clone(recs[0])
		twin["uuid"], twin["name"], twin["project_uuid"] = uuid, fmt.Sprintf("zeta-%d", i), "5f6a7b8c9d0e40718293a4b5c6d7e8f4"
		b, _ := json.Marshal(twin)
		more, err := waldur.ParseResources(b)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, more...)
	}
	projects := map[string]string{} // record name → canonical Project
	for i, r := range append(recs[:5:5], map[string]any{"name": "zeta", "project_uuid": "5f6a7b8c9d0e40718293a4b5c6d7e8f4"}) {
		projects[r["name"].(string)] = canonicalProject(i + 1)
		p.projectChanged(t, canonicalProject(i+1), r["project_uuid"].(string))
	}
	reports, err := waldur.Reports(records, waldur.Options{ObservedAt: observed})
	if err != nil {
		t.Fatal(err)
	}
	p.report(t, rphttp.NewReportsRequest(reports))

	alpha := projects["alpha-gpu-ns"]
	if a := p.plan(t, alpha, map[string]int64{"cpu": 32000, "memory": 128 * gib, "gpu.nvidia": 2}); a.Answer != "admissible" || a.Site != "alpha" || a.Limits["cpu"] != 32000 {
		t.Fatalf("alpha, 32 cores / 128 GiB / 2 GPUs: %+v", a)
	}
	a := p.plan(t, alpha, map[string]int64{"cpu": 33000})
	if a.Answer != "refused" || a.Reason != "too_large" || !reflect.DeepEqual(a.TooLarge, []excess{{Resource: "cpu", Unit: "cores", Demand: 33, Limit: 32}}) {
		t.Fatalf("alpha, 33 cores: %+v", a)
	}
	if a := p.plan(t, alpha, map[string]int64{"cpu": 1000, "gpu.amd": 1}); a.Reason != "too_large" || !reflect.DeepEqual(a.TooLarge, []excess{{Resource: "gpu.amd", Unit: "devices", Demand: 1, Limit: 0}}) {
		t.Fatalf("alpha, a GPU vendor it has no limit for: %+v", a)
	}

	gamma := projects["gamma-ns"]
	if a := p.plan(t, gamma, map[string]int64{"cpu": 32000}); a.Answer != "admissible" || a.Limits["cpu"] != 32000 {
		t.Fatalf("gamma (changing), 32 cores against the applied 32: %+v", a)
	}
	if a := p.plan(t, gamma, map[string]int64{"cpu": 33000}); a.Reason != "too_large" || a.TooLarge[0].Limit != 32 {
		t.Fatalf("gamma (changing) plans against the applied 32 cores, not the configured 64: %+v", a)
	}
	if a := p.plan(t, projects["delta-ns"], map[string]int64{"cpu": 1000}); a.Answer != "refused" || a.Reason != "resource_suspended" {
		t.Fatalf("delta (suspended): %+v", a)
	}
	if a := p.plan(t, projects["beta-cpu-ns"], map[string]int64{"cpu": 1000}); a.Answer != "refused" || a.Reason != "not_ready" ||
		!slices.Equal(a.LifecycleReasons, []string{"limits_not_applied", "provisioning"}) {
		t.Fatalf("beta (pending): %+v", a)
	}
	if a := p.plan(t, projects["epsilon-ns"], map[string]int64{"cpu": 1000}); a.Reason != "no_allocation" {
		t.Fatalf("epsilon (retired): %+v", a)
	}
	if a := p.plan(t, canonicalProject(99), map[string]int64{"cpu": 1000}); a.Reason != "no_allocation" {
		t.Fatalf("a Project without allocations: %+v", a)
	}
	if a := p.plan(t, projects["zeta"], map[string]int64{"cpu": 1000}); a.Reason != "resource_ambiguous" || len(a.Candidates) != 2 {
		t.Fatalf("two ready allocations at one environment: %+v", a)
	}

	// Unseen for 16 minutes: stale evidence is not ready.
	p.clock.Advance(16 * time.Minute)
	if a := p.plan(t, alpha, map[string]int64{"cpu": 1000}); a.Answer != "refused" || a.Reason != "not_ready" || !slices.Contains(a.LifecycleReasons, "stale") {
		t.Fatalf("alpha unseen for 16 minutes: %+v", a)
	}
}

// expectedPlan is the capacity rule computed directly
// (docs/execution-ports.md#planning-arithmetic): CPU limit rounded down and demand rounded up to whole cores, every
// other key exact, a missing limit 0.
func expectedPlan(limits, demand map[string]int64) (string, []excess) {
	var out []excess
	for k, d := range demand {
		l := limits[k]
		switch {
		case k == "cpu":
			dc, lc := d/1000, l/1000
			if d%1000 != 0 {
				dc++
			}
			if dc > lc {
				out = append(out, excess{Resource: k, Unit: "cores", Demand: dc, Limit: lc})
			}
		case d > l:
			unit := "bytes"
			if k != "memory" && k != "storage" {
				unit = "devices"
			}
			out = append(out, excess{Resource: k, Unit: unit, Demand: d, Limit: l})
		}
	}
	slices.SortFunc(out, func(a, b excess) int {
		if a.Resource < b.Resource {
			return -1
		}
		return 1
	})
	if len(out) == 0 {
		return "admissible", nil
	}
	return "refused", out
}

// TestPlanningMatchesTheCapacityRuleOverRandomLimitsAndDemands posts random
// applied limits for one ready allocation through the provisioning role's
// API and plans random demands, many near the limits, through HTTP; every
// answer must equal the rule computed directly.
func TestPlanningMatchesTheCapacityRuleOverRandomLimitsAndDemands(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)
	p := startPlanningProcess(t, start)
	project := canonicalProject(1)
	p.projectChanged(t, project, "0a1b2c3d4e5f40718293a4b5c6d7e8f9")
	// near draws a demand for limit l: half the time anything that fits,
	// otherwise at the boundary (±1, or within a core) where rounding
	// decides.
	near := func(l int64) int64 {
		switch rng.IntN(6) {
		case 0:
			return max(0, l+int64(rng.IntN(2001))-1000)
		case 1:
			return max(0, l+int64(rng.IntN(3))-1)
		case 2:
			return l
		}
		return rng.Int64N(l + 1)
	}
	for i := range 150 {
		limits := map[string]int64{"cpu": 1 + rng.Int64N(128_000), "memory": 1 + rng.Int64N(512*gib), "storage": 1 + rng.Int64N(1024*gib)}
		if rng.IntN(2) == 0 {
			limits["gpu.nvidia"] = rng.Int64N(9)
		}
		observed := start.Add(time.Duration(i+1) * time.Second)
		p.clock.Set(observed)
		p.report(t, map[string]any{"reports": []map[string]any{{
			"provider_resource_id": "3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50", "offering_id": "9b8e7d6c5b4a43219f8e7d6c5b4a3210",
			"provider_project_id": "0a1b2c3d4e5f40718293a4b5c6d7e8f9", "state": "OK", "paused": false,
			"limits": limits, "applied_limits": limits, "native_scope": "ns", "observed_at": observed.Format(time.RFC3339Nano),
		}}})
		demand := map[string]int64{}
		for _, k := range []string{"cpu", "memory", "storage", "gpu.nvidia", "gpu.amd"} {
			if rng.IntN(3) > 0 {
				demand[k] = near(limits[k])
			}
		}
		wantAnswer, wantExcess := expectedPlan(limits, demand)
		got := p.plan(t, project, demand)
		if got.Answer != wantAnswer || !reflect.DeepEqual(got.TooLarge, wantExcess) || (wantAnswer == "refused" && got.Reason != "too_large") {
			t.Fatalf("case %d: limits %v demand %v: got %+v, want %s %+v", i, limits, demand, got, wantAnswer, wantExcess)
		}
	}
}

// TestHTTPOwnerReadsTheProvisioningRoleLiveAndAnswersUnavailableWhenItIsGone
// runs the provisioning and execution roles as two apps: execution reads
// allocations over HTTP with its service key; once the provisioning role
// stops, planning answers unavailable, never a cached answer.
func TestHTTPOwnerReadsTheProvisioningRoleLiveAndAnswersUnavailableWhenItIsGone(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	clk := clock.NewManual(time.Date(2026, 8, 20, 10, 30, 0, 0, time.UTC))
	prov := startProvisioningOwner(t, dir, files, clk)
	provSrv, keyFile := prov.srv, prov.keyFile
	var execSrv *httpserver.Server
	exec := fxtest.New(t,
		Compose([]Role{configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
			"--resource-owner", "http", "--provisioning-url", "http://"+provSrv.Addr(), "--provisioning-key-file", keyFile)},
			Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Populate(&execSrv),
	)
	exec.RequireStart()
	defer exec.RequireStop()

	p := &planningProcess{Client: executiontest.Client{Base: "http://" + provSrv.Addr()}, files: files, clock: clk}
	project := canonicalProject(1)
	p.projectChanged(t, project, "0a1b2c3d4e5f40718293a4b5c6d7e8f9")
	limits := map[string]int64{"cpu": 32000, "memory": 128 * gib}
	p.report(t, map[string]any{"reports": []map[string]any{{
		"provider_resource_id": "3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50", "offering_id": "9b8e7d6c5b4a43219f8e7d6c5b4a3210",
		"provider_project_id": "0a1b2c3d4e5f40718293a4b5c6d7e8f9", "state": "OK", "paused": false,
		"limits": limits, "applied_limits": limits, "native_scope": "ns", "observed_at": "2026-08-20T10:30:00Z",
	}}})

	p.Base = "http://" + execSrv.Addr()
	if a := p.plan(t, project, map[string]int64{"cpu": 32000}); a.Answer != "admissible" {
		t.Fatalf("32 cores over HTTP: %+v", a)
	}
	if a := p.plan(t, project, map[string]int64{"cpu": 33000}); a.Reason != "too_large" {
		t.Fatalf("33 cores over HTTP: %+v", a)
	}
	clk.Advance(16 * time.Minute) // the owner judges freshness when execution reads
	if a := p.plan(t, project, map[string]int64{"cpu": 1000}); a.Reason != "not_ready" || !slices.Contains(a.LifecycleReasons, "stale") {
		t.Fatalf("unseen for 16 minutes over HTTP: %+v", a)
	}
	prov.app.RequireStop()
	if a := p.plan(t, project, map[string]int64{"cpu": 1000}); a.Answer != "unavailable" {
		t.Fatalf("owner gone: %+v", a)
	}
}
