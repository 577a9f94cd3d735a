// Package database opens a context's own database — PostgreSQL through a pgx
// pool, or a SQLite file through database/sql with modernc's pure-Go driver —
// and runs that context's embedded goose migrations with its own version
// table (goose_<context>). It provides no domain types: each context builds
// its store adaptor on the Handle it gets.
// See docs/architecture.md#one-binary-roles-per-process.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	// Registers the "sqlite" database/sql driver (modernc.org/sqlite, pure Go).
	_ "modernc.org/sqlite"
)

// Engine is a storage engine.
type Engine string

// Engines.
const (
	Postgres Engine = "postgres"
	SQLite   Engine = "sqlite"
)

// Target is a parsed database URL.
type Target struct {
	Engine Engine
	// URL is the PostgreSQL connection string (Engine == Postgres).
	URL string
	// Path is the SQLite file (Engine == SQLite).
	Path string
	// Default is true when no URL was configured and the embedded default
	// SQLite file is used.
	Default bool
}

// String describes the target without credentials.
func (t Target) String() string {
	if t.Engine == SQLite {
		return "sqlite:" + t.Path
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return "postgres"
	}
	u.User = nil
	return u.Redacted()
}

// ErrBadURL is wrapped by ParseURL's errors.
var ErrBadURL = errors.New("bad database url")

// ParseURL reads a database URL: "postgres://…" or "postgresql://…" for
// PostgreSQL; "sqlite:<path>", "sqlite://<abs path>" or "file:<path>" for
// SQLite; empty for the embedded default SQLite file defaultPath.
func ParseURL(raw, defaultPath string) (Target, error) {
	switch {
	case raw == "":
		return Target{Engine: SQLite, Path: defaultPath, Default: true}, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		if _, err := pgxpool.ParseConfig(raw); err != nil {
			return Target{}, fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		return Target{Engine: Postgres, URL: raw}, nil
	case strings.HasPrefix(raw, "sqlite://"):
		return sqliteTarget(strings.TrimPrefix(raw, "sqlite://"))
	case strings.HasPrefix(raw, "sqlite:"):
		return sqliteTarget(strings.TrimPrefix(raw, "sqlite:"))
	case strings.HasPrefix(raw, "file:"):
		return sqliteTarget(strings.TrimPrefix(raw, "file:"))
	}
	return Target{}, fmt.Errorf("%w: want postgres://…, sqlite:<path> or file:<path>", ErrBadURL)
}

func sqliteTarget(path string) (Target, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return Target{}, fmt.Errorf("%w: sqlite path must be a plain file path", ErrBadURL)
	}
	return Target{Engine: SQLite, Path: path}, nil
}

// Handle is an open database of one context.
type Handle struct {
	Target Target
	// Pool is set for PostgreSQL.
	Pool *pgxpool.Pool
	// DB is set for SQLite; for PostgreSQL it is a database/sql view of Pool
	// used only by migrations.
	DB *sql.DB
}

// Options tune Open.
type Options struct {
	// MaxConns bounds the PostgreSQL pool (default: pgx's default).
	MaxConns int32
	// BusyTimeout is SQLite's busy timeout (default 10 s).
	BusyTimeout time.Duration
}

// Open opens t. PostgreSQL pools connect lazily; a SQLite file is created
// if missing (its directory too for the embedded default only; a configured
// path whose directory is missing is an error), in WAL mode with synchronous=FULL,
// foreign keys on, the busy timeout set and write transactions taken with
// BEGIN IMMEDIATE. SQLite handles use one connection, so the process's
// writes are serialised without SQLITE_BUSY upgrades.
func Open(ctx context.Context, t Target, opts Options) (*Handle, error) {
	switch t.Engine {
	case Postgres:
		cfg, err := pgxpool.ParseConfig(t.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		if opts.MaxConns > 0 {
			cfg.MaxConns = opts.MaxConns
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("open postgres %s: %w", t, err)
		}
		return &Handle{Target: t, Pool: pool, DB: stdlib.OpenDBFromPool(pool)}, nil
	case SQLite:
		if t.Default {
			// Only the embedded default's directory (./var) is made: a
			// configured path names a directory that must exist, so a
			// mistyped one is an error, not a new tree.
			if err := os.MkdirAll(filepath.Dir(t.Path), 0o750); err != nil {
				return nil, fmt.Errorf("create directory for %s: %w", t.Path, err)
			}
		}
		db, err := OpenSQLite(t.Path, opts.BusyTimeout)
		if err != nil {
			return nil, err
		}
		return &Handle{Target: t, DB: db}, nil
	}
	return nil, fmt.Errorf("%w: unknown engine %q", ErrBadURL, t.Engine)
}

// OpenSQLite opens (creating if needed) the SQLite file at path with the
// settings described at Open, on a single connection. Its directory must
// exist: an error wrapping fs.ErrNotExist otherwise.
func OpenSQLite(path string, busy time.Duration) (*sql.DB, error) {
	if busy == 0 {
		busy = 10 * time.Second
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("open sqlite %s: its directory: %w", path, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("open sqlite %s: %s is not a directory", path, filepath.Dir(path))
	}
	dsn := SQLiteDSN(path, busy, "synchronous(FULL)") + "&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return db, nil
}

// OpenSQLiteReadPool opens a read-only pool of at most conns connections
// on the SQLite file at path (query_only, the WAL settings of Open and a
// 10 s busy timeout): reads through it never wait for the write
// connection's transactions and see committed data only.
func OpenSQLiteReadPool(path string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", SQLiteDSN(path, 10*time.Second, "query_only(1)"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite read pool %s: %w", path, err)
	}
	db.SetMaxOpenConns(conns)
	return db, nil
}

// ConnectOutsidePool opens one connection with pool's settings that is not
// one of the pool's, for a session that holds its connection (LISTEN).
func ConnectOutsidePool(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
}

// SQLiteDSN returns a modernc DSN for path with WAL, foreign keys, the busy
// timeout and any extra pragmas (e.g. "synchronous(FULL)", "query_only(1)").
func SQLiteDSN(path string, busy time.Duration, pragmas ...string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return "file:" + path + "?" + q.Encode()
}

// Ping checks the database answers.
func (h *Handle) Ping(ctx context.Context) error {
	if h.Pool != nil {
		return h.Pool.Ping(ctx)
	}
	return h.DB.PingContext(ctx)
}

// Close releases the handle.
func (h *Handle) Close() {
	if h.DB != nil {
		_ = h.DB.Close()
	}
	if h.Pool != nil {
		h.Pool.Close()
	}
}

// VersionTable returns the goose version table of a context:
// "goose_<context>", e.g. goose_resource_provisioning.
func VersionTable(contextName string) string { return "goose_" + contextName }

func (h *Handle) provider(migrations fs.FS, contextName string) (*goose.Provider, error) {
	dialect := goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithTableName(VersionTable(contextName)), goose.WithDisableGlobalRegistry(true)}
	if h.Target.Engine == Postgres {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, h.DB, migrations, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s migrations: %w", contextName, err)
	}
	return p, nil
}

// Migrate applies every pending migration of contextName and returns the
// versions applied. On PostgreSQL a session advisory lock serialises
// concurrent migrators.
func (h *Handle) Migrate(ctx context.Context, migrations fs.FS, contextName string) ([]int64, error) {
	p, err := h.provider(migrations, contextName)
	if err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s on %s: %w", contextName, h.Target, err)
	}
	applied := make([]int64, 0, len(res))
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// MigrateTo migrates contextName up or down to version (tests of a
// migration over the rows of the version before it) and returns the
// schema's version afterwards, also when a migration failed (a failed
// migration is rolled back: the version stays the last one applied).
func (h *Handle) MigrateTo(ctx context.Context, migrations fs.FS, contextName string, version int64) (int64, error) {
	p, err := h.provider(migrations, contextName)
	if err != nil {
		return 0, err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the %s schema version on %s: %w", contextName, h.Target, err)
	}
	if version >= current {
		_, err = p.UpTo(ctx, version)
	} else {
		_, err = p.DownTo(ctx, version)
	}
	after, verr := p.GetDBVersion(ctx)
	if err != nil {
		return after, fmt.Errorf("migrate %s on %s to version %d: %w", contextName, h.Target, version, err)
	}
	return after, verr
}

// ErrPendingMigrations is returned by CheckMigrated when the schema is
// behind the binary.
var ErrPendingMigrations = errors.New("database has pending migrations")

// CheckMigrated returns an error wrapping ErrPendingMigrations when any
// migration of contextName is not applied yet.
func (h *Handle) CheckMigrated(ctx context.Context, migrations fs.FS, contextName string) error {
	p, err := h.provider(migrations, contextName)
	if err != nil {
		return err
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("read %s schema version on %s: %w", contextName, h.Target, err)
	}
	if current < target {
		return fmt.Errorf("%w: %s on %s is at version %d, this binary needs %d; run `metallo migrate` or start with --migrate",
			ErrPendingMigrations, contextName, h.Target, current, target)
	}
	return nil
}
