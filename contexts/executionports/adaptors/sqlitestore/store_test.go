package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/storetest"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

func open(t *testing.T) *database.Handle {
	t.Helper()
	return dbtest.Migrated(t, executionports.Database(), database.SQLite)
}

func TestSQLiteStoreConformsToTheStreamRules(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) application.StreamStore { return sqlitestore.New(open(t).DB) })
}

func TestALockedOrUnopenableOrClosedDatabaseIsUnavailable(t *testing.T) {
	ctx := context.Background()
	cmd, _ := storetest.Command(t, 90, 1)

	// Another process holds the write lock past the busy timeout.
	holder := dbtest.MigratedWith(t, executionports.Database(), database.SQLite, database.Options{BusyTimeout: time.Millisecond})
	path := holder.Target.Path
	tx, err := holder.DB.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	dbtest.Must(t, err)
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO streams (environment, created_at) VALUES ('held', '2026-11-29T10:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	s := sqlitestore.New(migratedNoLock(t, path).DB)
	if _, err := s.Append(ctx, "alpha-k8s", cmd, time.Now()); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("append while another connection holds the write lock: want ErrUnavailable, got %v", err)
	}
	if err := s.Locked(ctx, "alpha-k8s", time.Now(), func(application.LockedStream) error { return nil }); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("bind while another connection holds the write lock: want ErrUnavailable, got %v", err)
	}

	// The file cannot be opened: its directory is gone before first use.
	gone := dbtest.SQLitePath(t, "gone/execution.sqlite")
	dbtest.Must(t, os.MkdirAll(filepath.Dir(gone), 0o750))
	h, err := database.Open(ctx, database.Target{Engine: database.SQLite, Path: gone}, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	dbtest.Must(t, os.RemoveAll(filepath.Dir(gone)))
	if _, err := sqlitestore.New(h.DB).State(ctx, "alpha-k8s"); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("state of an unopenable file: want ErrUnavailable, got %v", err)
	}

	// The handle is closed (the process is stopping).
	closed := open(t)
	closed.Close()
	s = sqlitestore.New(closed.DB)
	if _, err := s.CommandsAfter(ctx, "alpha-k8s", 0, 10, 1<<20); !errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("pull from a closed handle: want ErrUnavailable, got %v", err)
	}
	// A rule's refusal is never unavailability.
	ok := sqlitestore.New(open(t).DB)
	if _, err := ok.Command(ctx, "alpha-k8s", cmd.ID); err == nil || errors.Is(err, application.ErrUnavailable) {
		t.Fatalf("an unknown command: want a domain error, got %v", err)
	}
}

// migratedNoLock opens path (already migrated) with a busy timeout of 1 ms.
func migratedNoLock(t *testing.T, path string) *database.Handle {
	t.Helper()
	h, err := database.Open(context.Background(), database.Target{Engine: database.SQLite, Path: path}, database.Options{BusyTimeout: time.Millisecond})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	return h
}

func TestSQLiteStoreConformsToTheDeliveryRules(t *testing.T) {
	storetest.ExerciseDelivery(t, func(t *testing.T) storetest.DeliveryStore { return sqlitestore.New(open(t).DB) })
}

func TestTheRetentionMigrationKeepsResultsAndFindsReadsStoredBefore(t *testing.T) {
	ctx := context.Background()
	h, err := database.Open(ctx, database.Target{Engine: database.SQLite, Path: dbtest.SQLitePath(t, "execution.sqlite")}, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	storetest.ExerciseRetentionMigration(t, h, func(h *database.Handle) application.StreamStore { return sqlitestore.New(h.DB) })
}
