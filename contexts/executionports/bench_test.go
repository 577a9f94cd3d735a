package executionports_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Workload of BenchmarkStreamAppendAck, per path and round: 8 concurrent
// appenders on one stream, 500 commands each; 8 Runtimes acknowledging
// 500 commands each on their own streams.
const (
	benchWorkers = 8
	benchEach    = 500
	benchRounds  = 3
)

// BenchmarkStreamAppendAck measures appends/s and acknowledgements/s over
// HTTP on PostgreSQL (the execution_ports module behind the platform's HTTP
// server on loopback, the load generator in the same process) and, in the
// same run against the same server, the same statements issued directly
// with pgx: the append statement (the stream counter's UPDATE … RETURNING,
// the INSERT and pg_notify) and the acknowledgement transaction (stream row
// lock, command read, result write, counter advance). Both pools hold
// executionports.DefaultMaxConns connections. The paths alternate for
// benchRounds rounds so that other load on the machine hits both alike; the
// medians are reported. Run with -benchtime=1x (make bench-execution).
func BenchmarkStreamAppendAck(b *testing.B) {
	dbURL := dbtest.NewPostgres(b)
	envs := []executiontest.Environment{{ID: "shared", Site: "alpha", Authority: "https://metallo.example.org"}}
	for w := range benchWorkers {
		envs = append(envs, executiontest.Environment{ID: fmt.Sprintf("env-%d", w), Site: "alpha", Authority: "https://metallo.example.org"})
	}
	s := startServer(b, options{databaseURL: dbURL, environments: envs})
	s.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchWorkers}}
	cfg, err := pgxpool.ParseConfig(dbURL)
	dbtest.Must(b, err)
	cfg.MaxConns = executionports.DefaultMaxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	dbtest.Must(b, err)
	b.Cleanup(pool.Close)
	q := pgdb.New(pool)
	now := func() pgtype.Timestamptz { return pgtype.Timestamptz{Time: time.Now(), Valid: true} }
	for _, env := range []string{"pgx-shared", "pgx-0", "pgx-1", "pgx-2", "pgx-3", "pgx-4", "pgx-5", "pgx-6", "pgx-7",
		"env-0", "env-1", "env-2", "env-3", "env-4", "env-5", "env-6", "env-7"} {
		dbtest.Must(b, q.EnsureStream(context.Background(), pgdb.EnsureStreamParams{Environment: env, CreatedAt: now()}))
	}

	b.ResetTimer()
	for iter := range b.N {
		var httpAppends, pgxAppends, httpAcks, pgxAcks []float64
		for round := range benchRounds {
			salt := (iter*benchRounds + round) * 10
			cmds := make([][]preparedCommand, benchWorkers)
			for w := range benchWorkers {
				for i := range benchEach {
					cmds[w] = append(cmds[w], prepared(b, salt, w, i))
				}
			}
			pgxAppends = append(pgxAppends, rate(b, func(w, i int) error {
				c := cmds[w][i]
				_, err := q.AppendCommand(context.Background(), pgdb.AppendCommandParams{
					Channel: pgstore.Channel, Environment: "pgx-shared", CommandID: c.id, Digest: c.digest, Canonical: c.canonical, AppendedAt: now(),
				})
				return err
			}))
			httpAppends = append(httpAppends, rate(b, func(w, i int) error {
				r, err := s.Try(http.MethodPost, "/execution/v1/streams/shared/commands", s.serviceKey, "", benchCommand(salt+1, w, i))
				if err == nil && r.Status != http.StatusCreated {
					err = fmt.Errorf("append: %s", r)
				}
				return err
			}))

			// Acknowledgements: every worker's stream holds benchEach new
			// commands on each path (appended untimed with the append
			// statement); each Runtime acknowledges its own stream in order.
			base := int64((iter*benchRounds + round) * benchEach)
			results := make([][][]byte, benchWorkers)
			for w := range benchWorkers {
				for i := range benchEach {
					c := prepared(b, salt+2, w, i)
					_, err := q.AppendCommand(context.Background(), pgdb.AppendCommandParams{
						Channel: pgstore.Channel, Environment: fmt.Sprintf("pgx-%d", w), CommandID: c.id, Digest: c.digest, Canonical: c.canonical, AppendedAt: now(),
					})
					dbtest.Must(b, err)
					hc := prepared(b, salt+3, w, i)
					_, err = q.AppendCommand(context.Background(), pgdb.AppendCommandParams{
						Channel: pgstore.Channel, Environment: fmt.Sprintf("env-%d", w), CommandID: hc.id, Digest: hc.digest, Canonical: hc.canonical, AppendedAt: now(),
					})
					dbtest.Must(b, err)
					_, res, err := siteprotocol.NewResult(siteprotocol.Command{ID: hc.id, Digest: hc.digest, Sequence: base + int64(i) + 1},
						siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, "observed", map[string]string{"state": "running"}, nil)
					dbtest.Must(b, err)
					results[w] = append(results[w], res)
				}
			}
			pgxAcks = append(pgxAcks, rate(b, func(w, i int) error {
				env, seq := fmt.Sprintf("pgx-%d", w), base+int64(i)+1
				return pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
					qt := q.WithTx(tx)
					st, err := qt.LockStream(context.Background(), env)
					if err != nil {
						return err
					}
					if _, err := qt.CommandAt(context.Background(), pgdb.CommandAtParams{Environment: env, Sequence: seq}); err != nil {
						return err
					}
					if _, err := qt.RecordResult(context.Background(), pgdb.RecordResultParams{Environment: env, Sequence: seq, Result: results[w][i],
						ResultDigest: pgtype.Text{String: "d", Valid: true}, AcknowledgedAt: now()}); err != nil {
						return err
					}
					n, err := qt.AdvanceAcknowledged(context.Background(), pgdb.AdvanceAcknowledgedParams{Environment: env, Sequence: st.AcknowledgedSequence + 1})
					if err == nil && n != 1 {
						err = fmt.Errorf("stream %s did not advance", env)
					}
					return err
				})
			}))
			// A stream is bound by its first pull
			// (docs/site-protocol.md#installation-fencing); a Runtime pulls
			// before it acknowledges.
			for w := range benchWorkers {
				env := fmt.Sprintf("env-%d", w)
				r, err := s.Try(http.MethodGet, fmt.Sprintf("/site/v1/streams/%s/commands?after=%d&limit=1&wait=0", env, base), s.files.EnvironmentKeys[env], "inst", nil)
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("pull: %s", r)
				}
				dbtest.Must(b, err)
			}
			httpAcks = append(httpAcks, rate(b, func(w, i int) error {
				env := fmt.Sprintf("env-%d", w)
				r, err := s.Try(http.MethodPut, fmt.Sprintf("/site/v1/streams/%s/commands/%d/result", env, base+int64(i)+1), s.files.EnvironmentKeys[env], "inst", results[w][i])
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("ack: %s", r)
				}
				return err
			}))
		}
		var table strings.Builder
		table.WriteString("\n| round | pgx appends/s | HTTP appends/s | ratio | pgx acks/s | HTTP acks/s | ratio |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for r := range benchRounds {
			fmt.Fprintf(&table, "| %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", r+1, pgxAppends[r], httpAppends[r], httpAppends[r]/pgxAppends[r], pgxAcks[r], httpAcks[r], httpAcks[r]/pgxAcks[r])
		}
		ma, mh, ka, kh := median(pgxAppends), median(httpAppends), median(pgxAcks), median(httpAcks)
		fmt.Fprintf(&table, "| **median** | **%.0f** | **%.0f** | **%.2f** | **%.0f** | **%.0f** | **%.2f** |\n", ma, mh, mh/ma, ka, kh, kh/ka)
		b.Log(table.String())
		b.ReportMetric(mh, "http-appends/s")
		b.ReportMetric(ma, "pgx-appends/s")
		b.ReportMetric(mh/ma, "append-ratio")
		b.ReportMetric(kh, "http-acks/s")
		b.ReportMetric(ka, "pgx-acks/s")
		b.ReportMetric(kh/ka, "ack-ratio")
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchCommand is an observe command unique to (salt, worker, i).
func benchCommand(salt, w, i int) []byte {
	return []byte(fmt.Sprintf(`{"id":"%08x-%04x-4000-8000-%012x","operation":"observe","issued_at":"2026-11-29T10:00:00Z","run_id":"5b0e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","attempt_id":"7d1f2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","member_id":"9c2e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","project_id":"0a1b2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","family":"batch"}`,
		salt, w, i))
}

type preparedCommand struct {
	id, digest string
	canonical  []byte
}

// prepared is benchCommand parsed as the server parses it.
func prepared(b *testing.B, salt, w, i int) preparedCommand {
	c, canonical, err := siteprotocol.ParseAppend(benchCommand(salt, w, i))
	if err != nil {
		b.Fatal(err)
	}
	return preparedCommand{id: c.ID, digest: c.Digest, canonical: canonical}
}

// rate runs op(w, i) for benchWorkers workers × benchEach operations each
// (each worker in order) and returns operations per second.
func rate(b *testing.B, op func(w, i int) error) float64 {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, benchWorkers)
	start := time.Now()
	for w := range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range benchEach {
				if err := op(w, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(benchWorkers*benchEach) / elapsed.Seconds()
}
