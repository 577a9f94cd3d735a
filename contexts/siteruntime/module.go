// Package siteruntime composes the site_runtime context (role runtime): the
// ordered worker with its SQLite journals, the Site HTTPS client, the
// heartbeat and the worker's metrics, plus the executors registered by
// operation and family (docs/site-runtime.md). Module is its one Fx option;
// OpenJournal, NewWorker and the adaptors' constructors build the same
// pieces without Fx.
//
// The composition is split by concern: config.go is the role's Config and
// its validation; installation.go reads the installation record, opens
// the journal set bound to it and runs the install and check hooks;
// permissions.go and repositories.go choose the permission and repository
// grant providers; wiring.go holds the pieces every executor family shares
// (pinned images, the heartbeat, the Site client); batch.go builds the one
// Kubernetes workload client and access check every family shares and the
// batch family on them, application_service.go and inference_service.go
// the service families; module.go is the Fx wiring, one named provider
// each, and the one table of executor families (families).
package siteruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubebatch "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/observe"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/sitehttp"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/failpoint"
)

// Name is the Fx module name, log field and metric prefix owner.
const Name = "site_runtime"

// ExecutorsGroup is the Fx value group of []application.Registration that
// the registry is built from (see AsExecutors).
const ExecutorsGroup = "siteruntime.executors"

// AsExecutors annotates a constructor returning []application.Registration
// so that Fx adds its routes to the registry: the executor families
// (families) and test compositions use it.
func AsExecutors(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+ExecutorsGroup+`,flatten"`))
}

// Module composes site_runtime around the journal set j (from
// OpenJournal), which it closes at stop. It provides to executors (also
// those composed outside the module): the Config, application.Failpoints,
// application.MemberBindings, application.BatchRecords,
// application.ServiceRecords and application.RepositoryGrants (built at
// start, so that a broken grants file refuses it). Everything else is
// private. Each provider is a named function below, in the order listed.
func Module(cfg Config, j *journal.Journal) fx.Option {
	return fx.Module(Name,
		fx.Decorate(contextLogger),
		fx.Supply(cfg),
		fx.Supply(fx.Private, j),
		fx.Provide(
			newFailpoints,
			memberBindings,
			batchRecords,
			serviceRecords,
			newRepositoryGrants,
		),
		// The grant provider is built at start even before an executor uses it.
		fx.Invoke(buildRepositoryGrants),
		fx.Provide(AsExecutors(memberRegistrations)),
		backendOption(cfg),
		fx.Provide(
			fx.Private,
			newRegistry,
			newEvents,
			newHeartbeat,
			newSiteClient,
			newWorker,
		),
		fx.Invoke(runWorker),
	)
}

// backendOption composes what the Runtime's backend (--backend) supplies.
// A kubernetes Runtime: the one Kubernetes workload client and access check
// every family shares, the watch of its Jobs and the executor families of
// the table (families). A Runtime of another backend loads no kubeconfig
// and composes no family yet (the Slurm executor is not built): it applies
// member bindings and answers every workload command
// unsupported-operation (docs/site-runtime.md#backends-and-families).
func backendOption(cfg Config) fx.Option {
	if cfg.Kubernetes() {
		return fx.Options(
			familyExecutors(),
			fx.Provide(fx.Private, newNativeObjects, newAccess, terminalStates, newJobWatcher),
		)
	}
	return fx.Provide(fx.Private, noJobWatcher)
}

// noJobWatcher is the watch of a Runtime without Kubernetes Jobs: none.
func noJobWatcher() *application.JobWatcher { return nil }

// contextLogger names the context on every line its parts log.
func contextLogger(log *zap.Logger) *zap.Logger { return log.With(zap.String("context", Name)) }

// newFailpoints arms --failpoints (METALLO_FAILPOINTS), warning when any
// is armed; a value that does not parse is an error naming the flag.
func newFailpoints(cfg Config, log *zap.Logger) (application.Failpoints, error) {
	fp, err := failpoint.Parse(cfg.Failpoints, application.RuntimeFailpointNames(), os.Stderr)
	if err != nil {
		return nil, config.Invalid("failpoints", cfg.Failpoints, err)
	}
	if fp.Armed() {
		log.Warn("failpoints armed: this process will kill itself at them (tests only)", zap.String("failpoints", cfg.Failpoints))
	}
	return fp, nil
}

// memberBindings is the journal set's delivery journal as the member
// bindings.
func memberBindings(j *journal.Journal) application.MemberBindings { return j }

// batchRecords is jobs.sqlite.
func batchRecords(j *journal.Journal) application.BatchRecords { return j.Batch() }

// serviceRecords is services.sqlite.
func serviceRecords(j *journal.Journal) application.ServiceRecords { return j.Services() }

// newRepositoryGrants is NewRepositoryGrants on the process clock.
func newRepositoryGrants(cfg Config, c clock.Clock) (application.RepositoryGrants, error) {
	return NewRepositoryGrants(cfg, c)
}

// buildRepositoryGrants asks for the grant provider so that Fx builds it
// at start.
func buildRepositoryGrants(application.RepositoryGrants) {}

// memberRegistrations routes the member binding operations.
func memberRegistrations(b application.MemberBindings, fp application.Failpoints) []application.Registration {
	return application.NewMemberExecutor(b, fp).Registrations()
}

// recordFile is one of the families' record files.
type recordFile string

const (
	jobsFile     recordFile = "jobs.sqlite"
	servicesFile recordFile = "services.sqlite"
)

// of is the record file among d's.
func (f recordFile) of(d familyDeps) application.NativeRecords {
	if f == jobsFile {
		return d.Jobs
	}
	return d.Services
}

// familyEntry is one executor family of the runtime role: how its
// application.Family is built from the shared pieces, and its record file.
type familyEntry struct {
	build   func(familyDeps) (application.Family, error)
	records recordFile
}

// families is the one table of the runtime role's executor families
// (docs/architecture.md#executor-families): a family is one line here. Each
// runs on its own application.Executor over the shared workload client and
// access check, with every capability it declares wired
// (newFamilyExecutor), and sees the other record files, so a prepare or
// start of an Attempt recorded there is refused attempt-conflict.
func families() []familyEntry {
	return []familyEntry{
		{build: batchFamily, records: jobsFile},
		{build: applicationFamily, records: servicesFile},
		{build: inferenceFamily, records: servicesFile},
	}
}

// familyDeps are the shared pieces a family is built from: the record
// files (jobs.sqlite, with the Jobs' terminal states, and
// services.sqlite), the one workload client and access check, and the
// Runtime's watch of its Jobs.
type familyDeps struct {
	fx.In
	Config     Config
	Jobs       application.BatchRecords
	Services   application.ServiceRecords
	Terminal   application.TerminalStates
	Native     *kube.Workloads
	Access     *application.Access
	Grants     application.RepositoryGrants
	Failpoints application.Failpoints
	Clock      clock.Clock
	Watch      *application.JobWatcher
}

// familyExecutors registers every family of the table.
func familyExecutors() fx.Option {
	var opts []fx.Option
	for _, f := range families() {
		opts = append(opts, fx.Provide(AsExecutors(func(d familyDeps) ([]application.Registration, error) {
			e, err := newFamilyExecutor(d, f)
			if err != nil {
				return nil, err
			}
			return e.Registrations(), nil
		})))
	}
	return fx.Options(opts...)
}

// newFamilyExecutor builds f's executor over its record file, checking out
// repositories through the workspace helper (CheckoutOf) with the grant
// provider, with the private reads (read-logs, proxy, read-file through
// the workspace reader: docs/site-runtime.md#the-workspace-reader) its
// capabilities declare, seeing the other families' record files.
func newFamilyExecutor(d familyDeps, f familyEntry) (*application.Executor, error) {
	fam, err := f.build(d)
	if err != nil {
		return nil, err
	}
	specs, ccfg, err := CheckoutOf(d.Config)
	if err != nil {
		return nil, err
	}
	var others []application.FamilyRecords
	seen := map[recordFile]bool{f.records: true}
	for _, o := range families() {
		if !seen[o.records] {
			seen[o.records] = true
			others = append(others, o.records.of(d))
		}
	}
	return application.NewExecutor(fam, d.Access, d.Native, f.records.of(d), d.Failpoints, ExecutorConfig(d.Config)).
		WithCheckout(d.Grants, specs, d.Native, ccfg).WithOtherFamilies(others...).
		WithReads(d.Native).WithProxy(d.Native).WithFileReads(specs, d.Native, FileReadsOf(d.Config)), nil
}

// batchFamily is NewBatchFamily using the Runtime's watch of its Jobs
// over jobs.sqlite (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).
func batchFamily(d familyDeps) (application.Family, error) {
	f, err := NewBatchFamily(d.Config, kubebatch.New(d.Native))
	if err != nil {
		return nil, err
	}
	return f.WithTerminalStates(d.Terminal, d.Watch, d.Clock), nil
}

// applicationFamily is NewApplicationFamily.
func applicationFamily(d familyDeps) (application.Family, error) {
	return NewApplicationFamily(d.Config, d.Native)
}

// inferenceFamily is NewInferenceFamily.
func inferenceFamily(d familyDeps) (application.Family, error) {
	return NewInferenceFamily(d.Config, d.Native)
}

// terminalStates is jobs.sqlite's terminal states of the Runtime's Jobs.
func terminalStates(j *journal.Journal) application.TerminalStates { return j.Batch() }

// newJobWatcher is the Runtime's watch of its Jobs over jobs.sqlite,
// logging what it does (runWorker starts it).
func newJobWatcher(records application.BatchRecords, states application.TerminalStates, native *kube.Workloads, c clock.Clock, log *zap.Logger) *application.JobWatcher {
	return application.NewJobWatcher(kubebatch.New(native), states, records, c, watchLog{log: log}, 0)
}

// newNativeObjects is NewNativeObjects: the one Kubernetes workload
// client of every executor family.
func newNativeObjects(cfg Config) (*kube.Workloads, error) { return NewNativeObjects(cfg) }

// newAccess is NewAccess over the shared workload client: the one access
// check (and permission provider) of every executor family.
func newAccess(cfg Config, b application.MemberBindings, native *kube.Workloads, c clock.Clock) (*application.Access, error) {
	return NewAccess(cfg, b, native, c)
}

// registryParams are the registrations of ExecutorsGroup and the
// Runtime's configuration (its backend).
type registryParams struct {
	fx.In
	Config        Config
	Registrations []application.Registration `group:"siteruntime.executors"`
}

// newRegistry builds the registry from every executor's registrations,
// holding commands to the rules of the Runtime's backend (the member
// identity of bind-member, the families it runs).
func newRegistry(p registryParams) (*application.Registry, error) {
	r, err := application.NewRegistry(p.Registrations...)
	if err != nil {
		return nil, err
	}
	return r.ForBackend(p.Config.backend()), nil
}

// newEvents is the worker's logs and metrics over the journal's commits.
func newEvents(log *zap.Logger, reg prometheus.Registerer, c clock.Clock, j *journal.Journal) (*observe.Events, error) {
	return observe.New(log, reg, c, j.Commits)
}

// newHeartbeat is --heartbeat-file, beaten at most once a second.
func newHeartbeat(cfg Config, c clock.Clock) *heartbeat.File {
	return heartbeat.NewFile(cfg.HeartbeatFile, c, time.Second)
}

// newSiteClient is NewSiteClient for the journal set's installation.
func newSiteClient(cfg Config, j *journal.Journal) (*sitehttp.Client, error) {
	return NewSiteClient(cfg, j.Binding().InstallationID)
}

// newWorker is the ordered worker over the journal set.
func newWorker(cfg Config, j *journal.Journal, site *sitehttp.Client, reg *application.Registry, hb *heartbeat.File,
	fp application.Failpoints, ev *observe.Events) *application.Worker {
	return application.NewWorker(cfg.WorkerConfig(), site, j, reg, hb, fp, ev)
}

// runWorker runs the worker (and the watch of the Runtime's Jobs) for the
// process lifetime and closes the journal set at stop (runner).
func runWorker(lc fx.Lifecycle, w *application.Worker, watch *application.JobWatcher, j *journal.Journal, log *zap.Logger) {
	r := &runner{worker: w, watch: watch, journal: j, log: log, done: make(chan struct{})}
	lc.Append(fx.Hook{OnStart: r.start, OnStop: r.stop})
}

// runner runs the worker for the process lifetime. A stopped worker seals
// the journal (the directory stays locked) and the process stays up,
// serving its metrics. At shutdown a running worker logs where the next
// start resumes; a worker that had stopped is named once more, so every
// shutdown has its line (docs/operations.md#logs).
type runner struct {
	worker  *application.Worker
	watch   *application.JobWatcher // nil: no watch
	journal *journal.Journal
	log     *zap.Logger
	cancel  context.CancelFunc
	done    chan struct{}
	// stopped is the worker's stop, once it has stopped (read after done).
	stopped *domain.StopError
}

func (r *runner) start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if r.watch != nil {
		// Watched before the worker acts: a Job that ends at once is seen
		// (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).
		if err := r.watch.Start(ctx); err != nil {
			cancel()
			return fmt.Errorf("start the watch of the Runtime's Jobs: %w", err)
		}
	}
	go func() {
		defer close(r.done)
		// A stopped worker has sealed the journal and reported the stop.
		err := r.worker.Run(ctx)
		if errors.As(err, &r.stopped) {
			return
		}
		if err != nil {
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
	if r.watch != nil {
		r.watch.Wait()
	}
	if r.stopped != nil {
		r.log.Info("runtime shut down; its worker had stopped", zap.String("reason", string(r.stopped.Reason)))
	}
	return r.journal.Close()
}
