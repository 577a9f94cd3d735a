package siteruntime

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/sitehttp"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/failpoint"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Config is the runtime role's configuration (flags with METALLO_*
// equivalents; docs/operations.md#runtime-flags).
type Config struct {
	// JournalDir holds delivery.sqlite, jobs.sqlite and services.sqlite.
	JournalDir string
	// Environment and Authority are the stream and the Site API URL; the
	// journals are bound to both.
	Environment string
	Authority   string
	// Backend is how this Runtime runs work (--backend: kubernetes, the
	// default, or slurm): it must be its environment's backend, or the
	// worker stops backend-mismatch before it executes anything. The
	// Kubernetes flags (--batch-image, the scheduling, GPU, service and
	// rate-limit flags, a configmap: installation record) are checked, and
	// required, only for kubernetes (docs/operations.md#runtime-flags).
	Backend siteprotocol.Backend
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
	// PermissionsCAFile is the PEM bundle an http: permission provider's
	// certificate is verified against (system roots when empty;
	// docs/site-runtime.md#permission-providers).
	PermissionsCAFile string
	// RepositoryGrants is the RepositoryGrants provider: http:<url> or
	// file:<file> (docs/site-runtime.md#repository-grants).
	RepositoryGrants string
	// RepositoryGrantsCAFile is the PEM bundle an http: grant provider's
	// certificate is verified against (system roots when empty;
	// docs/site-runtime.md#repository-grants).
	RepositoryGrantsCAFile string
	// RepositoryGrantsBound bounds how long an unavailable HTTP grant
	// provider is retried (then refused / credential-unavailable).
	RepositoryGrantsBound time.Duration
	// CheckoutTimeout, WorkspaceMaxBytes and RepositoryCAConfigMap
	// configure the workspace helper (application.CheckoutConfig;
	// docs/site-runtime.md#the-workspace-helper).
	CheckoutTimeout       time.Duration
	WorkspaceMaxBytes     int64
	RepositoryCAConfigMap string
	// CheckoutWait bounds a prepare's wait for its helper's outcome, from
	// the command's start (0: CheckoutTimeout plus 5 minutes;
	// docs/site-runtime.md#command-bounds).
	CheckoutWait time.Duration
	// ReadFileTimeout is the workspace reader's activeDeadlineSeconds
	// (application.FileReadConfig; docs/site-runtime.md#the-workspace-reader).
	ReadFileTimeout time.Duration
	// ReadFileWait bounds a read-file's wait for its reader's line, from
	// the command's start (0: ReadFileTimeout plus 2 minutes).
	ReadFileWait time.Duration
	// ProxyTimeout bounds a proxy's exchange with the service, from its
	// send; ReadLogsTimeout a read-logs' reads, from the command's start
	// (0: the defaults, 30 s; docs/site-runtime.md#command-bounds).
	ProxyTimeout    time.Duration
	ReadLogsTimeout time.Duration
	// InstallationRecord is configmap:<namespace>/<name> or file:<path>.
	InstallationRecord string
	// GPUResources maps gpu.<vendor> demand keys to Kubernetes extended
	// resources, over the default gpu.nvidia → nvidia.com/gpu.
	GPUResources map[string]string
	// BatchPodAnnotations are added to every batch Pod template.
	BatchPodAnnotations map[string]string
	// PodNodeSelector and PodTolerations place every Pod the Runtime
	// renders (kube.Scheduling): a node selector (label key → value) and
	// tolerations as key[=value][:effect] (kube.ParseTolerations).
	PodNodeSelector map[string]string
	PodTolerations  []string
	// PodRunAsUser and PodFSGroup are every member workload Pod's
	// securityContext.runAsUser and fsGroup (kube.Users; 0: not rendered,
	// the image's own user; docs/site-runtime.md#pod-security).
	PodRunAsUser int64
	PodFSGroup   int64
	// ProgressDeadline is every application service Deployment's
	// progressDeadlineSeconds (whole seconds, default 600 s), part of the
	// rendered specification (docs/site-runtime.md#application-services-on-kubernetes).
	ProgressDeadline time.Duration
	// ServingRuntimes maps each model format the Site serves to the KServe
	// ServingRuntime an InferenceService of that format names
	// (--serving-runtimes format=runtime,…; empty: DefaultServingRuntimes);
	// a command naming another format, or another runtime for its format,
	// is refused invalid-payload
	// (docs/site-runtime.md#inference-services-on-kserve).
	ServingRuntimes map[string]string
	// DeletionWait bounds how long cancel and cleanup wait for a deleted
	// object to be gone (then failed / deletion-pending).
	DeletionWait time.Duration
	// KubeAPIQPS and KubeAPIBurst are the client-side rate limit of the
	// Runtime's own Kubernetes client (requests per second and the burst
	// above it; default 50 and 100), which bounds Attempt starts per second
	// (docs/operations.md#the-runtimes-kubernetes-client-rate-limit).
	KubeAPIQPS   float64
	KubeAPIBurst int
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

// flagErrors collects configuration errors, each naming its flag.
type flagErrors []error

func (e *flagErrors) bad(flag, value string, err error) {
	*e = append(*e, config.Invalid(flag, value, err))
}

func (e *flagErrors) positive(flag string, d time.Duration, what string) {
	if d <= 0 {
		e.bad(flag, d.String(), fmt.Errorf("must be positive: %s", what))
	}
}

// directoryOrAbsent refuses a path that exists and is not a directory.
func (e *flagErrors) directoryOrAbsent(flag, path string) {
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		e.bad(flag, path, errors.New("exists and is not a directory"))
	}
}

func (e *flagErrors) existing(flag, path string) {
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		e.bad(flag, path, err)
	}
}

// identity checks --environment (an environment ID as environments.yaml
// defines it: the principal ID rule of platform/auth), --authority (an
// https URL; plain http only to a loopback address) and --backend
// (kubernetes or slurm; kubernetes when empty).
func (c Config) identity(errs *flagErrors) {
	if b := c.backend(); b != siteprotocol.BackendKubernetes && b != siteprotocol.BackendSlurm {
		errs.bad("backend", string(c.Backend), errors.New("want kubernetes or slurm: the backend of the Runtime's environment in environments.yaml"))
	}
	if c.Environment == "" {
		errs.bad("environment", "", errors.New("required: the stream's environment ID"))
	} else if _, err := auth.ParsePrincipal(auth.KindEnvironment + ":" + c.Environment); err != nil {
		errs.bad("environment", c.Environment, errors.New("an environment ID is 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"))
	}
	if c.Authority == "" {
		errs.bad("authority", "", errors.New("required: the Site API URL"))
	} else if _, err := sitehttp.ParseAuthority(c.Authority); err != nil {
		errs.bad("authority", c.Authority, err)
	}
}

// credential checks that exactly one of --token-file and --key-file names
// an existing file, and that --ca-file, when given, is a readable PEM
// bundle with at least one certificate.
func (c Config) credential(errs *flagErrors) {
	switch {
	case c.TokenFile != "" && c.KeyFile != "":
		errs.bad("key-file", c.KeyFile, errors.New("give --token-file or --key-file, not both"))
	case c.TokenFile == "" && c.KeyFile == "":
		errs.bad("token-file", "", errors.New("required: the bearer credential file (--token-file, or --key-file for a static key)"))
	default:
		path, flag := c.Credential()
		errs.existing(flag, path)
	}
	errs.caFile("ca-file", c.CAFile)
}

// caFile refuses a CA bundle flag (--ca-file, --permissions-ca-file,
// --repository-grants-ca-file) whose file cannot be read or holds no PEM
// certificate (cabundle.Pool), so a bad bundle is named at flag validation
// instead of failing every TLS handshake later.
func (e *flagErrors) caFile(flag, path string) {
	if path == "" {
		return
	}
	if _, err := cabundle.Pool(path); err != nil {
		e.bad(flag, path, err)
	}
}

// providerCAFile checks a provider's CA bundle flag: refused when the
// provider (src, as parsed from its flag providerFlag) is not http:, where
// it would be ignored, else by caFile. A provider flag that did not parse
// (ok false) is reported by itself; the bundle is then checked as a file.
func (e *flagErrors) providerCAFile(flag, path, providerFlag string, src ProviderSource, ok bool) {
	if path != "" && ok && src.Kind != "http" {
		e.bad(flag, path, fmt.Errorf("only an http: provider is verified with a CA bundle; --%s is %s:<file>", providerFlag, src.Kind))
		return
	}
	e.caFile(flag, path)
}

// record checks --installation-record and, when given, --kubeconfig. A
// Runtime of another backend than kubernetes has no cluster to keep a
// ConfigMap in: its record is a file.
func (c Config) record(errs *flagErrors) {
	loc, err := installation.ParseLocation(c.InstallationRecord)
	switch {
	case err != nil:
		errs.bad("installation-record", c.InstallationRecord, err)
	case loc.Kind == installation.KindConfigMap && !c.Kubernetes():
		errs.bad("installation-record", c.InstallationRecord, fmt.Errorf("a %s Runtime keeps its installation record in a file: file:<path> (configmap: is a kubernetes Runtime's)", c.backend()))
	}
	errs.existing("kubeconfig", c.Kubeconfig)
}

// backend is --backend, kubernetes when empty.
func (c Config) backend() siteprotocol.Backend {
	if c.Backend == "" {
		return siteprotocol.BackendKubernetes
	}
	return c.Backend
}

// Kubernetes reports whether the Runtime's backend is kubernetes (the
// default): only then are the Kubernetes flags checked and the Kubernetes
// workload client, access check and executor families composed.
func (c Config) Kubernetes() bool { return c.backend() == siteprotocol.BackendKubernetes }

// ValidateInstall checks the settings of `metallo runtime install`
// (--journal-dir, --environment, --authority, --installation-record,
// --kubeconfig) with the same rules as Validate, so the hook writes nothing
// for a binding serve would refuse. Each error names its flag.
func (c Config) ValidateInstall() error {
	var errs flagErrors
	if c.JournalDir == "" {
		errs.bad("journal-dir", "", errors.New("required: the directory of the journal set"))
	} else {
		errs.directoryOrAbsent("journal-dir", c.JournalDir)
	}
	c.identity(&errs)
	c.record(&errs)
	return errors.Join(errs...)
}

// ValidateCheck checks the settings of `metallo runtime check`: the
// binding, the credential (exactly one of --token-file and --key-file, as
// for serve), the installation record, and retryFor (--retry-for) > 0.
func (c Config) ValidateCheck(retryFor time.Duration) error {
	var errs flagErrors
	c.identity(&errs)
	c.credential(&errs)
	c.record(&errs)
	errs.positive("retry-for", retryFor, "how long refused connections are retried")
	return errors.Join(errs...)
}

// Validate checks every setting serve needs; each error names its flag.
func (c Config) Validate() error {
	var errs flagErrors
	if c.JournalDir == "" {
		errs.bad("journal-dir", "", errors.New("required: the directory of the journal set"))
	}
	c.identity(&errs)
	c.credential(&errs)
	c.record(&errs)
	if c.HeartbeatFile == "" {
		errs.bad("heartbeat-file", "", errors.New("required"))
	}
	if c.Kubernetes() {
		c.kubernetes(&errs)
	}
	permissionSource, err := ParsePermissions(c.Permissions)
	if err != nil {
		errs.bad("permissions", c.Permissions, err)
	}
	errs.providerCAFile("permissions-ca-file", c.PermissionsCAFile, "permissions", permissionSource, err == nil)
	grantSource, err := ParseRepositoryGrants(c.RepositoryGrants)
	if err != nil {
		errs.bad("repository-grants", c.RepositoryGrants, err)
	}
	errs.providerCAFile("repository-grants-ca-file", c.RepositoryGrantsCAFile, "repository-grants", grantSource, err == nil)
	errs.positive("deletion-wait", c.DeletionWait, "how long cancel and cleanup wait for a deleted object")
	errs.positive("permissions-bound", c.PermissionsBound, "how long an unavailable permission provider is retried")
	errs.positive("repository-grants-bound", c.RepositoryGrantsBound, "how long an unavailable repository grant provider is retried")
	if c.CheckoutTimeout < 0 {
		errs.bad("checkout-timeout", c.CheckoutTimeout.String(), errors.New("must be positive (0: the default, 10m)"))
	}
	if c.ReadFileTimeout < 0 || (c.ReadFileTimeout > 0 && (c.ReadFileTimeout < time.Second || c.ReadFileTimeout%time.Second != 0 || c.ReadFileTimeout > application.MaxReaderTimeout)) {
		errs.bad("read-file-timeout", c.ReadFileTimeout.String(), errors.New("must be whole seconds, 1s to 1h (0: the default, 1m)"))
	}
	if c.ReadFileWait < 0 || (c.ReadFileWait > 0 && c.ReadFileWait <= c.readerTimeout()) {
		errs.bad("read-file-wait", c.ReadFileWait.String(), fmt.Errorf("must exceed --read-file-timeout (%s): the reader's own deadline ends it first (0: the default, --read-file-timeout plus 2m)", c.readerTimeout()))
	}
	if c.CheckoutWait < 0 || (c.CheckoutWait > 0 && c.CheckoutWait <= c.checkoutTimeout()) {
		errs.bad("checkout-wait", c.CheckoutWait.String(), fmt.Errorf("must exceed --checkout-timeout (%s): the helper's own deadline ends it first (0: the default, --checkout-timeout plus 5m)", c.checkoutTimeout()))
	}
	if c.ProxyTimeout < 0 {
		errs.bad("proxy-timeout", c.ProxyTimeout.String(), errors.New("must be positive: how long a proxy's exchange with the service may last (0: the default, 30s)"))
	}
	if c.ReadLogsTimeout < 0 {
		errs.bad("read-logs-timeout", c.ReadLogsTimeout.String(), errors.New("must be positive: how long a read-logs may read the log (0: the default, 30s)"))
	}
	if c.WorkspaceMaxBytes < 0 {
		errs.bad("workspace-max-bytes", fmt.Sprint(c.WorkspaceMaxBytes), errors.New("must be at least 0 (0: no Site maximum)"))
	}
	if c.RepositoryCAConfigMap != "" && len(validation.IsDNS1123Subdomain(c.RepositoryCAConfigMap)) > 0 {
		errs.bad("repository-ca-configmap", c.RepositoryCAConfigMap, errors.New("must be a ConfigMap name (a DNS-1123 subdomain)"))
	}
	if c.PullLimit < 1 || c.PullLimit > siteprotocol.MaxPullLimit {
		errs.bad("pull-limit", fmt.Sprint(c.PullLimit), fmt.Errorf("must be 1..%d", siteprotocol.MaxPullLimit))
	}
	if c.PullWait < time.Second || c.PullWait > siteprotocol.MaxPullWaitSeconds*time.Second || c.PullWait%time.Second != 0 {
		errs.bad("pull-wait", c.PullWait.String(), fmt.Errorf("must be whole seconds, 1s..%ds: the protocol's wait is in seconds, and a pull without a wait would poll an idle stream without pause",
			siteprotocol.MaxPullWaitSeconds))
	}
	errs.positive("backoff-initial", c.BackoffInitial, "the first wait after a transient failure")
	if c.BackoffInitial > 0 && c.BackoffMax < c.BackoffInitial {
		errs.bad("backoff-max", c.BackoffMax.String(), fmt.Errorf("must be at least --backoff-initial (%s)", c.BackoffInitial))
	}
	errs.positive("liveness-bound", c.LivenessBound, "the oldest heartbeat the liveness probe accepts")
	if c.LivenessBound > 0 && c.LivenessBound <= c.PullWait+c.BackoffMax {
		errs.bad("liveness-bound", c.LivenessBound.String(), fmt.Errorf("must exceed --pull-wait plus --backoff-max (%s): an idle or waiting worker beats at least that often", c.PullWait+c.BackoffMax))
	}
	if _, err := failpoint.Parse(c.Failpoints, application.RuntimeFailpointNames(), nil); err != nil {
		errs.bad("failpoints", c.Failpoints, err)
	}
	return errors.Join(errs...)
}

// kubernetes checks the flags only a kubernetes Runtime uses: the pinned
// batch image (required), the GPU resources, batch Pod annotations and
// Pod placement, the Deployments' progress deadline, the ServingRuntime
// and the Kubernetes client's rate limit. Another backend's Runtime
// neither requires nor reads them.
func (c Config) kubernetes(errs *flagErrors) {
	if !siteprotocol.IsPinnedImage(c.BatchImage) {
		errs.bad("batch-image", c.BatchImage, errors.New("the batch execution image must be an image reference with an explicit registry, pinned by digest (<registry>/<repository>@sha256:<64 hex>); a tag alone is refused"))
	}
	if err := kube.CheckExtendedResources(c.GPUResources); err != nil {
		errs.bad("gpu-resources", formatMap(c.GPUResources), err)
	}
	if err := kube.CheckPodAnnotations(c.BatchPodAnnotations); err != nil {
		errs.bad("batch-pod-annotations", formatMap(c.BatchPodAnnotations), err)
	}
	if err := kube.CheckNodeSelector(c.PodNodeSelector); err != nil {
		errs.bad("pod-node-selector", formatMap(c.PodNodeSelector), err)
	}
	if _, err := kube.ParseTolerations(c.PodTolerations); err != nil {
		errs.bad("pod-tolerations", strings.Join(c.PodTolerations, ","), err)
	}
	if c.ProgressDeadline < time.Second || c.ProgressDeadline%time.Second != 0 || c.ProgressDeadline > math.MaxInt32*time.Second {
		errs.bad("progress-deadline", c.ProgressDeadline.String(), errors.New("must be whole seconds, at least 1s: it is the Deployment's progressDeadlineSeconds"))
	}
	if c.PodRunAsUser < 0 || c.PodRunAsUser > math.MaxInt32 {
		errs.bad("pod-run-as-user", fmt.Sprint(c.PodRunAsUser), errors.New("must be a uid from 1 to 2147483647, or 0 to render none (the image's own user)"))
	}
	if c.PodFSGroup < 0 || c.PodFSGroup > math.MaxInt32 {
		errs.bad("pod-fs-group", fmt.Sprint(c.PodFSGroup), errors.New("must be a gid from 1 to 2147483647, or 0 to render none"))
	}
	if err := checkServingRuntimes(c.ServingRuntimes); err != nil {
		errs.bad("serving-runtimes", formatMap(c.ServingRuntimes), err)
	}
	if !(c.KubeAPIQPS >= 1 && c.KubeAPIQPS <= 10000) {
		errs.bad("kube-api-qps", fmt.Sprint(c.KubeAPIQPS), errors.New("must be 1..10000 requests per second"))
	}
	if c.KubeAPIBurst < 1 || c.KubeAPIBurst > 20000 || float64(c.KubeAPIBurst) < c.KubeAPIQPS {
		errs.bad("kube-api-burst", fmt.Sprint(c.KubeAPIBurst), errors.New("must be 1..20000 requests and at least --kube-api-qps"))
	}
}

// Scheduling returns the configured kube.Scheduling (Validate checks it
// first; an entry that does not parse is an error here too).
func (c Config) Scheduling() (kube.Scheduling, error) {
	tolerations, err := kube.ParseTolerations(c.PodTolerations)
	if err != nil {
		return kube.Scheduling{}, config.Invalid("pod-tolerations", strings.Join(c.PodTolerations, ","), err)
	}
	return kube.Scheduling{NodeSelector: maps.Clone(c.PodNodeSelector), Tolerations: tolerations}, nil
}

// Users returns the configured kube.Users (--pod-run-as-user,
// --pod-fs-group).
func (c Config) Users() kube.Users {
	return kube.Users{RunAsUser: c.PodRunAsUser, FSGroup: c.PodFSGroup}
}

// formatMap renders a key=value flag value for messages, keys sorted.
func formatMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// WorkerConfig returns the worker's settings.
func (c Config) WorkerConfig() application.WorkerConfig {
	path, flag := c.Credential()
	return application.WorkerConfig{
		Environment: c.Environment, Authority: c.Authority, Backend: c.backend(), PullLimit: c.PullLimit, PullWait: c.PullWait,
		BackoffInitial: c.BackoffInitial, BackoffMax: c.BackoffMax, FoldAcknowledgement: c.FoldAcknowledgement,
		Credential: "--" + flag + " " + path, Bounds: c.Bounds(),
	}
}

// Bounds are the command bounds the flags configure
// (docs/site-runtime.md#command-bounds), every default resolved.
func (c Config) Bounds() application.Bounds {
	return application.Bounds{
		Proxy: c.ProxyTimeout, ReadLogs: c.ReadLogsTimeout, ReadFile: c.readFileWait(), Checkout: c.checkoutWait(),
		Deletion: c.DeletionWait, Permissions: c.PermissionsBound, Grants: c.RepositoryGrantsBound,
	}.WithDefaults()
}

// Reads are the private reads' bounds (--proxy-timeout, --read-logs-timeout).
func (c Config) Reads() application.ReadConfig {
	return application.ReadConfig{ProxyTimeout: c.ProxyTimeout, LogsTimeout: c.ReadLogsTimeout}
}

func (c Config) readerTimeout() time.Duration {
	if c.ReadFileTimeout <= 0 {
		return application.DefaultReaderTimeout
	}
	return c.ReadFileTimeout
}

func (c Config) readFileWait() time.Duration {
	if c.ReadFileWait <= 0 {
		return c.readerTimeout() + application.DefaultReaderWaitExtra
	}
	return c.ReadFileWait
}

func (c Config) checkoutTimeout() time.Duration {
	if c.CheckoutTimeout <= 0 {
		return application.DefaultCheckoutTimeout
	}
	return c.CheckoutTimeout
}

func (c Config) checkoutWait() time.Duration {
	if c.CheckoutWait <= 0 {
		return c.checkoutTimeout() + application.DefaultCheckoutWaitExtra
	}
	return c.CheckoutWait
}

// checkServingRuntimes checks --serving-runtimes (empty: the default):
// each model format a KServe model format name (a DNS label, e.g.
// sklearn) mapped to a ServingRuntime's name (a DNS subdomain). Errors
// name the first entry that is not.
func checkServingRuntimes(m map[string]string) error {
	for _, format := range slices.Sorted(maps.Keys(m)) {
		if msgs := validation.IsDNS1123Label(format); len(msgs) > 0 {
			return fmt.Errorf("model format %q must be a KServe model format name (a DNS label): %s", format, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Subdomain(m[format]); len(msgs) > 0 {
			return fmt.Errorf("the runtime of format %s, %q, must name a KServe ServingRuntime (a DNS subdomain): %s", format, m[format], strings.Join(msgs, "; "))
		}
	}
	return nil
}
