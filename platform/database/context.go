package database

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// Context is a central context's own database: the one helper both central
// contexts (resource_provisioning, execution_ports) open, migrate or check,
// and report readiness with. Both migrate the same way: the handle is
// opened when Fx constructs it, and pending migrations are applied (with
// --migrate) or refused in its start hook, bounded by Fx's start timeout
// (docs/architecture.md#a-central-contexts-database).
type Context struct {
	// Name is the context's name, e.g. "execution_ports": its version
	// table is goose_<Name>, its readiness check "<Name> database".
	Name string
	// URLFlag and MaxConnsFlag name the context's flags (without "--"),
	// e.g. "execution-database-url", for errors.
	URLFlag, MaxConnsFlag string
	// DefaultPath is the embedded default SQLite file (an empty URL).
	DefaultPath string
	// DefaultMaxConns bounds the PostgreSQL pool when Settings.MaxConns is 0.
	DefaultMaxConns int32
	// Migrations returns the context's embedded migrations for engine.
	Migrations func(engine Engine) (fs.FS, error)
}

// DefaultMaxConns is the default PostgreSQL pool bound of a central context.
const DefaultMaxConns = 16

// NewContext returns the database of the central context name served by
// role, with migrations: its flags are --<role>-database-url and
// --<role>-database-max-conns, its embedded default SQLite file
// ./var/<role>.sqlite, its pool bound DefaultMaxConns.
func NewContext(name, role string, migrations func(Engine) (fs.FS, error)) Context {
	return Context{
		Name: name, URLFlag: role + "-database-url", MaxConnsFlag: role + "-database-max-conns",
		DefaultPath: "./var/" + role + ".sqlite", DefaultMaxConns: DefaultMaxConns, Migrations: migrations,
	}
}

// Settings are a context's configured database values.
type Settings struct {
	// URL is the database URL (ParseURL); empty for DefaultPath.
	URL string
	// MaxConns bounds the PostgreSQL pool (0: DefaultMaxConns).
	MaxConns int32
	// Migrate applies pending migrations at start; otherwise start fails
	// while any is pending.
	Migrate bool
}

// Target parses s.URL (empty: c.DefaultPath).
func (c Context) Target(s Settings) (Target, error) { return ParseURL(s.URL, c.DefaultPath) }

// Validate checks s, reporting every fault at once (errors.Join), each a
// *config.FlagError naming its flag: a URL ParseURL refuses, a pool bound
// below 1.
func (c Context) Validate(s Settings) error {
	var errs []error
	if _, err := c.Target(s); err != nil {
		errs = append(errs, config.Invalid(c.URLFlag, s.URL, err))
	}
	if s.MaxConns < 1 {
		errs = append(errs, config.Invalid(c.MaxConnsFlag, fmt.Sprint(s.MaxConns), errors.New("must be at least 1")))
	}
	return errors.Join(errs...)
}

// Describe logs which database s names: the embedded default SQLite file
// (and the flag that picks PostgreSQL instead), or the target without
// credentials.
func (c Context) Describe(log *zap.Logger, s Settings) {
	t, err := c.Target(s)
	switch {
	case err != nil:
		return
	case t.Default:
		log.Info("using the embedded default SQLite " + t.Path + " (set --" + c.URLFlag + " for PostgreSQL)")
	default:
		log.Info("using " + t.String())
	}
}

// Open opens the database s names, without migrating; errors name the URL
// flag when the URL is bad.
func (c Context) Open(ctx context.Context, s Settings) (*Handle, error) {
	t, err := c.Target(s)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", c.URLFlag, err)
	}
	maxConns := s.MaxConns
	if maxConns <= 0 {
		maxConns = c.DefaultMaxConns
	}
	return Open(ctx, t, Options{MaxConns: maxConns})
}

// Prepare applies h's pending migrations (migrate) or returns an error
// wrapping ErrPendingMigrations when any is pending.
func (c Context) Prepare(ctx context.Context, h *Handle, migrate bool, log *zap.Logger) error {
	m, err := c.Migrations(h.Target.Engine)
	if err != nil {
		return err
	}
	if !migrate {
		return h.CheckMigrated(ctx, m, c.Name)
	}
	applied, err := h.Migrate(ctx, m, c.Name)
	if err != nil {
		return err
	}
	log.Info("database migrated", zap.Stringer("database", h.Target), zap.Int64s("applied", applied))
	return nil
}

// Migrate opens the database s names, applies its pending migrations and
// closes it (`metallo migrate`).
func (c Context) Migrate(ctx context.Context, s Settings, log *zap.Logger) error {
	return c.once(ctx, s, func(h *Handle) error { return c.Prepare(ctx, h, true, log) })
}

// CheckMigrated opens the database s names on one connection and returns
// an error wrapping ErrPendingMigrations when any migration is pending
// (`metallo serve` checks every role this way when start-up stops on one).
func (c Context) CheckMigrated(ctx context.Context, s Settings) error {
	s.MaxConns = 1
	return c.once(ctx, s, func(h *Handle) error { return c.Prepare(ctx, h, false, zap.NewNop()) })
}

func (c Context) once(ctx context.Context, s Settings, fn func(*Handle) error) error {
	h, err := c.Open(ctx, s)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(h)
}

// Provide returns the Fx constructor of the context's handle: it opens the
// database s names, prepares it (Prepare, with s.Migrate) in its start
// hook, and closes it in its stop hook.
func (c Context) Provide(s Settings) func(fx.Lifecycle, *zap.Logger) (*Handle, error) {
	return func(lc fx.Lifecycle, log *zap.Logger) (*Handle, error) {
		h, err := c.Open(context.Background(), s)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.Hook{
			OnStart: func(ctx context.Context) error { return c.Prepare(ctx, h, s.Migrate, log) },
			OnStop:  func(context.Context) error { h.Close(); return nil },
		})
		return h, nil
	}
}

// Pinger is what a readiness check pings: a Handle, or a store that pings
// every connection pool it holds.
type Pinger interface {
	Ping(ctx context.Context) error
}

// errNotReachable is what /readyz shows of a failed ping.
var errNotReachable = errors.New("not reachable")

// ReadinessCheck is the context's database check for /readyz, named
// "<Name> database": it pings p. A failure is logged once, with the
// driver's text (LogCause), and reported only as "not reachable": /readyz
// is unauthenticated and the driver's text can name the database's host,
// user, database or file.
func (c Context) ReadinessCheck(p Pinger, log *zap.Logger) httpserver.ReadinessCheck {
	return httpserver.ReadinessCheck{Name: c.Name + " database", Check: func(ctx context.Context) error {
		if err := p.Ping(ctx); err != nil {
			fields := []zap.Field{zap.Error(err)}
			if cause := LogCause(err); cause != "" {
				fields = append(fields, zap.String("cause", cause))
			}
			log.Warn("readiness: database ping failed", fields...)
			return errNotReachable
		}
		return nil
	}}
}
