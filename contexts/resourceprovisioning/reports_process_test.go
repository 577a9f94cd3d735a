package resourceprovisioning_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// TestFirstReportRacesOnPostgres runs two `metallo serve --role
// provisioning` processes on one PostgreSQL database: two agents post the
// first report of the same new resource at once, 200 pairs, and never get
// a 5xx (a unique violation on (site, provider resource ID) was one, about
// once in a hundred pairs); each resource has exactly one allocation,
// created by exactly one of the two reports
// (docs/resource-provisioning.md#report-intake).
func TestFirstReportRacesOnPostgres(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	keys := keysFor(t, bin, dir, "site:alpha", "service:execution")
	url := dbtest.NewPostgres(t)
	args := []string{"--migrate", "--provisioning-database-url", url}
	servers := []*server{startServer(t, bin, dir, args...), startServer(t, bin, dir, args...)}
	const pairs = 200
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	report := func(resource string, observed time.Time, cpu int64) map[string]any {
		return map[string]any{"reports": []map[string]any{{
			"provider_resource_id": resource, "offering_id": "o", "provider_project_id": "pp", "state": "OK", "paused": false,
			"limits": map[string]int64{"cpu": 1000}, "applied_limits": map[string]int64{"cpu": cpu}, "native_scope": "ns-" + resource, "observed_at": observed,
		}}}
	}
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		bad      []string
	)
	for i := range pairs {
		resource := fmt.Sprintf("r%d", i)
		// The same report (i ≡ 0 mod 3), the same observed_at with other
		// applied limits (≡ 1), or a later one (≡ 2).
		bodies := [2]map[string]any{report(resource, t0, 0), report(resource, t0, 0)}
		switch i % 3 {
		case 1:
			bodies[1] = report(resource, t0, 1000)
		case 2:
			bodies[1] = report(resource, t0.Add(time.Second), 1000)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for a := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var res struct{ Results []struct{ Outcome string } }
				code, raw := postJSON(t, servers[a].base+"/resource-provisioning/alpha/reports", keys["site:alpha"], bodies[a], &res)
				mu.Lock()
				defer mu.Unlock()
				var p problem
				switch {
				case code == http.StatusOK && len(res.Results) == 1:
					outcomes[res.Results[0].Outcome]++
				case code == http.StatusConflict && json.Unmarshal(raw, &p) == nil:
					outcomes[p.Reason]++
				default:
					bad = append(bad, fmt.Sprintf("pair %d agent %d: %d %s", i, a, code, raw))
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if len(bad) > 0 {
		t.Fatalf("%d answers were neither 200 nor 409 (none may be 5xx): %s", len(bad), strings.Join(bad, "; "))
	}
	if outcomes[domain.OutcomeCreated] != pairs {
		t.Fatalf("outcomes %v: want exactly one created per resource (%d)", outcomes, pairs)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var allocations, resources, unpositioned int
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM allocations), (SELECT count(DISTINCT (site, provider_resource_id)) FROM allocations), (SELECT count(*) FROM changes WHERE position IS NULL)`).Scan(&allocations, &resources, &unpositioned); err != nil {
		t.Fatal(err)
	}
	if allocations != pairs || resources != pairs || unpositioned != 0 {
		t.Fatalf("%d allocations of %d resources (want %d of %d), %d changes without a feed position", allocations, resources, pairs, pairs, unpositioned)
	}
	t.Logf("%d pairs of two agents' first reports on two processes: %v", pairs, outcomes)
}
