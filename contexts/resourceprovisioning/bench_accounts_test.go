package resourceprovisioning_test

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore/pgdb"
	rpapp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// Account report benchmark shape (agents and rounds as the report intake's).
const (
	// membersPerAgent is the number of member accounts in each agent's
	// allocation.
	membersPerAgent = 4
	// defaultAccountReports is the number of account reports per path and
	// round (METALLO_BENCH_ACCOUNT_REPORTS overrides it).
	defaultAccountReports = 1500
	benchEnvironment      = "alpha-k8s"
)

// BenchmarkAccountReports measures agents' account reports/s into the
// provisioning role over HTTP on PostgreSQL (the real binary, 32 concurrent
// agents, one allocation's complete set of 4 member accounts per request),
// next to the same transactions issued directly with pgx on 32 connections
// (allocation and account set locks, the allocation's stored accounts, the
// named bindings' locks, the account rows, and per changed binding the
// derivation's reads, its update and its MemberBindingChanged outbox row,
// then the feed sequencer run), in the same run against the same server.
// Each agent cycles new accounts (all four made again: four new rows, four
// made absent, four binding changes) → one account made again (one of
// each) → unchanged (a renewal). The paths alternate for three rounds. Run
// it once (-benchtime 1x). With METALLO_BENCH_REPORT=<file> the
// "## Account reports" section of BENCHMARKS.md is written there.
func BenchmarkAccountReports(b *testing.B) {
	n := defaultAccountReports
	if v := os.Getenv("METALLO_BENCH_ACCOUNT_REPORTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < agents {
			b.Fatalf("METALLO_BENCH_ACCOUNT_REPORTS=%q: want a number of at least %d", v, agents)
		}
	}
	direct, directSetUp, server := newAccountsDirect(b)
	viaHTTP, httpSetUp := newAccountsHTTP(b)
	var d, h []float64
	for round := range rounds {
		directSetUp(round)
		d = append(d, rate(b, n, func(a, i int) error { return direct(round, a, i) }))
		httpSetUp(round)
		h = append(h, rate(b, n, func(a, i int) error { return viaHTTP(round, a, i) }))
	}
	md, mh := median(d), median(h)
	b.ReportMetric(md, "direct-reports/s")
	b.ReportMetric(mh, "http-reports/s")
	b.ReportMetric(mh/md, "http/direct")
	section := accountsSection(n, d, h, server)
	b.Log("\n" + section)
	if path := os.Getenv("METALLO_BENCH_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(section), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func accountsSection(n int, d, h []float64, server string) string {
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
	return fmt.Sprintf(`## Account reports

Agents' account reports/s into the provisioning role on PostgreSQL: %d concurrent agents, one
allocation's complete set of %d member accounts per request, %d reports per path and round. Each
agent reports its own allocation (a Project of its own, new in each round, each member with a verified
site binding and a binding at the environment) and cycles: all accounts made again (four new rows, four made absent,
four bindings changed with a MemberBindingChanged each) → one account made again (one of each) →
unchanged (a renewal: the account set's times only).

Baseline, same run, same PostgreSQL server: the same transactions issued directly with pgx on %d
connections (allocation and account set locks, the stored accounts, the bindings' locks, the account
rows, each changed binding's derivation reads, update and outbox row, then the feed sequencer run; no
HTTP, JSON, authentication or application service). The paths alternate for %d rounds so that other
load on the machine hits both alike.

| round | pgx direct reports/s | HTTP reports/s | HTTP / direct |
| --- | ---: | ---: | ---: |
%s| **median** | **%.0f** | **%.0f** | **%.2f** |

Target: HTTP at least 0.5 of the direct rate: %s.

- Machine: %s, %d CPUs (%s, %s/%s), PostgreSQL %s on 127.0.0.1, shared with other work (load average %s at the end).
- Date: %s.
- Command: `+"`make bench-provisioning-accounts`"+` (go test -run '^$' -bench '^BenchmarkAccountReports$' -benchtime 1x ./contexts/resourceprovisioning/).

The HTTP path is the real binary (`+"`metallo serve --role provisioning`"+`, --provisioning-database-max-conns
%d) with the load generator on the same two cores, so it pays for JSON, authentication and the client
too. Binding rows are locked in ID order; account reports of different allocations commit in
parallel and their feed positions come from the sequencer, as for resource reports.
`, agents, membersPerAgent, n, agents, rounds, rows.String(), md, mh, mh/md, verdict, host, runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, server,
		loadAverage(), time.Now().UTC().Format("2006-01-02"), agents)
}

// loadAverage returns the 1, 5 and 15 minute load averages of
// /proc/loadavg, or "unknown".
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// benchAgent is agent a's Project, Parties and bindings in round r: each
// round's are new, so every round starts from the same state (a binding
// with ready accounts in two rounds' allocations would be ambiguous, and
// stop changing).
type benchAgent struct {
	project  string
	parties  []string
	bindings []string
}

func agentOf(r, a int) benchAgent {
	ag := benchAgent{project: fmt.Sprintf("7a1e4c2b-%04x-4000-8000-%012x", r+1, a+1)}
	for k := range membersPerAgent {
		p := fmt.Sprintf("9c2e5d1a-%04x-4%03x-8000-%012x", k+1, r+1, a+1)
		ag.parties = append(ag.parties, p)
		ag.bindings = append(ag.bindings, domain.BindingKey{PartyID: p, ProjectID: ag.project, Environment: benchEnvironment}.ID())
	}
	return ag
}

// benchEvents are the Beto events of every agent in round r: its members'
// site bindings and its Project.
func benchEvents(r int) []domain.BetoEvent {
	t := time.Date(2026, 8, 20, 9, 0, 0, 0, time.UTC)
	var out []domain.BetoEvent
	for a := range agents {
		ag := agentOf(r, a)
		p := &domain.ProjectChanged{ID: ag.project, Revision: 1, State: "active",
			ProviderBindings: []domain.ProviderBinding{{Provider: domain.ProviderWaldur, Instance: "https://waldur.example.org", ExternalID: fmt.Sprintf("pp-%d-%d", r, a)}}}
		for k, party := range ag.parties {
			out = append(out, domain.BetoEvent{EventID: fmt.Sprintf("b-%d-%d-%d", r, a, k), Type: domain.EventPartyProviderBindingChanged, OccurredAt: t,
				Binding: &domain.PartyProviderBinding{ID: fmt.Sprintf("e41f0a2b-%04x-4%03x-8000-%012x", k+1, r+1, a+1), PartyID: party, Revision: 1, Provider: domain.ProviderSite,
					Instance: benchEnvironment, ExternalID: fmt.Sprintf("user-%d-%d-%d", r, a, k), State: domain.SiteBindingVerified, Generation: 1}})
			p.Memberships = append(p.Memberships, domain.Membership{PartyID: party, Role: "member"})
		}
		out = append(out, domain.BetoEvent{EventID: fmt.Sprintf("p-%d-%d", r, a), Type: domain.EventProjectChanged, OccurredAt: t, Project: p})
	}
	return out
}

// benchResource is agent a's allocation in round r, observed at the start.
func benchResource(r, a int) domain.Report {
	l := domain.Limits{"cpu": 2000}
	return domain.Report{ProviderResourceID: fmt.Sprintf("acc-r%d-agent%02d", r, a), OfferingID: "offering", ProviderProjectID: fmt.Sprintf("pp-%d-%d", r, a),
		State: domain.WaldurOK, Limits: l, AppliedLimits: l.Clone(), NativeScope: fmt.Sprintf("ns-%d-%d", r, a), ObservedAt: time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)}
}

// accountWorkload returns agent a's i-th account report in round r and
// its kind: 0 every account made again, 1 one made again, 2 unchanged.
func accountWorkload(r, a, i int) (domain.AccountReport, int) {
	ag := agentOf(r, a)
	kind := i % 3
	cycle := i / 3
	rep := domain.AccountReport{ProviderResourceID: benchResource(r, a).ProviderResourceID, ObservedAt: observedAt(i)}
	for k, p := range ag.parties {
		uid := fmt.Sprintf("uid-%d-%d-%d-%d", r, a, cycle, k)
		if kind > 0 && k == 0 {
			uid += "-again"
		}
		rep.Accounts = append(rep.Accounts, domain.ReportedAccount{PartyID: p, Account: domain.AccountName(p), UID: uid, BindingID: ag.bindings[k], Generation: 1, State: domain.AccountReady})
	}
	return rep, kind
}

// observedBase is fixed per run so every report of an agent is newer than
// its last.
var observedBase = time.Now().UTC().Add(-time.Hour).Truncate(time.Second)

func observedAt(i int) time.Time { return observedBase.Add(time.Duration(i) * time.Millisecond) }

// newAccountsHTTP starts the provisioning role on its own PostgreSQL
// database and returns an agent's account report call against it and the
// untimed set-up of a round (the Beto events once, each agent's resource).
func newAccountsHTTP(b *testing.B) (func(round, a, i int) error, func(round int)) {
	dir := b.TempDir()
	bin := testsetup.Binary(b)
	keys := keysFor(b, bin, dir, "site:alpha", "service:beto")
	writeEnvironments(b, dir, benchEnvironment)
	srv := startServer(b, bin, dir, "--migrate", "--provisioning-database-url", dbtest.NewPostgres(b), "--provisioning-database-max-conns", fmt.Sprint(agents))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents, MaxConnsPerHost: agents}}
	post := func(path, key string, body, answer any) error {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req, err := http.NewRequest(http.MethodPost, srv.base+"/resource-provisioning"+path, bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if answer == nil {
			answer = &struct{}{}
		}
		if err := json.NewDecoder(resp.Body).Decode(answer); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST %s: HTTP %d %v", path, resp.StatusCode, err)
		}
		return nil
	}
	setUp := func(round int) {
		for _, ev := range benchEvents(round) {
			if err := post("/events/beto", keys["service:beto"], betoBody(ev), nil); err != nil {
				b.Fatal(err)
			}
		}
		for a := range agents {
			if err := post("/alpha/reports", keys["site:alpha"], reportBody(benchResource(round, a)), nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	return func(round, a, i int) error {
		rep, kind := accountWorkload(round, a, i)
		body := map[string]any{"provider_resource_id": rep.ProviderResourceID, "observed_at": rep.ObservedAt, "accounts": rep.Accounts}
		var answer struct {
			Outcome  string
			Accounts []struct{ Current bool }
		}
		if err := post("/alpha/accounts", keys["site:alpha"], body, &answer); err != nil {
			return err
		}
		// The HTTP path does the work the baseline does: every listed
		// account is its binding's ready account afterwards.
		want := []string{domain.OutcomeChanged, domain.OutcomeChanged, domain.OutcomeRenewed}[kind]
		if i == 0 {
			want = domain.OutcomeCreated
		}
		if answer.Outcome != want || len(answer.Accounts) != membersPerAgent || slices.ContainsFunc(answer.Accounts, func(a struct{ Current bool }) bool { return !a.Current }) {
			return fmt.Errorf("agent %d report %d: %+v, want %s with every account current", a, i, answer, want)
		}
		return nil
	}, setUp
}

func reportBody(r domain.Report) map[string]any {
	return map[string]any{"reports": []map[string]any{{
		"provider_resource_id": r.ProviderResourceID, "offering_id": r.OfferingID, "provider_project_id": r.ProviderProjectID, "state": r.State,
		"paused": r.Paused, "limits": r.Limits, "applied_limits": r.AppliedLimits, "native_scope": r.NativeScope, "observed_at": r.ObservedAt,
	}}}
}

func betoBody(ev domain.BetoEvent) map[string]any {
	out := map[string]any{"event_id": ev.EventID, "type": ev.Type, "occurred_at": ev.OccurredAt}
	if ev.Project != nil {
		out["project"] = ev.Project
	}
	if ev.Binding != nil {
		out["binding"] = ev.Binding
	}
	return out
}

// newAccountsDirect migrates a PostgreSQL database of its own, sets it up
// through the application service (the same state as the HTTP path's),
// and returns the same transactions as an account report, issued with pgx,
// the untimed set-up of a round, and the server's version.
func newAccountsDirect(b *testing.B) (func(round, a, i int) error, func(round int), string) {
	ctx := context.Background()
	h := dbtest.MigratedWith(b, resourceprovisioning.Database(), database.Postgres, database.Options{MaxConns: agents})
	var version string
	if err := h.Pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		b.Fatal(err)
	}
	store := pgstore.New(h.Pool)
	svc, err := resourceprovisioning.NewService(store, clock.System{}, zap.NewNop(), prometheus.NewRegistry(), resourceprovisioning.Config{
		WaldurInstance: "https://waldur.example.org",
	}, rpapp.StaticSites{benchEnvironment: "alpha"})
	if err != nil {
		b.Fatal(err)
	}
	setUp := func(round int) {
		for _, ev := range benchEvents(round) {
			if _, err := svc.ReceiveBetoEvent(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
		for a := range agents {
			if _, err := svc.SubmitReports(ctx, "alpha", []domain.Report{benchResource(round, a)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return func(round, a, i int) error {
		rep, kind := accountWorkload(round, a, i)
		changed, err := directAccounts(ctx, h.Pool, domain.AllocationID("alpha", rep.ProviderResourceID), agentOf(round, a), rep, kind, i == 0)
		if err != nil || !changed {
			return err
		}
		_, err = store.PositionChanges(ctx)
		return err
	}, setUp, version
}

// directAccounts is an account report's transaction issued with pgx: what
// the store does for the application service, with the decisions (which
// rows change, which bindings) known from the workload.
func directAccounts(ctx context.Context, pool *pgxpool.Pool, allocationID string, ag benchAgent, rep domain.AccountReport, kind int, first bool) (bool, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	changed := false
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		q := pgdb.New(tx)
		if _, err := q.LockAllocation(ctx, allocationID); err != nil {
			return err
		}
		set, err := q.LockAccountSet(ctx, allocationID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		stored, err := q.AllocationAccounts(ctx, allocationID)
		if err != nil {
			return err
		}
		ids := slices.Clone(ag.bindings)
		slices.Sort(ids)
		locked := map[string]pgdb.MemberBinding{}
		for _, id := range ids {
			b, err := q.LockMemberBinding(ctx, id)
			if err != nil {
				return err
			}
			locked[id] = b
		}
		digest := rep.ContentDigest()
		revision := int64(1)
		if !first && kind != 2 {
			revision = set.Revision + 1
		} else if !first {
			revision = set.Revision
		}
		if first {
			_, err := q.InsertAccountSet(ctx, pgdb.InsertAccountSetParams{AllocationID: allocationID, Revision: 1, ContentDigest: digest, ObservedAt: rep.ObservedAt, LastSeenAt: now})
			if err != nil {
				return err
			}
		} else if err := q.UpdateAccountSet(ctx, pgdb.UpdateAccountSetParams{AllocationID: allocationID, Revision: revision, ContentDigest: digest, ObservedAt: rep.ObservedAt, LastSeenAt: now}); err != nil {
			return err
		}
		if kind == 2 && !first {
			return nil
		}
		changed = true
		remade := len(rep.Accounts)
		if kind == 1 && !first {
			remade = 1
		}
		for k := range remade {
			a := rep.Accounts[k]
			if err := q.UpsertNativeAccount(ctx, pgdb.UpsertNativeAccountParams{AllocationID: allocationID, PartyID: a.PartyID, Uid: a.UID, BindingID: a.BindingID,
				Generation: 1, AccountName: a.Account, State: domain.AccountReady, Since: rep.ObservedAt, ChangedAt: now}); err != nil {
				return err
			}
		}
		for _, s := range stored {
			if s.State == domain.AccountAbsent || slices.ContainsFunc(rep.Accounts, func(a domain.ReportedAccount) bool { return a.UID == s.Uid }) {
				continue
			}
			if err := q.UpsertNativeAccount(ctx, pgdb.UpsertNativeAccountParams{AllocationID: allocationID, PartyID: s.PartyID, Uid: s.Uid, BindingID: s.BindingID,
				Generation: s.Generation, AccountName: s.AccountName, State: domain.AccountAbsent, Since: rep.ObservedAt, ChangedAt: now}); err != nil {
				return err
			}
		}
		for k := range remade {
			a := rep.Accounts[k]
			b := locked[a.BindingID]
			if _, err := q.IsProjectMember(ctx, pgdb.IsProjectMemberParams{ProjectID: b.ProjectID, PartyID: b.PartyID}); err != nil {
				return err
			}
			if _, err := q.CurrentSiteBinding(ctx, pgdb.CurrentSiteBindingParams{PartyID: b.PartyID, Provider: domain.ProviderSite, Instance: b.Environment, State: domain.SiteBindingVerified}); err != nil {
				return err
			}
			if _, err := q.BindingAccounts(ctx, b.BindingID); err != nil {
				return err
			}
			if err := q.UpdateMemberBinding(ctx, pgdb.UpdateMemberBindingParams{BindingID: b.BindingID, Generation: b.Generation, State: domain.BindingReady, Reasons: []byte(`[]`),
				SiteBindingID: b.SiteBindingID, SiteUsername: b.SiteUsername, SiteBindingGeneration: b.SiteBindingGeneration, AccountUid: a.UID,
				AllocationID: allocationID, Namespace: "ns", Revision: b.Revision + 1, ChangedAt: now}); err != nil {
				return err
			}
			payload := []byte(fmt.Sprintf(`{"binding_id":%q,"party_id":%q,"project_id":%q,"environment":%q,"account":"member-x","generation":1,"revision":%d,"state":"ready","reasons":[],"account_uid":%q}`,
				b.BindingID, b.PartyID, b.ProjectID, b.Environment, b.Revision+1, a.UID))
			if err := q.InsertChange(ctx, pgdb.InsertChangeParams{EventType: domain.MemberBindingChangedType, SubjectID: b.BindingID, Revision: b.Revision + 1, Payload: payload, RecordedAt: now}); err != nil {
				return err
			}
		}
		return nil
	})
	return changed, err
}
