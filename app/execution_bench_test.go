package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

const (
	planAllocations = 10_000
	planProjects    = 100
	planWorkers     = 8
	planEach        = 500
)

// BenchmarkPlanning measures plans/s and their p99 over HTTP with 10,000
// allocations in resource_provisioning on PostgreSQL (provisioning and
// execution in one process, the owner read in process), next to the
// owner's indexed read of a Project's allocations at a Site issued
// directly with pgx in the same run (8 concurrent clients each). Run with
// -benchtime=1x (make bench-execution).
func BenchmarkPlanning(b *testing.B) {
	provURL, execURL := dbtest.NewPostgres(b), dbtest.NewPostgres(b)
	dir := b.TempDir()
	files := executiontest.WriteFiles(b, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}}, "site:alpha", "service:beto")
	roles := []Role{
		configured(b, ProvisioningRole(), "--provisioning-database-url", provURL, "--waldur-instance", waldurInstance),
		configured(b, ExecutionRole(), "--execution-database-url", execURL, "--resource-owner", "in-process"),
	}
	var srv *httpserver.Server
	app := fxtest.New(b, Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zap.NewNop()), fx.Populate(&srv))
	app.RequireStart()
	b.Cleanup(app.RequireStop)
	c := executiontest.Client{Base: "http://" + srv.Addr(), HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * planWorkers}}}

	// 100 bound Projects with one ready allocation each; the other 9,900
	// allocations belong to provider Projects no event binds.
	observed := time.Now().UTC().Truncate(time.Second)
	for p := range planProjects {
		ev, _ := json.Marshal(map[string]any{
			"event_id": fmt.Sprintf("ev-%d", p), "type": "project.ProjectChanged", "occurred_at": "2026-08-20T10:00:00Z",
			"project": map[string]any{"id": canonicalProject(p), "revision": 1, "state": "active",
				"provider_bindings": []map[string]any{{"provider": "waldur", "instance": waldurInstance, "external_id": fmt.Sprintf("pp-%d", p)}}},
		})
		executiontest.Want(b, c.Call(b, http.MethodPost, "/resource-provisioning/events/beto", files.ExtraKeys["service:beto"], "", ev), http.StatusOK, "")
	}
	limits := map[string]int64{"cpu": 32000, "memory": 128 << 30}
	for batch := 0; batch < planAllocations; batch += 100 {
		var reports []map[string]any
		for i := batch; i < batch+100; i++ {
			reports = append(reports, map[string]any{
				"provider_resource_id": fmt.Sprintf("res-%d", i), "offering_id": "o", "provider_project_id": fmt.Sprintf("pp-%d", i),
				"state": "OK", "paused": false, "limits": limits, "applied_limits": limits, "native_scope": fmt.Sprintf("ns-%d", i),
				"observed_at": observed.Format(time.RFC3339),
			})
		}
		body, _ := json.Marshal(map[string]any{"reports": reports})
		executiontest.Want(b, c.Call(b, http.MethodPost, "/resource-provisioning/alpha/reports", files.ExtraKeys["site:alpha"], "", body), http.StatusOK, "")
	}
	pool, err := pgxpool.New(context.Background(), provURL)
	dbtest.Must(b, err)
	b.Cleanup(pool.Close)

	b.ResetTimer()
	for range b.N {
		plans, plansP99 := timed(b, func(w, i int) error {
			body := fmt.Sprintf(`{"project":%q,"environment":"alpha-k8s","demand":{"cpu":16000,"memory":1073741824}}`, canonicalProject((w*planEach+i)%planProjects))
			r, err := c.Try(http.MethodPost, "/execution/v1/plans", files.ServiceKey, "", []byte(body))
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("plan: %s", r)
			}
			if err == nil {
				var a struct{ Answer string }
				if err = json.Unmarshal(r.Body, &a); err == nil && a.Answer != "admissible" {
					err = fmt.Errorf("plan: %s", r)
				}
			}
			return err
		})
		reads, readsP99 := timed(b, func(w, i int) error {
			rows, err := pool.Query(context.Background(), `SELECT * FROM allocations WHERE project_id = $1 AND site = $2 ORDER BY site, id`, canonicalProject((w*planEach+i)%planProjects), "alpha")
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("point read found %d rows", n)
			}
			return nil
		})
		b.ReportMetric(plans, "plans/s")
		b.ReportMetric(float64(plansP99.Microseconds())/1000, "plan-p99-ms")
		b.ReportMetric(reads, "pgx-reads/s")
		b.ReportMetric(float64(readsP99.Microseconds())/1000, "read-p99-ms")
		b.ReportMetric(plans/reads, "plan-ratio")
	}
}

// timed runs op for planWorkers workers × planEach operations and returns
// operations per second and the 99th percentile latency.
func timed(b *testing.B, op func(w, i int) error) (float64, time.Duration) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lat  = make([]time.Duration, 0, planWorkers*planEach)
		errs = make(chan error, planWorkers)
	)
	start := time.Now()
	for w := range planWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, planEach)
			for i := range planEach {
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(lat)
	return float64(len(lat)) / elapsed.Seconds(), lat[len(lat)*99/100]
}
