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

// TestAccountReportRacesOnPostgres runs two `metallo serve --role
// provisioning` processes on one PostgreSQL database: two agents post the
// first account report of an allocation at once, round after round, and
// never get a 5xx; exactly one report of each allocation creates its set.
func TestAccountReportRacesOnPostgres(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	keys := keysFor(t, bin, dir, "site:alpha", "service:beto", "service:execution")
	url := dbtest.NewPostgres(t)
	args := []string{"--migrate", "--provisioning-database-url", url}
	servers := []*server{startServer(t, bin, dir, args...), startServer(t, bin, dir, args...)}
	const (
		project = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
		parties = 4
		rounds  = 24
	)
	party := func(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i+1, i+1) }
	post := func(s *server, path, key string, body any) (int, []byte) {
		return postJSON(t, s.base+"/resource-provisioning"+path, key, body, nil)
	}
	var members []map[string]any
	for i := range parties {
		members = append(members, map[string]any{"party_id": party(i), "role": "member"})
		code, raw := post(servers[0], "/events/beto", keys["service:beto"], map[string]any{
			"event_id": fmt.Sprintf("b%d", i), "type": domain.EventPartyProviderBindingChanged, "occurred_at": "2026-08-20T10:00:00Z",
			"binding": map[string]any{"id": fmt.Sprintf("%08x-1111-4000-8000-%012x", i+1, i+1), "party_id": party(i), "revision": 1, "provider": "site",
				"instance": "alpha-k8s", "external_id": fmt.Sprintf("user%d", i), "state": "verified", "generation": 1},
		})
		if code != http.StatusOK {
			t.Fatalf("site binding: %d %s", code, raw)
		}
	}
	if code, raw := post(servers[1], "/events/beto", keys["service:beto"], map[string]any{
		"event_id": "p1", "type": domain.EventProjectChanged, "occurred_at": "2026-08-20T10:00:00Z",
		"project": map[string]any{"id": project, "revision": 1, "state": "active", "memberships": members,
			"provider_bindings": []map[string]any{{"provider": "waldur", "instance": "https://waldur.example.org", "external_id": "pp"}}},
	}); code != http.StatusOK {
		t.Fatalf("project: %d %s", code, raw)
	}
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	accounts := func(round, n int) []map[string]any {
		var out []map[string]any
		for i := range n {
			out = append(out, map[string]any{"party_id": party(i), "account": domain.AccountName(party(i)), "uid": fmt.Sprintf("uid-%d-%d", round, i),
				"binding_id": domain.BindingKey{PartyID: party(i), ProjectID: project, Environment: "alpha-k8s"}.ID(), "generation": 1, "state": "ready"})
		}
		return out
	}
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		bad      []string
	)
	for round := range rounds {
		resource := fmt.Sprintf("r%d", round)
		if code, raw := post(servers[round%2], "/alpha/reports", keys["site:alpha"], map[string]any{"reports": []map[string]any{{
			"provider_resource_id": resource, "offering_id": "o", "provider_project_id": "pp", "state": "OK", "paused": false,
			"limits": map[string]int64{"cpu": 1000}, "applied_limits": map[string]int64{"cpu": 1000}, "native_scope": "ns-" + resource, "observed_at": t0,
		}}}); code != http.StatusOK {
			t.Fatalf("report: %d %s", code, raw)
		}
		// The two agents' first reports: the same one (rounds ≡ 0 mod 3),
		// the same observed_at with other accounts (≡ 1), or a later one
		// (≡ 2).
		bodies := [2]map[string]any{
			{"provider_resource_id": resource, "observed_at": t0.Add(time.Second), "accounts": accounts(round, parties)},
			{"provider_resource_id": resource, "observed_at": t0.Add(time.Second), "accounts": accounts(round, parties)},
		}
		switch round % 3 {
		case 1:
			bodies[1]["accounts"] = accounts(round, parties-1)
		case 2:
			bodies[1]["observed_at"] = t0.Add(2 * time.Second)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for a := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var res struct{ Outcome string }
				code, raw := postJSON(t, servers[a].base+"/resource-provisioning/alpha/accounts", keys["site:alpha"], bodies[a], &res)
				mu.Lock()
				defer mu.Unlock()
				var p problem
				switch {
				case code == http.StatusOK:
					outcomes[res.Outcome]++
				case code == http.StatusConflict && json.Unmarshal(raw, &p) == nil:
					outcomes[p.Reason]++
				default:
					bad = append(bad, fmt.Sprintf("round %d agent %d: %d %s", round, a, code, raw))
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if len(bad) > 0 {
		t.Fatalf("%d answers were neither 200 nor 409 (none may be 5xx): %s", len(bad), strings.Join(bad, "; "))
	}
	if outcomes[domain.OutcomeCreated] != rounds {
		t.Fatalf("outcomes %v: want exactly one created per allocation (%d)", outcomes, rounds)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var sets, unpositioned, bindings int
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM account_sets), (SELECT count(*) FROM changes WHERE position IS NULL), (SELECT count(*) FROM member_bindings)`).Scan(&sets, &unpositioned, &bindings); err != nil {
		t.Fatal(err)
	}
	if sets != rounds || unpositioned != 0 || bindings != parties {
		t.Fatalf("%d account sets (want %d), %d changes without a feed position, %d bindings (want %d)", sets, rounds, unpositioned, bindings, parties)
	}
	t.Logf("%d rounds of two agents' first account reports on two processes: %v", rounds, outcomes)
}
