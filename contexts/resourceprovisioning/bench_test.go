package resourceprovisioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// Benchmark shape.
const (
	// agents is the number of concurrent reporting agents.
	agents = 32
	// rounds alternate the two paths, so load from elsewhere on the machine
	// hits both alike; the table reports each round and the medians.
	rounds = 3
	// defaultReports is the number of reports per path and round
	// (METALLO_BENCH_REPORTS overrides it).
	defaultReports = 3000
)

// BenchmarkReportIntake measures agent reports/s into the provisioning role
// over HTTP on PostgreSQL (the real binary, 32 concurrent agents, one report
// per request, a mix of new, changed and unchanged reports), next to the
// same transactions issued directly with pgx on 32 connections (allocation
// lock, claim lookup, allocation insert/update/renewal, receipt, outbox row,
// then the feed sequencer run), in the same run against the same server.
// The paths alternate for three rounds. Run it once (-benchtime 1x). With
// METALLO_BENCH_REPORT=<file> the "## Report intake" section of
// BENCHMARKS.md is written there.
func BenchmarkReportIntake(b *testing.B) {
	n := defaultReports
	if v := os.Getenv("METALLO_BENCH_REPORTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < agents {
			b.Fatalf("METALLO_BENCH_REPORTS=%q: want a number of at least %d", v, agents)
		}
	}
	direct, server := newDirect(b)
	viaHTTP := newHTTP(b)
	var d, h []float64
	for round := range rounds {
		d = append(d, rate(b, n, func(a, i int) error { return direct(round, a, i) }))
		h = append(h, rate(b, n, func(a, i int) error { return viaHTTP(round, a, i) }))
	}
	md, mh := median(d), median(h)
	b.ReportMetric(md, "direct-reports/s")
	b.ReportMetric(mh, "http-reports/s")
	b.ReportMetric(mh/md, "http/direct")
	section := reportSection(n, d, h, server)
	b.Log("\n" + section)
	if path := os.Getenv("METALLO_BENCH_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(section), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func reportSection(n int, d, h []float64, server string) string {
	var rows strings.Builder
	for i := range d {
		fmt.Fprintf(&rows, "| round %d | %.0f | %.0f | %.2f |\n", i+1, d[i], h[i], h[i]/d[i])
	}
	md, mh := median(d), median(h)
	verdict := "met"
	if mh/md < 0.5 {
		verdict = "NOT met"
	}
	host, _ := os.Hostname()
	return fmt.Sprintf(`## Report intake

Agent reports/s into the provisioning role on PostgreSQL: %d concurrent agents, one report per
request, %d reports per path and round. Each agent cycles new → changed → unchanged reports of its
own resources: two thirds are material changes (allocation, receipt, AllocationChanged outbox row,
then a feed position from the sequencer), one third renewals (last_seen_at only).

Baseline, same run, same PostgreSQL server: the same transactions issued directly with pgx on %d
connections (no HTTP, JSON, authentication or application service). The paths alternate for %d
rounds so that other load on the machine hits both alike.

| round | pgx direct reports/s | HTTP reports/s | HTTP / direct |
| --- | ---: | ---: | ---: |
%s| **median** | **%.0f** | **%.0f** | **%.2f** |

Target: HTTP at least 0.5 of the direct rate: %s.

- Machine: %s, %d CPUs (%s, %s/%s), PostgreSQL %s on 127.0.0.1, shared with other work.
- Date: %s.
- Command: `+"`make bench-provisioning`"+` (go test -run '^$' -bench '^BenchmarkReportIntake$' -benchtime 1x ./contexts/resourceprovisioning/).

The HTTP path is the real binary (`+"`metallo serve --role provisioning`"+`, --provisioning-database-max-conns
%d) with the load generator on the same two cores, so it pays for JSON, authentication and the client
too. Material changes commit in parallel; their feed positions come from one sequencer run at a time
(README, "The change feed"), each run positioning every change committed before it.
`, agents, n, agents, rounds, rows.String(), md, mh, mh/md, verdict, host, runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, server,
		time.Now().UTC().Format("2006-01-02"), agents)
}

// cpuModel returns the CPU model named in /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// workload returns what agent a sends as its i-th report in round r: kind 0
// creates a new resource, 1 changes it, 2 repeats it unchanged (newer
// observed_at).
func workload(r, a, i int) (resource string, kind int, cpu int64, observed time.Time) {
	kind = i % 3
	resource = fmt.Sprintf("r%d-agent%02d-res%06d", r, a, i/3)
	cpu = 1000
	if kind > 0 {
		cpu = 2000
	}
	return resource, kind, cpu, time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
}

// rate runs n operations on `agents` goroutines, agent a calling op(a, i)
// for i = 0, 1, 2, …, and returns operations per second.
func rate(b *testing.B, n int, op func(agent, i int) error) float64 {
	b.Helper()
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		done   = make(chan struct{}, agents)
	)
	start := time.Now()
	for a := range agents {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; next.Add(1) <= int64(n); i++ {
				if err := op(a, i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	for range agents {
		<-done
	}
	elapsed := time.Since(start)
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return float64(n) / elapsed.Seconds()
}

// newHTTP starts the provisioning role on its own PostgreSQL database and
// returns an agent's report call against it.
func newHTTP(b *testing.B) func(round, a, i int) error {
	dir := b.TempDir()
	bin := testsetup.Binary(b)
	keys := keysFor(b, bin, dir, "site:alpha")
	srv := startServer(b, bin, dir, "--migrate", "--provisioning-database-url", dbtest.NewPostgres(b), "--provisioning-database-max-conns", fmt.Sprint(agents))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents, MaxConnsPerHost: agents}}
	url := srv.base + "/resource-provisioning/alpha/reports"
	key := "Bearer " + keys["site:alpha"]
	return func(round, a, i int) error {
		res, _, cpu, at := workload(round, a, i)
		body := fmt.Sprintf(`{"reports":[{"provider_resource_id":%q,"offering_id":"offering","provider_project_id":"pp","state":"OK","paused":false,`+
			`"limits":{"cpu":2000,"memory":4294967296},"applied_limits":{"cpu":%d,"memory":4294967296},"native_scope":"ns","observed_at":%q}]}`,
			res, cpu, at.Format(time.RFC3339Nano))
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		var out struct {
			Results []struct{ Outcome string } `json:"results"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("report %s: HTTP %d %v", res, resp.StatusCode, err)
		}
		return nil
	}
}

// newDirect migrates a PostgreSQL database of its own and returns the same
// transactions as a report, issued with pgx, and the server's version.
func newDirect(b *testing.B) (func(round, a, i int) error, string) {
	ctx := context.Background()
	h := dbtest.MigratedWith(b, resourceprovisioning.Database(), database.Postgres, database.Options{MaxConns: agents})
	var version string
	if err := h.Pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		b.Fatal(err)
	}
	seq := pgstore.New(h.Pool)
	return func(round, a, i int) error {
		res, kind, cpu, at := workload(round, a, i)
		if err := directReport(ctx, h.Pool, "alpha/"+res, res, kind, cpu, at); err != nil || kind == 2 {
			return err
		}
		// The feed sequencer run, grouped as the store groups it.
		_, err := seq.PositionChanges(ctx)
		return err
	}, version
}

func directReport(ctx context.Context, pool *pgxpool.Pool, id, res string, kind int, cpu int64, at time.Time) error {
	reasons, limits := []byte(`["project_unbound"]`), []byte(`{"cpu":2000,"memory":4294967296}`)
	applied := []byte(fmt.Sprintf(`{"cpu":%d,"memory":4294967296}`, cpu))
	payload := []byte(`{"allocation_id":"x","site":"alpha","revision":1,"lifecycle":"pending","reasons":["project_unbound"],"configured_limits":{"cpu":2000,"memory":4294967296}}`)
	report := []byte(`{"provider_resource_id":"x","offering_id":"offering","provider_project_id":"pp","state":"OK","paused":false,"limits":{"cpu":2000,"memory":4294967296},"applied_limits":{"cpu":2000,"memory":4294967296},"native_scope":"ns"}`)
	now := time.Now().UTC()
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		q := pgdb.New(tx)
		if _, err := q.ProviderProjectClaims(ctx, pgdb.ProviderProjectClaimsParams{Instance: "https://waldur.example.org", ExternalID: "pp", MaxRows: 2}); err != nil {
			return err
		}
		cur, err := q.LockAllocation(ctx, id)
		if err != nil && (!errors.Is(err, pgx.ErrNoRows) || kind != 0) {
			return err
		}
		rev := cur.Revision + 1
		switch kind {
		case 0:
			rev = 1
			if _, err := q.InsertAllocation(ctx, pgdb.InsertAllocationParams{
				ID: id, Site: "alpha", ProviderResourceID: res, OfferingID: "offering", ProviderProjectID: "pp", NativeScope: "ns",
				Lifecycle: "pending", Reasons: reasons, ConfiguredLimits: limits, AppliedLimits: applied, WaldurState: "OK",
				Revision: rev, ContentDigest: "d", ObservedAt: at, LastSeenAt: now,
			}); err != nil {
				return err
			}
		case 1:
			if err := q.UpdateAllocation(ctx, pgdb.UpdateAllocationParams{
				ID: id, OfferingID: "offering", ProviderProjectID: "pp", NativeScope: "ns", Lifecycle: "pending",
				Reasons: reasons, ConfiguredLimits: limits, AppliedLimits: applied, WaldurState: "OK",
				Revision: rev, ContentDigest: "d2", ObservedAt: at, LastSeenAt: now,
			}); err != nil {
				return err
			}
		default:
			return q.RenewAllocation(ctx, pgdb.RenewAllocationParams{ID: id, ObservedAt: at, LastSeenAt: now})
		}
		if err := q.InsertReceipt(ctx, pgdb.InsertReceiptParams{AllocationID: id, Revision: rev, ObservedAt: at, ReceivedAt: now, ContentDigest: "d", Report: report}); err != nil {
			return err
		}
		return q.InsertChange(ctx, pgdb.InsertChangeParams{EventType: "AllocationChanged", SubjectID: id, Revision: rev, Payload: payload, RecordedAt: now})
	})
}
