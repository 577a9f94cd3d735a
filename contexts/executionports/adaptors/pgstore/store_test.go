package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/storetest"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

func open(t *testing.T) *database.Handle {
	t.Helper()
	return dbtest.Migrated(t, executionports.Database(), database.Postgres)
}

func TestPostgresStoreConformsToTheStreamRules(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) application.StreamStore { return pgstore.New(open(t).Pool) })
}

func TestAnUnreachableOrClosedOrDroppedDatabaseIsUnavailable(t *testing.T) {
	ctx := context.Background()
	cmd, _ := storetest.Command(t, 91, 1)

	// Nothing listens on the port.
	target, err := database.ParseURL("postgres://metallo@127.0.0.1:1/none?connect_timeout=5", "")
	dbtest.Must(t, err)
	refused, err := database.Open(ctx, target, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(refused.Close)
	s := pgstore.New(refused.Pool)
	if _, err := s.Append(ctx, "alpha-k8s", cmd, time.Now()); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("append with the server unreachable: want ErrUnavailable, got %v", err)
	}
	if err := s.Locked(ctx, "alpha-k8s", time.Now(), func(application.LockedStream) error { return nil }); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("locked with the server unreachable: want ErrUnavailable, got %v", err)
	}

	// The pool is closed (the process is stopping).
	closed := open(t)
	closed.Close()
	if _, err := pgstore.New(closed.Pool).State(ctx, "alpha-k8s"); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("state on a closed pool: want ErrUnavailable, got %v", err)
	}

	// The database is dropped under a live pool: its connections are
	// terminated and new ones are refused (3D000).
	h := open(t)
	url := h.Target.URL
	live := pgstore.New(h.Pool)
	if _, err := live.Append(ctx, "alpha-k8s", cmd, time.Now()); err != nil {
		t.Fatal(err)
	}
	dropDatabase(t, url)
	if _, err := live.CommandsAfter(ctx, "alpha-k8s", 0, 10, 1<<20); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("pull from a dropped database: want ErrUnavailable, got %v", err)
	}
	if _, err := live.Command(ctx, "alpha-k8s", cmd.ID); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("read from a dropped database: want ErrUnavailable, got %v", err)
	}

	// A rule's refusal is never unavailability.
	ok := pgstore.New(open(t).Pool)
	if _, err := ok.Command(ctx, "alpha-k8s", cmd.ID); err == nil || errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("an unknown command: want a domain error, got %v", err)
	}
}

// dropDatabase drops the database of url, terminating its connections.
func dropDatabase(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	dbtest.Must(t, err)
	admin, err := pgx.Connect(ctx, dbtest.ServerURL())
	dbtest.Must(t, err)
	defer func() { _ = admin.Close(ctx) }()
	_, err = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)")
	dbtest.Must(t, err)
}

func TestPostgresStoreConformsToTheDeliveryRules(t *testing.T) {
	storetest.ExerciseDelivery(t, func(t *testing.T) storetest.DeliveryStore { return pgstore.New(open(t).Pool) })
}

func TestTheRetentionMigrationKeepsResultsAndFindsReadsStoredBefore(t *testing.T) {
	ctx := context.Background()
	h, err := database.Open(ctx, database.Target{Engine: database.Postgres, URL: dbtest.NewPostgres(t)}, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	storetest.ExerciseRetentionMigration(t, h, func(h *database.Handle) application.StreamStore { return pgstore.New(h.Pool) })
}
