// Package dbtest gives tests real databases: a fresh PostgreSQL database per
// call (created on the server named by METALLO_TEST_DATABASE_URL, else the
// local server at 127.0.0.1:5432, and dropped at cleanup; one left by a
// process killed before its cleanup is dropped by the next call on the same
// host), SQLite files in
// t.TempDir(), and in one call a database of either engine with a central
// context's migrations applied (Migrated). A test that asks for PostgreSQL and cannot reach it FAILS
// with the reason; it never skips, so the PostgreSQL lane cannot vanish
// quietly. Every PostgreSQL test logs the marker "metallo-lane: postgres",
// which the CI lane check counts.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/testsetup"
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
// every method), or a program standing in for one. Fatalf must not
// return.
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
	sweep(ctx, tb, conn)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "metallo_test_" + hex.EncodeToString(b[:]) + ownerSuffix(os.Getpid())
	dbURL, drop, err := database.CreatePostgres(ctx, admin, name)
	if err != nil {
		tb.Fatalf("PostgreSQL lane cannot start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	return dbURL
}

// ownerName matches the name of a database NewPostgres created: after
// the random part, the creator's host (the first 8 hex digits of the
// SHA-256 of its hostname), pid and start time (field 22 of
// /proc/<pid>/stat), so that a recycled pid is never taken for the owner.
// The owner is in the name, not in a comment, so that no database exists
// for an instant without it.
var ownerName = regexp.MustCompile(`^metallo_test_[0-9a-f]{12}_([0-9a-f]{8})_([0-9]+)_([0-9]+)$`)

// hostTag is the host part of ownerName for this host, or "" when the
// hostname cannot be read.
func hostTag() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}

// ownerSuffix is the owner part of a database name for process pid on
// this host ("_<host>_<pid>_<start>"), or "" when the host or the
// process's start time cannot be read (such a database is never swept).
func ownerSuffix(pid int) string {
	host, start := hostTag(), testsetup.ProcessStart(pid)
	if host == "" || start == "" {
		return ""
	}
	return fmt.Sprintf("_%s_%d_%s", host, pid, start)
}

// ownerGone tells whether name is a database NewPostgres created on the
// host whose hostTag is host for a process that no longer runs; a name
// without an owner, or of another host, is never gone.
func ownerGone(name, host string) bool {
	m := ownerName.FindStringSubmatch(name)
	if m == nil || host == "" || m[1] != host {
		return false
	}
	pid, err := strconv.Atoi(m[2])
	return err == nil && testsetup.ProcessStart(pid) != m[3]
}

// sweep drops the test databases whose creating process on this host no
// longer runs (ownerGone): a test binary or make demo killed before its
// cleanup (a kill test's SIGKILL, a timeout) leaves its database behind,
// and a run of many kill tests would fill the server. Databases of other
// hosts, and those without an owner in their name, are left alone. A
// failure to sweep is logged, never fatal: it takes nothing from the test.
func sweep(ctx context.Context, tb TB, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'metallo\_test\_%'`)
	if err != nil {
		tb.Log(fmt.Sprintf("dbtest: list test databases to sweep: %v", err))
		return
	}
	host := hostTag()
	var stale []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err == nil && ownerGone(name, host) {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, name := range stale {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Log(fmt.Sprintf("dbtest: drop stale test database %s: %v", name, err))
			continue
		}
		tb.Log(fmt.Sprintf("dbtest: dropped %s, left by a process that ended before its cleanup", name))
	}
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
