package database_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

// testContext is a central context named test_ctx served by role "test",
// with two migrations on either engine.
func testContext() database.Context {
	m := fstest.MapFS{
		"00001_things.sql": {Data: []byte("-- +goose Up\nCREATE TABLE things (id INTEGER PRIMARY KEY);\n-- +goose Down\nDROP TABLE things;\n")},
		"00002_more.sql":   {Data: []byte("-- +goose Up\nALTER TABLE things ADD COLUMN name TEXT;\n-- +goose Down\nSELECT 1;\n")},
	}
	return database.NewContext("test_ctx", "test", func(database.Engine) (fs.FS, error) { return m, nil })
}

func TestNewContextNamesTheRolesFlagsAndDefaultFile(t *testing.T) {
	c := testContext()
	if c.URLFlag != "test-database-url" || c.MaxConnsFlag != "test-database-max-conns" || c.DefaultPath != "./var/test.sqlite" || c.DefaultMaxConns != database.DefaultMaxConns {
		t.Fatalf("%+v", c)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	c := testContext()
	if err := c.Validate(database.Settings{MaxConns: 1}); err != nil {
		t.Fatal(err)
	}
	for flag, s := range map[string]database.Settings{
		"test-database-url":       {URL: "mysql://x", MaxConns: 1},
		"test-database-max-conns": {MaxConns: 0},
	} {
		var fe *config.FlagError
		if err := c.Validate(s); !errors.As(err, &fe) || fe.Flag != flag {
			t.Errorf("%+v: %v, want a flag error naming %s", s, err, flag)
		}
	}
}

func TestDescribeSaysWhichDatabase(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := testContext()
	c.Describe(zap.New(core), database.Settings{})
	c.Describe(zap.New(core), database.Settings{URL: "postgres://u:secret@127.0.0.1:5432/db"})
	all := logs.All()
	if len(all) != 2 || !strings.Contains(all[0].Message, "embedded default SQLite ./var/test.sqlite (set --test-database-url for PostgreSQL)") ||
		!strings.Contains(all[1].Message, "127.0.0.1:5432/db") || strings.Contains(all[1].Message, "secret") {
		t.Fatalf("logs %+v", all)
	}
}

// TestProvideMigratesOrRefusesInTheStartHook: constructing the handle
// opens the database; start applies the migrations with Migrate and
// refuses while any is pending without it, on both engines.
func TestProvideMigratesOrRefusesInTheStartHook(t *testing.T) {
	c := testContext()
	for name, url := range map[string]string{
		"sqlite":   "sqlite:" + filepath.Join(t.TempDir(), "x.sqlite"),
		"postgres": dbtest.NewPostgres(t),
	} {
		t.Run(name, func(t *testing.T) {
			refused := fx.New(fx.NopLogger, fx.Provide(func() *zap.Logger { return zap.NewNop() }, c.Provide(database.Settings{URL: url})), fx.Invoke(func(*database.Handle) {}))
			dbtest.Must(t, refused.Err())
			if err := refused.Start(context.Background()); !errors.Is(err, database.ErrPendingMigrations) {
				t.Fatalf("start without migrate: %v, want ErrPendingMigrations", err)
			}
			if err := c.CheckMigrated(context.Background(), database.Settings{URL: url}); !errors.Is(err, database.ErrPendingMigrations) {
				t.Fatalf("CheckMigrated: %v, want ErrPendingMigrations", err)
			}
			var h *database.Handle
			app := fxtest.New(t, fx.Provide(func() *zap.Logger { return zap.NewNop() }, c.Provide(database.Settings{URL: url, Migrate: true})), fx.Populate(&h))
			app.RequireStart()
			var n int
			if err := h.DB.QueryRowContext(t.Context(), "SELECT count(*) FROM things").Scan(&n); err != nil {
				t.Fatalf("the migrations were not applied: %v", err)
			}
			app.RequireStop()
			if err := c.CheckMigrated(context.Background(), database.Settings{URL: url}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTheReadinessCheckShowsNoDriverText: a failed ping is "not
// reachable"; the log keeps the cause.
func TestTheReadinessCheckShowsNoDriverText(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	sentinel := errors.New("test store unavailable")
	cause := errors.New("dial tcp 10.0.0.7:5432: connection refused for user secret_user")
	check := testContext().ReadinessCheck(pinger{&database.UnavailableError{Sentinel: sentinel, Op: "postgres ping", Cause: cause}}, zap.New(core))
	err := check.Check(t.Context())
	if err == nil || strings.Contains(err.Error(), "secret_user") || check.Name != "test_ctx database" {
		t.Fatalf("%s: %v", check.Name, err)
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].ContextMap()["cause"].(string), "secret_user") {
		t.Fatalf("the log lost the cause: %+v", logs.All())
	}
}

type pinger struct{ err error }

func (p pinger) Ping(context.Context) error { return p.err }

func TestMarkUnavailableKeepsDriverTextOutOfTheMessage(t *testing.T) {
	sentinel := errors.New("test store unavailable")
	down := errors.New("closed pool")
	err := database.MarkUnavailable(sentinel, "postgres", down)
	if err.Error() != sentinel.Error() || !errors.Is(err, sentinel) || !errors.Is(err, down) || database.LogCause(err) != "postgres: closed pool" {
		t.Fatalf("%v (cause %q)", err, database.LogCause(err))
	}
	if again := database.MarkUnavailable(sentinel, "postgres", err); again != err {
		t.Fatalf("marked twice: %v", again)
	}
	other := errors.New("syntax error")
	if got := database.MarkUnavailable(sentinel, "postgres", other); got != other || database.LogCause(got) != "" {
		t.Fatalf("not unavailability: %v", got)
	}
	if database.MarkUnavailable(sentinel, "postgres", nil) != nil {
		t.Fatal("nil must stay nil")
	}
}
