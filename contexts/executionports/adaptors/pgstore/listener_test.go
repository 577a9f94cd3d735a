package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

// oneEnvironment configures alpha-k8s only.
type oneEnvironment struct{}

func (oneEnvironment) Environment(id string) (domain.Environment, bool) {
	return domain.Environment{ID: id, Site: "alpha", Authority: "https://metallo.example.org"}, id == "alpha-k8s"
}

func (oneEnvironment) IDs() []string { return []string{"alpha-k8s"} }

// waitFor polls cond every 10 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnAppendInOneProcessWakesAPullWaitingInAnother runs two server
// "processes" (each its own pool, wake-ups, streams service) on one
// database. The waiting side re-reads on its own only every minute, so an
// answer within the 30 s wait proves the LISTEN/NOTIFY wake-up.
func TestAnAppendInOneProcessWakesAPullWaitingInAnother(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h1 := open(t)
	h2, err := database.Open(ctx, h1.Target, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h2.Close)
	clk := clock.NewManual(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	appender := application.NewStreams(pgstore.New(h1.Pool), oneEnvironment{}, clk, application.NewWakeups(), time.Minute)
	wake2 := application.NewWakeups()
	store2 := pgstore.New(h2.Pool)
	waiter := application.NewStreams(store2, oneEnvironment{}, clk, wake2, time.Minute)

	l := pgstore.NewListener(h2.Pool, wake2, 100*time.Millisecond, func(err error) { t.Logf("listener: %v", err) })
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = l.Run(ctx)
	}()
	defer func() { cancel(); <-stopped }()
	waitFor(t, "the listener's LISTEN", func() bool {
		var n int
		err := h1.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen %'`).Scan(&n)
		return err == nil && n == 1
	})

	got := make(chan application.PullPage, 1)
	go func() {
		page, err := waiter.Pull(ctx, application.PullQuery{Environment: "alpha-k8s", Installation: "inst", Principal: "environment:alpha-k8s", Limit: 10, Wait: 30 * time.Second, Bind: true})
		if err != nil {
			t.Errorf("pull: %v", err)
		}
		got <- page
	}()
	waitFor(t, "the pull to bind the stream", func() bool {
		st, err := store2.State(ctx, "alpha-k8s")
		return err == nil && st.InstallationID == "inst"
	})
	start := time.Now()
	cmd := `{"id":"3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","operation":"observe","issued_at":"2026-11-29T10:00:00Z","run_id":"5b0e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","attempt_id":"7d1f2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","member_id":"9c2e2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","project_id":"0a1b2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","family":"batch"}`
	if _, err := appender.Append(ctx, "alpha-k8s", []byte(cmd)); err != nil {
		t.Fatal(err)
	}
	page := <-got
	// Without the notification the pull could answer only at its deadline.
	if took := time.Since(start); len(page.Commands) != 1 || took >= 15*time.Second {
		t.Fatalf("the other process's pull answered %d commands %s after the append", len(page.Commands), took)
	}
}
