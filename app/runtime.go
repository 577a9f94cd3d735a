package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/failpoint"
)

// Defaults of the runtime role.
const (
	defaultHeartbeatFile = "/tmp/metallo-runtime.heartbeat"
	defaultLivenessBound = 2 * time.Minute
)

// RuntimeRole is the runtime role: the site_runtime context alone in its
// process, with its three SQLite journals and the admin listener, and no
// public API, platform database or migrations (docs/site-runtime.md). Preflight
// validates the flags, reads the installation record (refusing to start,
// naming --installation-record, when it is missing or names another
// environment or authority), opens the journal set — locking the
// directory, verifying it read-only, refusing to start on damage, on a
// binding other than --environment/--authority or an installation other
// than the record's — and writes the
// first heartbeat (refusing to start when it cannot), before Fx starts.
func RuntimeRole() Role {
	var (
		cfg siteruntime.Config
		j   *journal.Journal
	)
	return Role{
		Name:    "runtime",
		Context: siteruntime.Name,
		Central: false,
		Flags:   func(fs *pflag.FlagSet) { runtimeServeFlags(fs, &cfg) },
		Preflight: func(log *zap.Logger) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			rec, err := siteruntime.ReadInstallation(context.Background(), cfg)
			if err != nil {
				return err
			}
			opened, err := siteruntime.OpenJournal(context.Background(), cfg, rec)
			if err != nil {
				// A journal set that refuses to open is a stop: the Site
				// API is told before the process exits, best effort
				// (docs/site-protocol.md#the-stop-report).
				if reason, ok, rerr := siteruntime.ReportStopAtOpen(context.Background(), cfg, rec, err); ok && rerr != nil {
					log.Warn("runtime stop not reported to the Site API", zap.String("reason", string(reason)), zap.Error(rerr))
				} else if ok {
					log.Info("runtime stop reported to the Site API", zap.String("reason", string(reason)))
				}
				return fmt.Errorf("--journal-dir %s: %w", cfg.JournalDir, err)
			}
			if err := siteruntime.StartHeartbeat(context.Background(), cfg, clock.System{}); err != nil {
				return errors.Join(err, opened.Close())
			}
			j = opened
			// A damaged last commit SQLite discards is safe to redo and
			// cannot be told from a torn one, so the Runtime starts; the
			// operator is told which file lost what
			// (docs/site-runtime.md#a-discarded-last-commit).
			for _, d := range j.Discarded() {
				log.Warn("journal "+d.File+": a damaged last commit is discarded; the journal is read as it was before it",
					zap.String("journal_dir", cfg.JournalDir), zap.String("file", d.File), zap.Int("frames_kept", d.Kept),
					zap.Int("first_discarded_frame", d.First), zap.Int("last_discarded_frame", d.Last),
					zap.Int("damaged_frame", d.Damaged), zap.String("damage", d.Damage), zap.Bool("commit_frame_discarded", d.Commit), zap.String("detail", d.String()))
			}
			b := j.Binding()
			log.Info("journal set verified", zap.String("journal_dir", cfg.JournalDir), zap.String("environment", b.Environment),
				zap.String("authority", b.Authority), zap.String("installation", b.InstallationID))
			return nil
		},
		Module: func(bool) fx.Option {
			if j == nil {
				return fx.Error(errors.New("runtime role: the journal set was not opened (Preflight did not run)"))
			}
			return siteruntime.Module(cfg, j)
		},
	}
}

// runtimeIdentityFlags registers the flags that name the stream and the
// Site API.
func runtimeIdentityFlags(fs *pflag.FlagSet, cfg *siteruntime.Config) {
	fs.StringVar(&cfg.Environment, "environment", "", "the execution environment (stream) this Runtime serves, e.g. alpha-k8s")
	fs.StringVar(&cfg.Authority, "authority", "", "the Site API URL the Runtime trusts (https; plain http only to loopback)")
	fs.StringVar((*string)(&cfg.Backend), "backend", "kubernetes", "how this Runtime runs work: kubernetes or slurm, its environment's backend in environments.yaml (another stops the worker: backend-mismatch); the Kubernetes flags are required and read only for kubernetes")
}

func runtimeCredentialFlags(fs *pflag.FlagSet, cfg *siteruntime.Config) {
	fs.StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token (the projected service-account token), re-read for every request")
	fs.StringVar(&cfg.KeyFile, "key-file", "", "file holding a static bearer key, instead of --token-file")
	fs.StringVar(&cfg.CAFile, "ca-file", "", "PEM bundle to verify the Site API's certificate (system roots when empty)")
}

func runtimeServeFlags(fs *pflag.FlagSet, cfg *siteruntime.Config) {
	runtimeIdentityFlags(fs, cfg)
	runtimeCredentialFlags(fs, cfg)
	fs.StringVar(&cfg.JournalDir, "journal-dir", "", "directory of the journal set (delivery.sqlite, jobs.sqlite, services.sqlite); never created by serve")
	fs.StringVar(&cfg.HeartbeatFile, "heartbeat-file", defaultHeartbeatFile, "file the worker beats (read by the metallo runtime liveness probe)")
	fs.DurationVar(&cfg.LivenessBound, "liveness-bound", defaultLivenessBound, "oldest heartbeat the liveness probe accepts; must exceed --pull-wait plus --backoff-max")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the Site cluster (in-cluster configuration when empty; --backend kubernetes only)")
	fs.StringVar(&cfg.BatchImage, "batch-image", "", "batch execution image with an explicit registry, pinned by digest (<registry>/<repository>@sha256:<64 hex>); required for --backend kubernetes")
	fs.StringVar(&cfg.Permissions, "permissions", "", "permission provider: http:<url> (https; plain http only to loopback) or policy:<file>; required")
	fs.StringVar(&cfg.PermissionsCAFile, "permissions-ca-file", "", "PEM bundle to verify an http: permission provider's certificate (system roots when empty)")
	fs.StringVar(&cfg.RepositoryGrants, "repository-grants", "", "repository grant provider: http:<url> (https; plain http only to loopback) or file:<file> (standalone Sites); required")
	fs.StringVar(&cfg.RepositoryGrantsCAFile, "repository-grants-ca-file", "", "PEM bundle to verify an http: repository grant provider's certificate (system roots when empty)")
	fs.StringVar(&cfg.InstallationRecord, "installation-record", "", "installation record: configmap:<namespace>/<name> or file:<path>; required")
	fs.StringToStringVar(&cfg.GPUResources, "gpu-resources", nil, "extended resource of each gpu.<vendor> demand key, e.g. gpu.amd=amd.com/gpu (gpu.nvidia=nvidia.com/gpu is built in)")
	fs.StringToStringVar(&cfg.BatchPodAnnotations, "batch-pod-annotations", nil, "annotations added to every batch Pod template, key=value,…")
	fs.StringToStringVar(&cfg.PodNodeSelector, "pod-node-selector", nil, "node selector of every Pod the Runtime renders (the Site's dedicated nodes), label=value,…")
	fs.StringSliceVar(&cfg.PodTolerations, "pod-tolerations", nil, "tolerations of every Pod the Runtime renders, key[=value][:NoSchedule|PreferNoSchedule|NoExecute],… (a key alone: any value; no effect: every effect)")
	fs.Int64Var(&cfg.PodRunAsUser, "pod-run-as-user", 0, "securityContext.runAsUser of every member workload Pod (Job, Deployment, predictor); 0: none, the image's own numeric USER")
	fs.Int64Var(&cfg.PodFSGroup, "pod-fs-group", 0, "securityContext.fsGroup of every member workload Pod (Job, Deployment, predictor): the workspace's group; 0: none")
	fs.DurationVar(&cfg.ProgressDeadline, "progress-deadline", 600*time.Second, "progressDeadlineSeconds of every application service's Deployment (whole seconds; part of the rendered specification)")
	fs.Float64Var(&cfg.KubeAPIQPS, "kube-api-qps", 50, "client-side rate limit of the Runtime's Kubernetes client, requests per second (1..10000)")
	fs.IntVar(&cfg.KubeAPIBurst, "kube-api-burst", 100, "requests the Runtime's Kubernetes client may send above --kube-api-qps at once (at least --kube-api-qps)")
	fs.StringToStringVar(&cfg.ServingRuntimes, "serving-runtimes", siteruntime.DefaultServingRuntimes(), "the model formats the Site serves, each with the KServe ServingRuntime its InferenceServices name, format=runtime,… (part of the rendered specification); a command naming another format, or another runtime for its format, is refused invalid-payload")
	fs.DurationVar(&cfg.DeletionWait, "deletion-wait", 2*time.Minute, "how long cancel and cleanup wait, from the command's start, for their deleted objects to be gone before answering deletion-pending")
	fs.DurationVar(&cfg.PermissionsBound, "permissions-bound", 2*time.Minute, "how long an unavailable http: permission provider is retried before a start is refused permission-unavailable")
	fs.DurationVar(&cfg.RepositoryGrantsBound, "repository-grants-bound", 2*time.Minute, "how long an unavailable http: repository grant provider is retried before a checkout is refused credential-unavailable")
	fs.DurationVar(&cfg.CheckoutTimeout, "checkout-timeout", 10*time.Minute, "workspace-init's --timeout in a prepare's workspace helper Pod")
	fs.DurationVar(&cfg.ReadFileTimeout, "read-file-timeout", time.Minute, "activeDeadlineSeconds of a read-file's workspace reader Pod (whole seconds, 1s to 1h)")
	fs.DurationVar(&cfg.ReadFileWait, "read-file-wait", 0, "how long a read-file waits for its reader's line, from the command's start, before answering deadline-exceeded (0: --read-file-timeout plus 2m)")
	fs.DurationVar(&cfg.CheckoutWait, "checkout-wait", 0, "how long a prepare waits for its workspace helper's outcome, from the command's start, before answering deadline-exceeded (0: --checkout-timeout plus 5m)")
	fs.DurationVar(&cfg.ProxyTimeout, "proxy-timeout", 30*time.Second, "how long a proxy's exchange with the service may last from its send (connect, headers, body): a body still arriving is answered truncated, no answer deadline-exceeded")
	fs.DurationVar(&cfg.ReadLogsTimeout, "read-logs-timeout", 30*time.Second, "how long a read-logs may read the log, from the command's start, before answering deadline-exceeded")
	fs.Int64Var(&cfg.WorkspaceMaxBytes, "workspace-max-bytes", 0, "the Site's largest repository checkout in bytes (0: none); the helper's --size-limit is the smaller of it and workspace_size_bytes")
	fs.StringVar(&cfg.RepositoryCAConfigMap, "repository-ca-configmap", "", "ConfigMap of each Project namespace whose key ca.pem is the repository host's CA bundle, mounted into the workspace helper (empty: the platform image's system roots)")
	fs.IntVar(&cfg.PullLimit, "pull-limit", 100, "most commands per pull (1..100)")
	fs.DurationVar(&cfg.PullWait, "pull-wait", 30*time.Second, "long-poll wait of a pull (1s..30s, whole seconds)")
	fs.DurationVar(&cfg.BackoffInitial, "backoff-initial", 200*time.Millisecond, "first wait after a transient failure")
	fs.DurationVar(&cfg.BackoffMax, "backoff-max", 30*time.Second, "cap of the exponential backoff")
	fs.BoolVar(&cfg.FoldAcknowledgement, "fold-acknowledgement", true, "fold clearing an acknowledged command into the next command's first commit when that command came in the same pull")
	fs.StringVar(&cfg.Failpoints, "failpoints", "", "crash points for tests (name or name@n, comma separated)")
	_ = fs.MarkHidden("failpoints")
}

// newRuntimeCommand is `metallo runtime …`: install, check, liveness.
func newRuntimeCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "Operate a Site Runtime: install its journals, check its Site API access, probe its liveness"}
	cmd.AddCommand(newRuntimeInstallCommand(env), newRuntimeCheckCommand(env), newRuntimeLivenessCommand(env))
	return cmd
}

func newRuntimeInstallCommand(env Env) *cobra.Command {
	var (
		cfg  siteruntime.Config
		logs logFlags
	)
	cmd := &cobra.Command{
		Use:   "install",
		Short: "The installation hook: initialise the journal set once and record it",
		Long: `Initialise the journal set only when the directory holds no journal and no
installation record exists, generating the installation ID; record complete
journals that predate the record as they are; verify an existing record
against its journals, then upgrade journals of an earlier schema version in
place (every row kept; safe to run again after a crash). Once recorded, missing or partial journals stop the hook
(non-zero exit) until they are restored together. Never replaces a record.
Every flag is checked first, by the rules serve applies, so a refused flag
writes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			// The same rules as serve, before anything is written.
			if err := cfg.ValidateInstall(); err != nil {
				return err
			}
			log, err := logs.build()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			rec, err := siteruntime.NewInstallationRecord(cfg.InstallationRecord, cfg.Kubeconfig)
			if err != nil {
				return config.Invalid("installation-record", cfg.InstallationRecord, err)
			}
			fp, err := failpoint.Parse(cfg.Failpoints, application.InstallFailpointNames(), os.Stderr)
			if err != nil {
				return config.Invalid("failpoints", cfg.Failpoints, err)
			}
			action, inst, upgraded, err := siteruntime.Install(cmd.Context(), cfg.JournalDir, cfg.Environment, cfg.Authority, rec, clock.System{}, fp)
			for _, u := range upgraded {
				log.Info("journal upgraded", zap.String("upgrade", u), zap.String("journal_dir", cfg.JournalDir))
				fmt.Fprintf(cmd.OutOrStdout(), "upgraded %s\n", u)
			}
			if err != nil {
				return err
			}
			log.Info("installation", zap.String("action", string(action)), zap.String("installation", inst.InstallationID),
				zap.String("journal_dir", cfg.JournalDir), zap.String("record", rec.Describe()))
			fmt.Fprintf(cmd.OutOrStdout(), "%s installation %s (%s)\n", action, inst.InstallationID, rec.Describe())
			return nil
		},
	}
	fs := cmd.Flags()
	runtimeIdentityFlags(fs, &cfg)
	fs.StringVar(&cfg.JournalDir, "journal-dir", "", "directory of the journal set")
	fs.StringVar(&cfg.InstallationRecord, "installation-record", "", "installation record: configmap:<namespace>/<name> or file:<path>")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig for a ConfigMap record (in-cluster configuration when empty)")
	fs.StringVar(&cfg.Failpoints, "failpoints", "", "crash points for tests (name or name@n, comma separated)")
	_ = fs.MarkHidden("failpoints")
	logs.register(fs)
	return cmd
}

func newRuntimeCheckCommand(env Env) *cobra.Command {
	var (
		cfg      siteruntime.Config
		retryFor time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Prove identity and authorisation against the Site API with one read-only pull",
		Long: `Read the stream's state, then pull once read-only (wait=0, bind=false: the
server never binds the stream to this installation); never acknowledge
anything. Refused connections are retried for up to --retry-for (a new Pod's
network may be admitted seconds after start); then, or on any problem answer,
exit non-zero with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			if err := cfg.ValidateCheck(retryFor); err != nil {
				return err
			}
			rec, err := siteruntime.NewInstallationRecord(cfg.InstallationRecord, cfg.Kubeconfig)
			if err != nil {
				return config.Invalid("installation-record", cfg.InstallationRecord, err)
			}
			rep, err := siteruntime.Check(cmd.Context(), cfg, rec, retryFor)
			if err != nil {
				return fmt.Errorf("runtime check: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "stream %s at %s: acknowledged %d, head %d\n", rep.State.Environment, rep.State.Authority,
				rep.State.AcknowledgedSequence, rep.State.HeadSequence)
			if rep.State.InstallationID == "" {
				fmt.Fprintln(out, "installation: unbound (this read-only check did not bind it)")
			} else {
				fmt.Fprintf(out, "installation: %s\n", rep.State.InstallationID)
			}
			if rep.Next != nil {
				fmt.Fprintf(out, "next command %d (%s, %s) verified\n", rep.Next.Sequence, rep.Next.Operation, rep.Next.Digest)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	runtimeIdentityFlags(fs, &cfg)
	runtimeCredentialFlags(fs, &cfg)
	fs.StringVar(&cfg.InstallationRecord, "installation-record", "", "installation record (its installation ID is sent): configmap:<namespace>/<name> or file:<path>")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig for a ConfigMap record (in-cluster configuration when empty)")
	fs.DurationVar(&retryFor, "retry-for", time.Minute, "how long refused connections are retried")
	return cmd
}

func newRuntimeLivenessCommand(env Env) *cobra.Command {
	var (
		path  string
		bound time.Duration
	)
	cmd := &cobra.Command{
		Use:   "liveness",
		Short: "Exit non-zero when the worker's heartbeat is missing, garbled, stale, dated in the future, records a stop, credential refusals longer than the bound, or a command run past its ceiling",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			if path == "" {
				return config.Invalid("heartbeat-file", "", errors.New("required: the worker's heartbeat file"))
			}
			if bound <= 0 {
				return config.Invalid("liveness-bound", bound.String(), errors.New("must be positive: the oldest heartbeat accepted"))
			}
			now := time.Now()
			r, err := heartbeat.Check(path, bound, now)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "alive: last beat %s ago\n", max(now.Sub(r.BeatAt), 0).Round(time.Millisecond))
			if c := r.Command; c != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "busy: %s since %s (liveness fails past %s)\n", c, c.Since.Format(time.RFC3339), c.Until.Format(time.RFC3339))
			}
			if since := r.CredentialRefusedSince; since != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "warning: every Site API request for %s was refused (liveness fails past %s): %s\n",
					max(now.Sub(*since), 0).Round(time.Second), bound, r.CredentialRefusal)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "heartbeat-file", defaultHeartbeatFile, "the worker's heartbeat file")
	cmd.Flags().DurationVar(&bound, "liveness-bound", defaultLivenessBound, "oldest heartbeat accepted")
	return cmd
}
