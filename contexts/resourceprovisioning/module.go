// Package resourceprovisioning composes the resource_provisioning context:
// its own database (PostgreSQL, or the embedded default SQLite file), its
// goose migrations (version table goose_resource_provisioning), the
// application service, the HTTP routes under /resource-provisioning, a
// readiness check and its metrics (docs/resource-provisioning.md).
package resourceprovisioning

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/platform/background"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/environments"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

// Names of the context.
const (
	// Name is the context's name (Fx module, log field "context", OpenAPI tag).
	Name = "resource_provisioning"
	// MigrationsDir is the context's directory under sql/<engine>/.
	MigrationsDir = "resourceprovisioning"
	// DefaultMaxConns is the default PostgreSQL pool size.
	DefaultMaxConns = database.DefaultMaxConns
)

// Config is the context's configuration (flags of the provisioning role).
type Config struct {
	// DatabaseURL is --provisioning-database-url: postgres://…, sqlite:<path>,
	// or empty for Database().DefaultPath.
	DatabaseURL string
	// MaxConns bounds the PostgreSQL pool (0: DefaultMaxConns; the flag
	// takes at least 1).
	MaxConns int32
	// WaldurInstance is --waldur-instance, the Waldur instance URL that
	// Project events must name to resolve allocations.
	WaldurInstance string
	// Freshness is --allocation-freshness (default 15 minutes).
	Freshness time.Duration
	// ReportClockSkew is --report-clock-skew (default 5 minutes): how far a
	// report's observed_at may lie beyond the server clock.
	ReportClockSkew time.Duration
	// Migrate applies pending migrations at start; otherwise start fails
	// while migrations are pending.
	Migrate bool
}

// Database is the context's own database: flags --provisioning-database-url and
// --provisioning-database-max-conns, the embedded default SQLite file
// ./var/provisioning.sqlite (docs/architecture.md#a-central-contexts-database).
func Database() database.Context {
	return database.NewContext(Name, "provisioning", func(e database.Engine) (fs.FS, error) { return sqlfiles.Migrations(string(e), MigrationsDir) })
}

// DatabaseSettings returns the database values of the configuration.
func (c Config) DatabaseSettings() database.Settings {
	return database.Settings{URL: c.DatabaseURL, MaxConns: c.MaxConns, Migrate: c.Migrate}
}

// Validate checks the configuration serve needs, before anything opens.
// It reports every fault at once (errors.Join), each a *config.FlagError
// naming the flag and its variable.
func (c Config) Validate() error {
	errs := []error{Database().Validate(c.DatabaseSettings())}
	if c.WaldurInstance == "" {
		errs = append(errs, config.Invalid("waldur-instance", "", errors.New("required: the Waldur instance URL that Beto's Project bindings name (e.g. https://waldur.example.org)")))
	} else if u, err := url.Parse(c.WaldurInstance); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, config.Invalid("waldur-instance", c.WaldurInstance, errors.New("want an absolute https (or http) URL without user, query or fragment, such as https://waldur.example.org")))
	}
	if c.Freshness <= 0 {
		errs = append(errs, config.Invalid("allocation-freshness", c.Freshness.String(), errors.New("must be positive")))
	}
	if c.ReportClockSkew <= 0 {
		errs = append(errs, config.Invalid("report-clock-skew", c.ReportClockSkew.String(), errors.New("must be positive")))
	}
	return errors.Join(errs...)
}

// Store is an application.Store that may hold resources of its own.
type Store interface {
	application.Store
	Close() error
}

// NewStore returns the store adaptor for h's engine.
func NewStore(h *database.Handle) (Store, error) {
	switch h.Target.Engine {
	case database.Postgres:
		return pgstore.New(h.Pool), nil
	case database.SQLite:
		return sqlitestore.New(h.DB, h.Target.Path)
	}
	return nil, fmt.Errorf("no store for engine %q", h.Target.Engine)
}

// SweepInterval is how often the module positions changes a failed
// sequencer run left without a feed position (PostgreSQL).
const SweepInterval = 5 * time.Second

// sequencer is a store whose change feed positions committed changes after
// their transaction (pgstore.Store).
type sequencer interface {
	PositionChanges(ctx context.Context) (int64, error)
}

// sweep runs the sequencer at start and every SweepInterval until stop, so a
// change committed just before a crash or a database failure gets its feed
// position even when no further material change arrives.
func sweep(lc fx.Lifecycle, seq sequencer, log *zap.Logger) {
	background.Run(lc, "change feed sweep", func(ctx context.Context) {
		t := time.NewTicker(SweepInterval)
		defer t.Stop()
		for {
			if n, err := seq.PositionChanges(ctx); err != nil && ctx.Err() == nil {
				log.Warn("positioning changes failed; retrying", zap.Error(err))
			} else if n > 0 {
				log.Info("positioned changes left without a feed position", zap.Int64("changes", n))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// NewService builds the application service on store without Fx; envs
// gives each environment's Site (nil: none configured).
func NewService(store application.Store, clk application.Clock, log *zap.Logger, reg prometheus.Registerer, cfg Config, envs application.EnvironmentSites) (*application.Service, error) {
	tel, err := telemetry.New(log, reg)
	if err != nil {
		return nil, err
	}
	return application.NewService(store, clk, tel, application.Config{WaldurInstance: cfg.WaldurInstance, Freshness: cfg.Freshness, ClockSkew: cfg.ReportClockSkew, Environments: envs})
}

// SitesInUse is each environment's Site in the version of environments.yaml
// in use (application.EnvironmentSites): the configuration the execution
// role reads too, so both roles agree on every environment's Site.
type SitesInUse struct{ Source *environments.Source }

// Sites implements application.EnvironmentSites.
func (s SitesInUse) Sites() map[string]string { return s.Source.Current().Sites() }

// Backends implements application.EnvironmentSites.
func (s SitesInUse) Backends() map[string]siteprotocol.Backend { return s.Source.Current().Backends() }

// Module composes the context for cfg, which has passed Validate (the
// role's Preflight), and environments.yaml from the process
// (platform/environments.Module, shared by the central roles). It
// provides *application.Service (public, for in-process owner adaptors),
// HTTP routes and a readiness check; the database handle and store are
// private.
func Module(cfg Config) fx.Option {
	return fx.Module(Name,
		fx.Decorate(contextLogger),
		fx.Supply(fx.Private, cfg),
		fx.Provide(
			fx.Private,
			Database().Provide(cfg.DatabaseSettings()),
			newSweptStore,
		),
		fx.Provide(
			newService,
			httpserver.AsRegistrar(newRegistrar),
			httpserver.AsReadinessCheck(newReadinessCheck),
		),
	)
}

// contextLogger names the context on every log line of its components.
func contextLogger(log *zap.Logger) *zap.Logger { return log.With(zap.String("context", Name)) }

// newSweptStore opens the store of the handle's engine, runs the change
// feed's sweep where the engine needs one (PostgreSQL's sequencer) and
// closes the store at stop.
func newSweptStore(lc fx.Lifecycle, h *database.Handle, log *zap.Logger) (Store, error) {
	s, err := NewStore(h)
	if err != nil {
		return nil, err
	}
	if seq, ok := s.(sequencer); ok {
		sweep(lc, seq, log)
	}
	lc.Append(fx.StopHook(s.Close))
	return s, nil
}

// newService is the context's application service for the configuration.
func newService(cfg Config, s Store, clk clock.Clock, log *zap.Logger, reg prometheus.Registerer, envs *environments.Source) (*application.Service, error) {
	return NewService(s, clk, log, reg, cfg, SitesInUse{envs})
}

// newRegistrar registers the context's HTTP operations (adaptors/httpapi).
func newRegistrar(svc *application.Service, log *zap.Logger) httpserver.Registrar {
	h := &httpapi.Handlers{Service: svc, Log: log}
	return httpserver.RegistrarFunc(func(api huma.API) { httpapi.Register(api, h) })
}

// newReadinessCheck pings the store's write connection and its read pool.
func newReadinessCheck(svc *application.Service, log *zap.Logger) httpserver.ReadinessCheck {
	return Database().ReadinessCheck(svc, log)
}
