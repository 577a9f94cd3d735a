package executionports_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore/pgdb"
	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Workload of BenchmarkStreamAppendAck: 8 concurrent appenders on one
// stream, 8 Runtimes acknowledging on their own streams.
const (
	benchWorkers = 8
	benchEach    = 500
)

// BenchmarkStreamAppendAck measures appends/s and acknowledgements/s over
// HTTP on PostgreSQL (the execution_ports module behind the platform's HTTP
// server on loopback) and, in the same run on the same server, the same
// statements issued directly with pgx: the append statement (counter
// UPDATE … RETURNING + INSERT + pg_notify) and the acknowledgement
// transaction (row lock, command read, result write, counter advance).
// Run it with -benchtime=1x (make bench-execution); each iteration does the
// whole workload and reports the rates and their ratios.
func BenchmarkStreamAppendAck(b *testing.B) {
	dbURL := dbtest.NewPostgres(b)
	envs := make([]executiontest.Environment, 0, benchWorkers+1)
	for i := range benchWorkers {
		envs = append(envs, executiontest.Environment{ID: fmt.Sprintf("env-%d", i), Site: "alpha", Authority: "https://metallo.example.org"})
	}
	envs = append(envs, executiontest.Environment{ID: "shared", Site: "alpha", Authority: "https://metallo.example.org"})
	s := startServer(b, options{databaseURL: dbURL, environments: envs})
	pool, err := pgxpool.New(context.Background(), dbURL)
	dbtest.Must(b, err)
	b.Cleanup(pool.Close)
	s.Client.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchWorkers}}

	// The baseline's streams exist before anything is timed.
	q := pgdb.New(pool)
	for _, env := range []string{"pgx-shared", "pgx-0", "pgx-1", "pgx-2", "pgx-3", "pgx-4", "pgx-5", "pgx-6", "pgx-7"} {
		dbtest.Must(b, q.EnsureStream(context.Background(), pgdb.EnsureStreamParams{Environment: env, CreatedAt: pgtype.Timestamptz{Time: time.Now(), Valid: true}}))
	}
	b.ResetTimer()
	for iter := range b.N {
		salt := iter * 10
		httpAppends := rate(b, func(w, i int) error {
			r, err := s.Try(http.MethodPost, "/execution/v1/streams/shared/commands", s.serviceKey, "", benchCommand(salt, w, i))
			if err == nil && r.Status != http.StatusCreated {
				err = fmt.Errorf("append: %s", r)
			}
			return err
		})
		pgxAppends := rate(b, func(w, i int) error {
			_, canonical, err := siteprotocol.ParseAppend(benchCommand(salt+1, w, i))
			if err != nil {
				return err
			}
			_, err = q.AppendCommand(context.Background(), pgdb.AppendCommandParams{
				Channel: pgstore.Channel, Environment: "pgx-shared", CommandID: fmt.Sprintf("pgx-%d-%d-%d", salt, w, i),
				Digest: siteprotocol.Digest(canonical), Canonical: canonical, AppendedAt: pgtype.Timestamptz{Time: time.Now(), Valid: true},
			})
			return err
		})

		// Acknowledgements: each Runtime acknowledges its own stream in
		// order; results are made from the pulled commands beforehand.
		results := make([][][]byte, benchWorkers)
		installs := make([]string, benchWorkers)
		for w := range benchWorkers {
			env := fmt.Sprintf("env-%d", w)
			installs[w] = fmt.Sprintf("inst-%d", w)
			for i := range benchEach {
				executiontest.Want(b, s.Call(b, http.MethodPost, "/execution/v1/streams/"+env+"/commands", s.serviceKey, "", benchCommand(salt+2, w, i)), http.StatusCreated, "")
			}
			for after := iter * benchEach; len(results[w]) < benchEach; {
				page := executiontest.Decode[siteprotocol.Pull](b, s.Call(b, http.MethodGet, fmt.Sprintf("/site/v1/streams/%s/commands?after=%d&limit=100", env, after), s.files.EnvironmentKeys[env], installs[w], nil))
				for _, raw := range page.Commands {
					c, err := siteprotocol.ParsePulled(raw)
					dbtest.Must(b, err)
					_, res, err := siteprotocol.NewResult(c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, "observed", map[string]string{"state": "running"}, nil)
					dbtest.Must(b, err)
					results[w] = append(results[w], res)
					after = int(c.Sequence)
				}
			}
		}
		httpAcks := rate(b, func(w, i int) error {
			env := fmt.Sprintf("env-%d", w)
			r, err := s.Try(http.MethodPut, fmt.Sprintf("/site/v1/streams/%s/commands/%d/result", env, iter*benchEach+i+1), s.files.EnvironmentKeys[env], installs[w], results[w][i])
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("ack: %s", r)
			}
			return err
		})
		// The same acknowledgement statements on the pgx-shared stream's
		// commands, one stream per worker.
		for w := range benchWorkers {
			for i := range benchEach {
				_, canonical, err := siteprotocol.ParseAppend(benchCommand(salt+3, w, i))
				dbtest.Must(b, err)
				env := fmt.Sprintf("pgx-%d", w)
				params := pgdb.AppendCommandParams{Channel: pgstore.Channel, Environment: env, CommandID: fmt.Sprintf("pgx-ack-%d-%d-%d", salt, w, i),
					Digest: siteprotocol.Digest(canonical), Canonical: canonical, AppendedAt: pgtype.Timestamptz{Time: time.Now(), Valid: true}}
				_, err = q.AppendCommand(context.Background(), params)
				dbtest.Must(b, err)
			}
		}
		pgxAcks := rate(b, func(w, i int) error {
			env := fmt.Sprintf("pgx-%d", w)
			seq := int64(iter*benchEach + i + 1)
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
					ResultDigest: pgtype.Text{String: "d", Valid: true}, AcknowledgedAt: pgtype.Timestamptz{Time: time.Now(), Valid: true}}); err != nil {
					return err
				}
				n, err := qt.AdvanceAcknowledged(context.Background(), pgdb.AdvanceAcknowledgedParams{Environment: env, Sequence: st.AcknowledgedSequence + 1})
				if err == nil && n != 1 {
					err = fmt.Errorf("stream %s did not advance", env)
				}
				return err
			})
		})
		b.ReportMetric(httpAppends, "http-appends/s")
		b.ReportMetric(pgxAppends, "pgx-appends/s")
		b.ReportMetric(httpAppends/pgxAppends, "append-ratio")
		b.ReportMetric(httpAcks, "http-acks/s")
		b.ReportMetric(pgxAcks, "pgx-acks/s")
		b.ReportMetric(httpAcks/pgxAcks, "ack-ratio")
	}
}

// benchCommand is an observe command unique to (salt, worker, i).
func benchCommand(salt, w, i int) []byte {
	return []byte(fmt.Sprintf(`{"id":"%08x-%04x-4000-8000-%012x","operation":"observe","issued_at":"2026-11-29T10:00:00Z","run_id":"5b0e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","attempt_id":"7d1f2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","member_id":"9c2e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","project_id":"0a1b2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","family":"batch"}`,
		salt, w, i))
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
