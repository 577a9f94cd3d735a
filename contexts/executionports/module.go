// Package executionports composes the execution_ports context (role
// execution): the Site protocol's server side, the owner ports and capacity
// planning (docs/execution-ports.md, docs/site-protocol.md). Module is its one Fx
// option; the exported constructors build the same pieces without Fx.
package executionports

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
	envfile "github.com/pharos-metallo/metallo/platform/environments"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

// Names of the context.
const (
	// Name is the Fx module name, log field and OpenAPI tag.
	Name = "execution_ports"
	// MigrationsDir is the context's directory under sql/<engine>/.
	MigrationsDir = "executionports"
	// DefaultMaxConns is the default PostgreSQL pool size.
	DefaultMaxConns = database.DefaultMaxConns
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
	// DatabaseURL is the context's own database ("" = Database().DefaultPath).
	DatabaseURL string
	// MaxConns bounds the PostgreSQL pool (0: DefaultMaxConns; the flag
	// takes at least 1). Waiting pulls hold no connection; LISTEN uses one
	// connection of its own.
	MaxConns int32
	// Migrate applies pending migrations at start; otherwise start-up fails
	// on pending migrations.
	Migrate bool
	// ResourceOwner picks the owner adaptor.
	ResourceOwner ResourceOwner
	// ProvisioningURL and ProvisioningKeyFile configure OwnerHTTP.
	ProvisioningURL     string
	ProvisioningKeyFile string
	// ProvisioningCAFile is the PEM bundle OwnerHTTP verifies the
	// provisioning role's certificate against (system roots when empty;
	// docs/operations.md#tls).
	ProvisioningCAFile string
	// Services are the service principal IDs allowed on Execution's routes
	// (default httpapi.DefaultService, i.e. service:execution).
	Services []string
	// PullRecheck is how often a waiting pull re-reads without a wake-up
	// (default application.DefaultRecheck).
	PullRecheck time.Duration
	// DeliveryInterval is the period of the binding delivery's full
	// reconcile (default application.DefaultDeliveryInterval; delivery.go).
	DeliveryInterval time.Duration
	// FeedInterval is how often binding delivery reads the owner's change
	// feed when it is caught up (default application.DefaultFeedInterval;
	// delivery.go).
	FeedInterval time.Duration
	// ReadResultRetention is how long the content of a read's result
	// (read-logs, read-file, proxy) is kept after its acknowledgement before
	// the sweep drops it, keeping its digest (--read-result-retention;
	// 0: application.DefaultReadResultRetention;
	// docs/execution-ports.md#read-results-retention).
	ReadResultRetention time.Duration
}

// ErrNoOwner is wrapped by Config.Validate's error when no owner adaptor is
// chosen (OwnerRefusing): the role refuses to start, naming its owner.
var ErrNoOwner = errors.New("no owner adaptor configured")

// Database is the context's own database: flags --execution-database-url and
// --execution-database-max-conns, the embedded default SQLite file
// ./var/execution.sqlite (docs/architecture.md#a-central-contexts-database).
func Database() database.Context {
	return database.NewContext(Name, "execution", func(e database.Engine) (fs.FS, error) { return sqlfiles.Migrations(string(e), MigrationsDir) })
}

// DatabaseSettings returns the database values of the configuration.
func (c Config) DatabaseSettings() database.Settings {
	return database.Settings{URL: c.DatabaseURL, MaxConns: c.MaxConns, Migrate: c.Migrate}
}

// Validate checks the configuration serve needs, before anything opens:
// the database flags, the intervals, the owner adaptor
// (--provisioning-ca-file only with --resource-owner http, readable with
// at least one PEM certificate). It reports every fault at once
// (errors.Join): each bad flag is a *config.FlagError naming the flag and
// its variable; a configuration without an owner adaptor wraps ErrNoOwner,
// naming the missing owner (docs/execution-ports.md#owner-adaptors).
func (c Config) Validate() error {
	errs := []error{Database().Validate(c.DatabaseSettings())}
	if c.DeliveryInterval < 0 {
		errs = append(errs, config.Invalid("binding-delivery-interval", c.DeliveryInterval.String(), errors.New("must not be negative (0: the default)")))
	}
	if c.FeedInterval < 0 {
		errs = append(errs, config.Invalid("binding-feed-interval", c.FeedInterval.String(), errors.New("must not be negative (0: the default)")))
	}
	if c.ReadResultRetention < 0 {
		errs = append(errs, config.Invalid("read-result-retention", c.ReadResultRetention.String(), errors.New("must not be negative (0: the default)")))
	}
	if c.ProvisioningCAFile != "" {
		if c.ResourceOwner != OwnerHTTP {
			errs = append(errs, config.Invalid("provisioning-ca-file", c.ProvisioningCAFile, errors.New("only --resource-owner http reads the provisioning role over HTTPS")))
		} else if _, err := cabundle.Pool(c.ProvisioningCAFile); err != nil {
			errs = append(errs, config.Invalid("provisioning-ca-file", c.ProvisioningCAFile, err))
		}
	}
	switch c.ResourceOwner {
	case OwnerInProcess, OwnerHTTP:
	case OwnerRefusing:
		errs = append(errs, fmt.Errorf("%w: %s needs its owner %s: set --resource-owner (%s) in-process (with --role provisioning,execution) or --resource-owner http with --provisioning-url and --provisioning-key-file",
			ErrNoOwner, Name, OwnerName, config.EnvName("resource-owner")))
	default:
		errs = append(errs, config.Invalid("resource-owner", string(c.ResourceOwner), errors.New("want in-process or http")))
	}
	return errors.Join(errs...)
}

// Module composes the context for cfg, which has passed Validate (the
// role's Preflight). It needs environments.yaml from the process
// (platform/environments.Module, shared by the central roles). With
// OwnerInProcess it fails at start unless resource_provisioning is
// composed in the same process.
func Module(cfg Config) fx.Option {
	return fx.Module(Name,
		fx.Decorate(contextLogger),
		fx.Supply(fx.Private, cfg),
		fx.Provide(
			fx.Private,
			Database().Provide(cfg.DatabaseSettings()),
			NewStore,
			newEnvironments,
			asEnvironments,
			application.NewWakeups,
			newStreams,
			ownerAdaptors(cfg),
			application.NewPlanner,
			NewDeliveryStore,
			newDeliverer,
			newReadResultRetention,
		),
		fx.Provide(
			httpserver.AsRegistrar(newRegistrar),
			auth.AsAuthenticator(newRuntimeAuthenticator),
			httpserver.AsReadinessCheck(newReadinessCheck),
		),
		fx.Invoke(requireOwnerPorts),
		fx.Invoke(listenForAppends),
		fx.Invoke(runDelivery),
		fx.Invoke(runReadResultSweep),
		fx.Invoke(stopWaitingPulls),
	)
}

// contextLogger names the context on every log line of its components.
func contextLogger(log *zap.Logger) *zap.Logger { return log.With(zap.String("context", Name)) }

// newEnvironments is environments.yaml as this context uses it: the view
// of the version in use and its Runtimes' authenticator, derived again at
// every reload, which a kubeconfig that cannot be loaded refuses whole. An
// applied reload wakes every waiting pull, so a pull of an environment the
// new version removed ends at once (docs/site-protocol.md#a-removed-environment).
func newEnvironments(src *envfile.Source, w *application.Wakeups) (*environments.Current, error) {
	cur := &environments.Current{}
	err := src.Use(func(next *envfile.Set) (func(), error) {
		view, err := environments.NewView(next)
		if err != nil {
			return nil, err
		}
		runtimes, err := RuntimeAuthenticator(view)
		if err != nil {
			return nil, err
		}
		return func() {
			cur.Store(view, runtimes)
			w.NotifyAll()
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return cur, nil
}

// asEnvironments is the environments in use as the application's port.
func asEnvironments(c *environments.Current) application.Environments { return c }

// newRuntimeAuthenticator is the environments' Runtimes' authenticator in
// use, for the process's chain.
func newRuntimeAuthenticator(c *environments.Current) auth.Authenticator { return c }

// newStreams is the Site protocol's stream service over the store.
func newStreams(cfg Config, store application.StreamStore, envs application.Environments, c clock.Clock, w *application.Wakeups) *application.Streams {
	return application.NewStreams(store, envs, c, w, cfg.PullRecheck)
}

// newRegistrar registers the context's HTTP operations (adaptors/httpapi).
func newRegistrar(cfg Config, s *application.Streams, p *application.Planner, d *application.Deliverer, log *zap.Logger) httpserver.Registrar {
	h := &httpapi.Handlers{Streams: s, Planner: p, Deliverer: d, Services: cfg.Services, Log: log}
	return httpserver.RegistrarFunc(func(api huma.API) { httpapi.Register(api, h) })
}

// newReadinessCheck is the context database's readiness check.
func newReadinessCheck(h *database.Handle, log *zap.Logger) httpserver.ReadinessCheck {
	return Database().ReadinessCheck(h, log)
}

// requireOwnerPorts builds every owner port at start, so a missing owner
// fails the start rather than the first request.
func requireOwnerPorts(application.ProjectResources, application.MemberAccounts, application.MemberBindings, application.BindingFeed) {
}

// runDelivery runs the delivery of member bindings for the process's
// lifetime (delivery.go).
func runDelivery(cfg Config, lc fx.Lifecycle, d *application.Deliverer, feed application.BindingFeed, log *zap.Logger) {
	RunDelivery(lc, d, feed, DeliverySchedule{Interval: cfg.DeliveryInterval, FeedInterval: cfg.FeedInterval}, log)
}

// newReadResultRetention is the sweep of read results' content for the
// configured retention, on the context's clock.
func newReadResultRetention(cfg Config, store application.StreamStore, c clock.Clock) *application.ReadResultRetention {
	return application.NewReadResultRetention(store, c, cfg.ReadResultRetention)
}

// runReadResultSweep runs the retention sweep for the process's lifetime.
func runReadResultSweep(lc fx.Lifecycle, r *application.ReadResultRetention, log *zap.Logger) {
	RunReadResultSweep(lc, r, application.ReadResultSweepInterval(r.Retention()), log)
}

// RunReadResultSweep runs r's sweep (docs/execution-ports.md#read-results-retention)
// for the process's lifetime: at start, then every interval (> 0) after the
// previous sweep ended. A failed sweep is logged and the next one goes on
// where it stopped; every server process may sweep (PostgreSQL: concurrent
// sweeps skip each other's rows).
func RunReadResultSweep(lc fx.Lifecycle, r *application.ReadResultRetention, interval time.Duration, log *zap.Logger) {
	background.Run(lc, "read result sweep", func(ctx context.Context) {
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if n, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
				log.Warn("dropping expired read results failed; the next sweep goes on", zap.Int("dropped", n), zap.Error(err))
			} else if n > 0 {
				log.Info("dropped the content of expired read results", zap.Int("results", n), zap.Duration("retention", r.Retention()))
			}
			t.Reset(interval)
		}
	})
}

// NewStore returns the stream store of the handle's engine.
func NewStore(h *database.Handle) application.StreamStore {
	if h.Pool != nil {
		return pgstore.New(h.Pool)
	}
	return sqlitestore.New(h.DB)
}

// RuntimeAuthenticator returns the authenticator of view's Runtimes: their
// static keys (hashes only, constant-time), then TokenReview for the
// environments configured with it. Principals are environment:<id>. It
// fails, naming the environment, when a kubeconfig cannot be loaded.
func RuntimeAuthenticator(view *environments.View) (auth.Authenticator, error) {
	chain := auth.Chain{view.Keys()}
	reviews := view.TokenReviews()
	if len(reviews) == 0 {
		return chain, nil
	}
	targets := make([]tokenreview.Target, 0, len(reviews))
	for _, r := range reviews {
		targets = append(targets, tokenreview.Target{Environment: r.Environment, Username: r.Username, Audience: r.Audience, Kubeconfig: r.Kubeconfig})
	}
	tr, err := tokenreview.New(targets)
	if err != nil {
		return nil, err
	}
	return append(chain, tr), nil
}

// NewHTTPOwner returns the HTTP owner adaptor for the provisioning role at
// url, with the key read from keyFile, verifying an https url against the
// PEM bundle caFile (--provisioning-ca-file; the system roots when empty).
// Errors name the flag: a missing URL or key file, an unreadable key, a CA
// bundle that cannot be read or holds no certificate, a malformed URL.
func NewHTTPOwner(url, keyFile, caFile string) (*httpowners.Resources, error) {
	if url == "" || keyFile == "" {
		return nil, fmt.Errorf("--resource-owner http needs --provisioning-url and --provisioning-key-file (a service key of the provisioning role)")
	}
	key, err := httpowners.ReadKeyFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--provisioning-key-file: %w", err)
	}
	client, err := cabundle.Client(caFile, httpowners.DefaultTimeout)
	if err != nil {
		return nil, config.Invalid("provisioning-ca-file", caFile, err)
	}
	r, err := httpowners.New(url, key, client)
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
