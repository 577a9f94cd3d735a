// Package executionports composes the execution_ports context (role
// execution): the Site protocol's server side, the owner ports and capacity
// planning (docs/execution-ports.md, docs/site-protocol.md). Module is its one Fx
// option; the exported constructors build the same pieces without Fx.
package executionports

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/environments"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpowners"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/inprocessowners"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/pgstore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/tokenreview"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/background"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

// Names of the context.
const (
	// Name is the Fx module name, log field and OpenAPI tag.
	Name = "execution_ports"
	// MigrationsDir is the context's directory under sql/<engine>/.
	MigrationsDir = "executionports"
	// DefaultDatabasePath is the embedded default SQLite database.
	DefaultDatabasePath = "./var/execution.sqlite"
	// DefaultMaxConns is the default PostgreSQL pool size.
	DefaultMaxConns = 16
	// OwnerName is the owner of allocations and member accounts.
	OwnerName = inprocessowners.OwnerName
)

// ResourceOwner selects the owner adaptor (docs/execution-ports.md#owner-adaptors).
type ResourceOwner string

// Owner adaptors.
const (
	// OwnerRefusing is the absence of a choice: start-up fails naming the
	// missing owner.
	OwnerRefusing ResourceOwner = ""
	// OwnerInProcess calls resource_provisioning composed in this process.
	OwnerInProcess ResourceOwner = "in-process"
	// OwnerHTTP reads the provisioning role's API with a service key.
	OwnerHTTP ResourceOwner = "http"
)

// Config is the context's configuration (flags of the execution role).
type Config struct {
	// DatabaseURL is the context's own database ("" = DefaultDatabasePath).
	DatabaseURL string
	// MaxConns bounds the PostgreSQL pool (0: DefaultMaxConns). Waiting
	// pulls hold no connection; LISTEN uses one connection of its own.
	MaxConns int32
	// Migrate applies pending migrations at start; otherwise start-up fails
	// on pending migrations.
	Migrate bool
	// EnvironmentsFile is environments.yaml.
	EnvironmentsFile string
	// ResourceOwner picks the owner adaptor.
	ResourceOwner ResourceOwner
	// ProvisioningURL and ProvisioningKeyFile configure OwnerHTTP.
	ProvisioningURL     string
	ProvisioningKeyFile string
	// Services are the service principal IDs allowed on Execution's routes
	// (default httpapi.DefaultService, i.e. service:execution).
	Services []string
	// PullRecheck is how often a waiting pull re-reads without a wake-up
	// (default application.DefaultRecheck).
	PullRecheck time.Duration
	// DeliveryInterval is the period of the binding delivery's full
	// reconcile (default application.DefaultDeliveryInterval; delivery.go).
	DeliveryInterval time.Duration
}

// ErrNoOwner is wrapped by the refusing owner adaptor's start-up error.
var ErrNoOwner = errors.New("no owner adaptor configured")

// Module composes the context for cfg.
//
// Without an owner adaptor (cfg.ResourceOwner empty) the module is an
// fx.Error naming the missing owner, so start-up fails before anything
// opens; with OwnerInProcess it fails at start unless resource_provisioning
// is composed in the same process.
func Module(cfg Config) fx.Option {
	if err := checkOwner(cfg); err != nil {
		return fx.Module(Name, fx.Error(err))
	}
	return fx.Module(Name,
		fx.Decorate(func(log *zap.Logger) *zap.Logger { return log.With(zap.String("context", Name)) }),
		fx.Provide(
			fx.Private,
			func(lc fx.Lifecycle, log *zap.Logger) (*database.Handle, error) {
				h, err := OpenDatabase(context.Background(), cfg.DatabaseURL, cfg.MaxConns, cfg.Migrate, log)
				if err != nil {
					return nil, err
				}
				lc.Append(fx.StopHook(h.Close))
				return h, nil
			},
			NewStore,
			func() (*environments.Set, error) { return LoadEnvironments(cfg.EnvironmentsFile) },
			func(s *environments.Set) application.Environments { return s },
			application.NewWakeups,
			func(store application.StreamStore, envs application.Environments, c clock.Clock, w *application.Wakeups) *application.Streams {
				return application.NewStreams(store, envs, c, w, cfg.PullRecheck)
			},
			ownerAdaptors(cfg),
			application.NewPlanner,
			NewDeliveryStore,
			newDeliverer,
		),
		fx.Provide(
			httpserver.AsRegistrar(func(s *application.Streams, p *application.Planner, d *application.Deliverer, log *zap.Logger) httpserver.Registrar {
				h := &httpapi.Handlers{Streams: s, Planner: p, Deliverer: d, Services: cfg.Services, Log: log}
				return httpserver.RegistrarFunc(func(api huma.API) { httpapi.Register(api, h) })
			}),
			auth.AsAuthenticator(NewAuthenticator),
			httpserver.AsReadinessCheck(ReadinessCheck),
		),
		fx.Invoke(func(application.ProjectResources, application.MemberAccounts, application.MemberBindings) {}),
		fx.Invoke(listenForAppends),
		fx.Invoke(func(lc fx.Lifecycle, d *application.Deliverer, log *zap.Logger) {
			RunDelivery(lc, d, cfg.DeliveryInterval, log)
		}),
		fx.Invoke(stopWaitingPulls),
	)
}

// OpenDatabase opens the context's database at rawURL (empty: the embedded
// default SQLite file; a PostgreSQL pool of maxConns, 0 meaning
// DefaultMaxConns) and applies pending migrations (migrate) or fails when
// any is pending.
func OpenDatabase(ctx context.Context, rawURL string, maxConns int32, migrate bool, log *zap.Logger) (*database.Handle, error) {
	target, err := database.ParseURL(rawURL, DefaultDatabasePath)
	if err != nil {
		return nil, fmt.Errorf("--execution-database-url: %w", err)
	}
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	h, err := database.Open(ctx, target, database.Options{MaxConns: maxConns})
	if err != nil {
		return nil, err
	}
	migrations, err := sqlfiles.Migrations(string(target.Engine), MigrationsDir)
	if err != nil {
		h.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if migrate {
		applied, err := h.Migrate(ctx, migrations, Name)
		if err != nil {
			h.Close()
			return nil, err
		}
		log.Info("database migrated", zap.Stringer("database", target), zap.Int64s("applied", applied))
		return h, nil
	}
	if err := h.CheckMigrated(ctx, migrations, Name); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// CheckMigrated opens the database at rawURL and returns an error wrapping
// database.ErrPendingMigrations when any of the context's migrations is not
// applied (`metallo serve` checks every role before it starts).
func CheckMigrated(ctx context.Context, rawURL string, log *zap.Logger) error {
	h, err := OpenDatabase(ctx, rawURL, 1, false, log)
	if err != nil {
		return err
	}
	h.Close()
	return nil
}

// Migrate applies the context's pending migrations to the database at
// rawURL (`metallo migrate --role execution`).
func Migrate(ctx context.Context, rawURL string, log *zap.Logger) error {
	h, err := OpenDatabase(ctx, rawURL, 0, true, log)
	if err != nil {
		return err
	}
	h.Close()
	return nil
}

// NewStore returns the stream store of the handle's engine.
func NewStore(h *database.Handle) application.StreamStore {
	if h.Pool != nil {
		return pgstore.New(h.Pool)
	}
	return sqlitestore.New(h.DB)
}

// errNotReachable is what /readyz shows of a failed ping.
var errNotReachable = errors.New("not reachable")

// ReadinessCheck pings the context's database for /readyz. A failure is
// logged with the driver's error and reported only as "not reachable":
// /readyz is unauthenticated and the driver's text can name the database's
// host, user, database or file.
func ReadinessCheck(h *database.Handle, log *zap.Logger) httpserver.ReadinessCheck {
	return httpserver.ReadinessCheck{Name: Name + " database", Check: func(ctx context.Context) error {
		if err := h.Ping(ctx); err != nil {
			log.Warn("readiness: database ping failed", zap.Error(err))
			return errNotReachable
		}
		return nil
	}}
}

// LoadEnvironments loads environments.yaml, naming the flag on failure.
func LoadEnvironments(path string) (*environments.Set, error) {
	s, err := environments.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--environments-file: %w", err)
	}
	return s, nil
}

// NewAuthenticator returns the authenticator of the environments' Runtimes:
// their static keys (hashes only, constant-time), then TokenReview for the
// environments configured with it. Principals are environment:<id>.
func NewAuthenticator(set *environments.Set) (auth.Authenticator, error) {
	chain := auth.Chain{set.Keys()}
	reviews := set.TokenReviews()
	if len(reviews) == 0 {
		return chain, nil
	}
	targets := make([]tokenreview.Target, 0, len(reviews))
	for _, r := range reviews {
		targets = append(targets, tokenreview.Target{Environment: r.Environment, Username: r.Username, Audience: r.Audience, Kubeconfig: r.Kubeconfig})
	}
	tr, err := tokenreview.New(targets)
	if err != nil {
		return nil, fmt.Errorf("--environments-file: %w", err)
	}
	return append(chain, tr), nil
}

// checkOwner refuses a configuration without a usable owner adaptor,
// naming the missing owner (docs/execution-ports.md#owner-adaptors).
func checkOwner(cfg Config) error {
	switch cfg.ResourceOwner {
	case OwnerInProcess, OwnerHTTP:
		return nil
	case OwnerRefusing:
		return fmt.Errorf("%w: %s needs its owner %s: set --resource-owner in-process (with --role provisioning,execution) or --resource-owner http with --provisioning-url and --provisioning-key-file",
			ErrNoOwner, Name, OwnerName)
	}
	return fmt.Errorf("--resource-owner %q: want in-process or http", cfg.ResourceOwner)
}

// NewHTTPOwner returns the HTTP owner adaptor for the provisioning role at
// url, with the key read from keyFile.
func NewHTTPOwner(url, keyFile string) (*httpowners.Resources, error) {
	if url == "" || keyFile == "" {
		return nil, fmt.Errorf("--resource-owner http needs --provisioning-url and --provisioning-key-file (a service key of the provisioning role)")
	}
	key, err := httpowners.ReadKeyFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--provisioning-key-file: %w", err)
	}
	r, err := httpowners.New(url, key, nil)
	if err != nil {
		return nil, fmt.Errorf("--provisioning-url: %w", err)
	}
	return r, nil
}

// listenForAppends runs, on PostgreSQL, the LISTEN/NOTIFY listener that
// wakes this process's waiting pulls when another server process appends.
func listenForAppends(lc fx.Lifecycle, h *database.Handle, w *application.Wakeups, log *zap.Logger) {
	if h.Pool == nil {
		return
	}
	l := pgstore.NewListener(h.Pool, w, time.Second, func(err error) {
		log.Warn("stream notifications interrupted; waiting pulls re-read on their own", zap.Error(err))
	})
	background.Run(lc, "stream listener", func(ctx context.Context) { _ = l.Run(ctx) })
}

// stopWaitingPulls ends long polls when the process stops. It is invoked
// with the HTTP server so its stop hook runs before the server's graceful
// shutdown, which would otherwise wait for every pull's wait to run out.
func stopWaitingPulls(lc fx.Lifecycle, _ *httpserver.Server, w *application.Wakeups) {
	lc.Append(fx.StopHook(w.Stop))
}
