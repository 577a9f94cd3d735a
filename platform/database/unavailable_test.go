package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestUnavailableClassifiesPostgreSQLErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"caller cancelled", fmt.Errorf("query: %w", context.Canceled), false},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{"database does not exist", &pgconn.PgError{Code: "3D000"}, true},
		{"authentication failed", &pgconn.PgError{Code: "28P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"database dropped", &pgconn.PgError{Code: "57P04"}, true},
		{"statement timeout is not unavailability", &pgconn.PgError{Code: "57014"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"closed pool", errors.New("closed pool"), true},
		{"closed conn", errors.New("conn closed"), true},
		{"other", errors.New("syntax error"), false},
	}
	for _, c := range cases {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("%s: Unavailable(%v) = %v; want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestUnavailableClassifiesSQLiteErrors(t *testing.T) {
	ctx := context.Background()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "a.sqlite"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	_, syntax := db.ExecContext(ctx, `SELEKT 1`)
	if syntax == nil || Unavailable(syntax) {
		t.Fatalf("a syntax error is not unavailability: %v", syntax)
	}
	_, _ = db.ExecContext(ctx, `INSERT INTO t (id) VALUES (1)`)
	_, dup := db.ExecContext(ctx, `INSERT INTO t (id) VALUES (1)`)
	if dup == nil || Unavailable(dup) {
		t.Fatalf("a constraint violation is not unavailability: %v", dup)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, closed := db.ExecContext(ctx, `SELECT 1`)
	if !Unavailable(closed) {
		t.Fatalf("a closed database is unavailable: %v", closed)
	}
	gone, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "missing", "b.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if err := gone.PingContext(ctx); !Unavailable(err) {
		t.Fatalf("a file in a missing directory (SQLITE_CANTOPEN) is unavailable: %v", err)
	}
}
