// Package dbtest gives tests real databases: a fresh PostgreSQL database per
// call (created on the server named by METALLO_TEST_DATABASE_URL, else the
// local server at 127.0.0.1:5432, and dropped at cleanup), SQLite files in
// t.TempDir(), and in one call a database of either engine with a central
// context's migrations applied (Migrated). A test that asks for PostgreSQL and cannot reach it FAILS
// with the reason; it never skips, so the PostgreSQL lane cannot vanish
// quietly. Every PostgreSQL test logs the marker "metallo-lane: postgres",
// which the CI lane check counts.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/database"
)

// LaneMarker is logged by every test that uses a real PostgreSQL server.
const LaneMarker = "metallo-lane: postgres"

// DefaultServerURL is used when METALLO_TEST_DATABASE_URL is unset.
const DefaultServerURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the administrative URL tests create databases through.
func ServerURL() string {
	if u := os.Getenv("METALLO_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultServerURL
}

// TB is what NewPostgres needs of its caller: a test (testing.TB has
// every method), or a program standing in for one (make demo's Git host,
// platform/gittest). Fatalf must not return.
type TB interface {
	Helper()
	Log(args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// NewPostgres creates an empty database and returns its URL. The database is
// dropped (with FORCE) when the test ends.
func NewPostgres(tb TB) string {
	tb.Helper()
	tb.Log(LaneMarker)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := ServerURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("PostgreSQL lane cannot start: connect to %s: %v (set METALLO_TEST_DATABASE_URL or start the local server)", redact(admin), err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "metallo_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("PostgreSQL lane cannot start: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("parse %s: %v", redact(admin), err)
	}
	u.Path = "/" + name
	return u.String()
}

// SQLitePath returns a path for a new SQLite file in a fresh temporary
// directory.
func SQLitePath(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), name)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable url>"
	}
	return u.Redacted()
}

// Must fails tb on err; a convenience for test set-up.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(fmt.Errorf("set-up: %w", err))
	}
}

// Migrated returns a fresh database of engine with every migration of the
// central context db applied — on PostgreSQL a new database (NewPostgres),
// on SQLite a file in a fresh temporary directory — opened with default
// options. The handle is closed when the test ends; h.Target names the
// database (its URL or file).
func Migrated(tb testing.TB, db database.Context, engine database.Engine) *database.Handle {
	tb.Helper()
	return MigratedWith(tb, db, engine, database.Options{})
}

// MigratedWith is Migrated with opts (the pool bound, SQLite's busy
// timeout).
func MigratedWith(tb testing.TB, db database.Context, engine database.Engine, opts database.Options) *database.Handle {
	tb.Helper()
	var target database.Target
	switch engine {
	case database.Postgres:
		target = database.Target{Engine: database.Postgres, URL: NewPostgres(tb)}
	case database.SQLite:
		target = database.Target{Engine: database.SQLite, Path: SQLitePath(tb, db.Name+".sqlite")}
	default:
		tb.Fatalf("set-up: unknown engine %q", engine)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := database.Open(ctx, target, opts)
	Must(tb, err)
	tb.Cleanup(h.Close)
	Must(tb, db.Prepare(ctx, h, true, zap.NewNop()))
	return h
}
