package database_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	. "github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

func TestParseURL(t *testing.T) {
	cases := map[string]struct {
		engine  Engine
		path    string
		def     bool
		wantErr bool
	}{
		"":                               {engine: SQLite, path: "./var/x.sqlite", def: true},
		"postgres://u@127.0.0.1:5432/db": {engine: Postgres},
		"postgresql://u@127.0.0.1/db?sslmode=disable": {engine: Postgres},
		"sqlite:/tmp/a.sqlite":                        {engine: SQLite, path: "/tmp/a.sqlite"},
		"sqlite:///tmp/a.sqlite":                      {engine: SQLite, path: "/tmp/a.sqlite"},
		"file:rel/a.sqlite":                           {engine: SQLite, path: "rel/a.sqlite"},
		"mysql://x":                                   {wantErr: true},
		"sqlite:a.sqlite?mode=ro":                     {wantErr: true},
		"postgres://%zz":                              {wantErr: true},
	}
	for raw, want := range cases {
		got, err := ParseURL(raw, "./var/x.sqlite")
		if want.wantErr {
			if !errors.Is(err, ErrBadURL) {
				t.Errorf("%q: want ErrBadURL, got %v", raw, err)
			}
			continue
		}
		if err != nil || got.Engine != want.engine || got.Default != want.def || (want.path != "" && got.Path != want.path) {
			t.Errorf("%q: got %+v, %v", raw, got, err)
		}
	}
}

// A configured SQLite path whose directory is missing is refused and
// creates nothing (a mistyped --…-database-url must not grow a tree); only
// the embedded default's directory is made.
func TestSQLiteDirectoryIsMadeOnlyForTheDefault(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo", "x.sqlite")
	if h, err := Open(ctx, Target{Engine: SQLite, Path: missing}, Options{}); err == nil {
		h.Close()
		t.Fatal("opened a SQLite file in a missing directory")
	} else if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("want an error naming %s and wrapping fs.ErrNotExist, got %v", missing, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "typo")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the missing directory was created: %v", err)
	}
	def := filepath.Join(dir, "var", "x.sqlite")
	h, err := Open(ctx, Target{Engine: SQLite, Path: def, Default: true}, Options{})
	if err != nil {
		t.Fatalf("the default's directory: %v", err)
	}
	h.Close()
}

var testMigrations = fstest.MapFS{
	"00001_things.sql": {Data: []byte("-- +goose Up\nCREATE TABLE things (id INTEGER PRIMARY KEY);\n-- +goose Down\nDROP TABLE things;\n")},
	"00002_more.sql":   {Data: []byte("-- +goose Up\nALTER TABLE things ADD COLUMN name TEXT;\n-- +goose Down\nSELECT 1;\n")},
}

func TestSQLiteIsWALWithFullSyncAndForeignKeys(t *testing.T) {
	ctx := context.Background()
	h, err := Open(ctx, Target{Engine: SQLite, Path: dbtest.SQLitePath(t, "x.sqlite")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "10000"} {
		var got string
		if err := h.DB.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestPendingMigrationsAreReportedUntilMigrated(t *testing.T) {
	ctx := context.Background()
	for name, target := range map[string]Target{
		"sqlite":   {Engine: SQLite, Path: dbtest.SQLitePath(t, "m.sqlite")},
		"postgres": {Engine: Postgres, URL: dbtest.NewPostgres(t)},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "postgres" {
				t.Log(dbtest.LaneMarker)
			}
			h, err := Open(ctx, target, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if err := h.CheckMigrated(ctx, testMigrations, "test_ctx"); !errors.Is(err, ErrPendingMigrations) {
				t.Fatalf("want ErrPendingMigrations, got %v", err)
			}
			applied, err := h.Migrate(ctx, testMigrations, "test_ctx")
			if err != nil || len(applied) != 2 {
				t.Fatalf("applied %v, %v", applied, err)
			}
			if err := h.CheckMigrated(ctx, testMigrations, "test_ctx"); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := h.DB.QueryRowContext(ctx, "SELECT count(*) FROM goose_test_ctx").Scan(&n); err != nil || n < 2 {
				t.Fatalf("version table goose_test_ctx: %d rows, %v", n, err)
			}
		})
	}
}

func TestConcurrentMigratorsOnPostgresApplyEachMigrationOnce(t *testing.T) {
	ctx := context.Background()
	url := dbtest.NewPostgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := Open(ctx, Target{Engine: Postgres, URL: url}, Options{})
			if err != nil {
				errs <- err
				return
			}
			defer h.Close()
			_, err = h.Migrate(ctx, testMigrations, "test_ctx")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
