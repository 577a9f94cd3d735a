// Package siteruntime composes the site_runtime context (role runtime): the
// ordered worker with its SQLite journals, the Site HTTPS client, the
// heartbeat and the worker's metrics, plus the executors registered by
// operation and family (site-runtime.md). Module is its one Fx option;
// OpenJournal, NewWorker and the adaptors' constructors build the same
// pieces without Fx.
package siteruntime

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/observe"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/sitehttp"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/failpoint"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// ContextName is the Fx module name, log field and metric prefix owner.
const ContextName = "site_runtime"

// ExecutorsGroup is the Fx value group of []application.Registration that
// the registry is built from (see AsExecutors).
const ExecutorsGroup = "siteruntime.executors"

// Config is the runtime role's configuration (flags with METALLO_*
// equivalents; site-runtime.md, "Configuration").
type Config struct {
	// JournalDir holds delivery.sqlite, jobs.sqlite and services.sqlite.
	JournalDir string
	// Environment and Authority are the stream and the Site API URL; the
	// journals are bound to both.
	Environment string
	Authority   string
	// TokenFile (a projected service-account token) or KeyFile (a static
	// key): exactly one, re-read for every request.
	TokenFile string
	KeyFile   string
	// CAFile is the PEM bundle the Site API's certificate is verified
	// against (system roots when empty).
	CAFile string
	// HeartbeatFile is where the worker beats; `runtime liveness` reads it.
	HeartbeatFile string
	// LivenessBound is how old a heartbeat may be before liveness fails.
	LivenessBound time.Duration
	// Kubeconfig is the Site cluster's configuration (in-cluster when
	// empty).
	Kubeconfig string
	// BatchImage is the batch execution image, pinned by digest.
	BatchImage string
	// Permissions is the RuntimePermissions provider: http:<url> or
	// policy:<file>.
	Permissions string
	// InstallationRecord is configmap:<namespace>/<name> or file:<path>.
	InstallationRecord string
	// GPUResources maps gpu.<vendor> demand keys to Kubernetes extended
	// resources, over the default gpu.nvidia → nvidia.com/gpu.
	GPUResources map[string]string
	// BatchPodAnnotations are added to every batch Pod template.
	BatchPodAnnotations map[string]string
	// DeletionWait bounds how long cancel and cleanup wait for a deleted
	// object to be gone (then failed / deletion-pending).
	DeletionWait time.Duration
	// PermissionsBound bounds how long an unavailable HTTP permission
	// provider is retried (then refused / permission-unavailable).
	PermissionsBound time.Duration
	// PullLimit, PullWait, BackoffInitial, BackoffMax and
	// FoldAcknowledgement tune the worker (application.WorkerConfig).
	PullLimit           int
	PullWait            time.Duration
	BackoffInitial      time.Duration
	BackoffMax          time.Duration
	FoldAcknowledgement bool
	// Failpoints arms crash points (tests only; METALLO_FAILPOINTS).
	Failpoints string
}

// Credential returns the configured credential file and the flag naming it.
func (c Config) Credential() (path, flag string) {
	if c.KeyFile != "" {
		return c.KeyFile, "key-file"
	}
	return c.TokenFile, "token-file"
}

// PermissionsSource is a parsed --permissions value.
type PermissionsSource struct {
	// Kind is "http" or "policy".
	Kind string
	// URL is the provider's base URL (http).
	URL string
	// File is the policy file (policy).
	File string
}

// ParsePermissions reads http:<url> (an absolute http or https URL) or
// policy:<file> (an existing file). There is no default: a missing
// provider is an error.
func ParsePermissions(s string) (PermissionsSource, error) {
	kind, rest, _ := strings.Cut(s, ":")
	switch kind {
	case "http":
		u, err := url.Parse(rest)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return PermissionsSource{}, errors.New("http:<url> needs an absolute http(s) URL of the permission provider")
		}
		return PermissionsSource{Kind: kind, URL: rest}, nil
	case "policy":
		if rest == "" {
			return PermissionsSource{}, errors.New("policy:<file> needs a file")
		}
		if _, err := os.Stat(rest); err != nil {
			return PermissionsSource{}, fmt.Errorf("policy file: %w", err)
		}
		return PermissionsSource{Kind: kind, File: rest}, nil
	}
	return PermissionsSource{}, errors.New("choose the permission provider explicitly: http:<url> or policy:<file>")
}

// Validate checks every setting serve needs; each error names its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(flag, value string, err error) { errs = append(errs, config.Invalid(flag, value, err)) }
	if c.JournalDir == "" {
		bad("journal-dir", "", errors.New("required: the directory of the journal set"))
	}
	if c.Environment == "" {
		bad("environment", "", errors.New("required: the stream's environment ID"))
	}
	if c.Authority == "" {
		bad("authority", "", errors.New("required: the Site API URL"))
	} else if u, err := url.Parse(c.Authority); err != nil || u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !sitehttp.Loopback(u.Hostname()))) {
		bad("authority", c.Authority, errors.New("want an https URL (plain http only to a loopback address)"))
	}
	switch {
	case c.TokenFile != "" && c.KeyFile != "":
		bad("key-file", c.KeyFile, errors.New("give --token-file or --key-file, not both"))
	case c.TokenFile == "" && c.KeyFile == "":
		bad("token-file", "", errors.New("required: the bearer credential file (--token-file, or --key-file for a static key)"))
	default:
		path, flag := c.Credential()
		if _, err := os.Stat(path); err != nil {
			bad(flag, path, err)
		}
	}
	for _, f := range [][2]string{{"ca-file", c.CAFile}, {"kubeconfig", c.Kubeconfig}} {
		if f[1] == "" {
			continue
		}
		if _, err := os.Stat(f[1]); err != nil {
			bad(f[0], f[1], err)
		}
	}
	if c.HeartbeatFile == "" {
		bad("heartbeat-file", "", errors.New("required"))
	}
	if !siteprotocol.IsPinnedImage(c.BatchImage) {
		bad("batch-image", c.BatchImage, errors.New("the batch execution image must be pinned by digest (…@sha256:<64 hex>); a tag alone is refused"))
	}
	if _, err := ParsePermissions(c.Permissions); err != nil {
		bad("permissions", c.Permissions, err)
	}
	if _, err := installation.ParseLocation(c.InstallationRecord); err != nil {
		bad("installation-record", c.InstallationRecord, err)
	}
	if c.PullLimit < 1 || c.PullLimit > 100 {
		bad("pull-limit", fmt.Sprint(c.PullLimit), errors.New("must be 1..100"))
	}
	if c.PullWait < 0 || c.PullWait > 30*time.Second {
		bad("pull-wait", c.PullWait.String(), errors.New("must be 0..30s"))
	}
	if c.BackoffInitial <= 0 || c.BackoffMax < c.BackoffInitial {
		bad("backoff-max", c.BackoffMax.String(), errors.New("backoff bounds must be positive with --backoff-max ≥ --backoff-initial"))
	}
	if c.LivenessBound <= c.PullWait+c.BackoffMax {
		bad("liveness-bound", c.LivenessBound.String(), fmt.Errorf("must exceed --pull-wait plus --backoff-max (%s): an idle or waiting worker beats at least that often", c.PullWait+c.BackoffMax))
	}
	if _, err := failpoint.Parse(c.Failpoints, application.FailpointNames(), nil); err != nil {
		bad("failpoints", c.Failpoints, err)
	}
	return errors.Join(errs...)
}

// OpenJournal opens the configured journal set: it takes the directory
// lock, verifies every file read-only and refuses to start (naming the file
// and row) on any damage. It never creates a journal.
func OpenJournal(ctx context.Context, c Config) (*journal.Journal, error) {
	return journal.Open(ctx, c.JournalDir, journal.Options{})
}

// NewSiteClient returns the Site HTTPS client for the installation.
func NewSiteClient(c Config, installationID string) (*sitehttp.Client, error) {
	path, _ := c.Credential()
	return sitehttp.New(sitehttp.Config{Authority: c.Authority, Environment: c.Environment, InstallationID: installationID,
		TokenFile: path, CAFile: c.CAFile})
}

// WorkerConfig returns the worker's settings.
func (c Config) WorkerConfig() application.WorkerConfig {
	return application.WorkerConfig{
		Environment: c.Environment, Authority: c.Authority, PullLimit: c.PullLimit, PullWait: c.PullWait,
		BackoffInitial: c.BackoffInitial, BackoffMax: c.BackoffMax, FoldAcknowledgement: c.FoldAcknowledgement,
	}
}

// AsExecutors annotates a constructor returning []application.Registration
// so that Fx adds its routes to the registry: issue 6's native executors
// and test compositions use it.
func AsExecutors(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+ExecutorsGroup+`,flatten"`))
}

type registryParams struct {
	fx.In
	Registrations []application.Registration `group:"siteruntime.executors"`
}

// Module composes site_runtime around the journal set j (from
// OpenJournal), which it closes at stop. It provides to executors (also
// those composed outside the module): the Config, application.Failpoints,
// application.MemberBindings, application.BatchRecords and
// application.ServiceRecords. Everything else is private.
func Module(cfg Config, j *journal.Journal) fx.Option {
	return fx.Module(ContextName,
		fx.Decorate(func(log *zap.Logger) *zap.Logger { return log.With(zap.String("context", ContextName)) }),
		fx.Supply(cfg),
		fx.Provide(
			func(log *zap.Logger) (application.Failpoints, error) {
				fp, err := failpoint.Parse(cfg.Failpoints, application.FailpointNames(), os.Stderr)
				if err != nil {
					return nil, config.Invalid("failpoints", cfg.Failpoints, err)
				}
				if fp.Armed() {
					log.Warn("failpoints armed: this process will kill itself at them (tests only)", zap.String("failpoints", cfg.Failpoints))
				}
				return fp, nil
			},
			func() application.MemberBindings { return j },
			func() application.BatchRecords { return j.Batch() },
			func() application.ServiceRecords { return j.Services() },
		),
		fx.Provide(
			AsExecutors(func(b application.MemberBindings, fp application.Failpoints) []application.Registration {
				return application.NewMemberExecutor(b, fp).Registrations()
			}),
			AsExecutors(func(b application.MemberBindings, r application.BatchRecords, fp application.Failpoints, c clock.Clock) ([]application.Registration, error) {
				e, err := NewBatchExecutor(cfg, b, r, fp, c)
				if err != nil {
					return nil, err
				}
				return e.Registrations(), nil
			}),
		),
		fx.Provide(
			fx.Private,
			func(p registryParams) (*application.Registry, error) {
				return application.NewRegistry(p.Registrations...)
			},
			func(log *zap.Logger, reg prometheus.Registerer) (*observe.Events, error) {
				return observe.New(log, reg, j.Commits)
			},
			func(c clock.Clock) *heartbeat.File { return heartbeat.NewFile(cfg.HeartbeatFile, c, time.Second) },
			func() (*sitehttp.Client, error) { return NewSiteClient(cfg, j.Binding().InstallationID) },
			func(site *sitehttp.Client, reg *application.Registry, hb *heartbeat.File, fp application.Failpoints, ev *observe.Events) *application.Worker {
				return application.NewWorker(cfg.WorkerConfig(), site, j, reg, hb, fp, ev)
			},
		),
		fx.Invoke(func(lc fx.Lifecycle, w *application.Worker, log *zap.Logger) {
			r := &runner{worker: w, journal: j, log: log, done: make(chan struct{})}
			lc.Append(fx.Hook{OnStart: r.start, OnStop: r.stop})
		}),
	)
}

// runner runs the worker for the process lifetime. A stopped worker seals
// the journal (the directory stays locked) and the process stays up,
// serving its metrics.
type runner struct {
	worker  *application.Worker
	journal *journal.Journal
	log     *zap.Logger
	cancel  context.CancelFunc
	done    chan struct{}
}

func (r *runner) start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		// A stopped worker has sealed the journal and reported the stop.
		if err := r.worker.Run(ctx); err != nil && !errors.As(err, new(*domain.StopError)) {
			r.log.Error("runtime worker ended", zap.Error(err))
		}
	}()
	return nil
}

func (r *runner) stop(ctx context.Context) error {
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("stop the runtime worker: %w", ctx.Err())
	}
	return r.journal.Close()
}
