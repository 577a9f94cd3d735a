package application

import (
	"context"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Defaults of the command bounds (docs/site-runtime.md#command-bounds).
const (
	// DefaultProxyTimeout bounds a proxy's exchange with the service:
	// connecting, the answer's headers and its whole body (--proxy-timeout).
	DefaultProxyTimeout = 30 * time.Second
	// DefaultReadLogsTimeout bounds a read-logs' reads of the log, from the
	// command's start (--read-logs-timeout).
	DefaultReadLogsTimeout = 30 * time.Second
	// DefaultRemovalAllowance is what removing a workspace helper or reader
	// may take: its grace period, then the foreground-deletion allowance.
	DefaultRemovalAllowance = HelperGracePeriodSeconds*time.Second + DefaultHelperDeletionWait
	// StartWatchWait is how long a start waits for the watch of a new
	// namespace's Jobs (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).
	StartWatchWait = 30 * time.Second
	// CeilingAllowance is what Bounds.Ceiling adds to every operation's
	// bounds for the Kubernetes API requests and journal commits a command
	// makes besides its bounded waits.
	CeilingAllowance = time.Minute
)

// Bounds are the Site's command bounds as configured
// (docs/site-runtime.md#command-bounds): each bounded wait a command may
// hold the ordered worker for. A zero field is its default.
type Bounds struct {
	// Proxy bounds a proxy's exchange, from its send (--proxy-timeout).
	Proxy time.Duration
	// ReadLogs bounds a read-logs' reads, from the command's start
	// (--read-logs-timeout).
	ReadLogs time.Duration
	// ReadFile bounds a read-file's wait for its reader's line, from the
	// command's start (FileReadConfig.Wait).
	ReadFile time.Duration
	// Checkout bounds a prepare's wait for its workspace helper's outcome,
	// from the command's start (CheckoutConfig.Wait).
	Checkout time.Duration
	// Deletion bounds a cancel's or cleanup's wait for its objects to be
	// gone, from the command's start, and a start's compensating delete
	// (--deletion-wait).
	Deletion time.Duration
	// Permissions and Grants bound the retries of an unavailable
	// permission or repository grant provider (--permissions-bound,
	// --repository-grants-bound).
	Permissions time.Duration
	Grants      time.Duration
	// Removal is the removal of a workspace helper, its credential Secret
	// or a workspace reader (DefaultRemovalAllowance).
	Removal time.Duration
}

// WithDefaults returns b with every zero field at its default.
func (b Bounds) WithDefaults() Bounds {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&b.Proxy, DefaultProxyTimeout)
	def(&b.ReadLogs, DefaultReadLogsTimeout)
	def(&b.ReadFile, DefaultReaderTimeout+DefaultReaderWaitExtra)
	def(&b.Checkout, DefaultCheckoutTimeout+DefaultCheckoutWaitExtra)
	def(&b.Deletion, DefaultDeletionWait)
	def(&b.Permissions, 2*time.Minute)
	def(&b.Grants, 2*time.Minute)
	def(&b.Removal, DefaultRemovalAllowance)
	return b
}

// Ceiling is the longest one Execute or Recover of op may keep the worker:
// every bound its steps may wait out, added up, plus CeilingAllowance.
// The worker records it in the heartbeat while it runs the command, and
// `metallo runtime liveness` fails once a command runs past it: the worker
// is then stuck beyond every bound (docs/site-runtime.md#command-bounds).
// An operation it does not know gets the longest ceiling of all.
func (b Bounds) Ceiling(op siteprotocol.Operation) time.Duration {
	b = b.WithDefaults()
	var d time.Duration
	switch op {
	case siteprotocol.OpBindMember, siteprotocol.OpRetireMember, siteprotocol.OpObserve:
	case siteprotocol.OpPrepare:
		// The access check, the grant issued, the helper's outcome, the
		// revocation, the helper's and the Secret's removal.
		d = b.Permissions + b.Grants + b.Checkout + b.Grants + 2*b.Removal
	case siteprotocol.OpStart:
		// The access check, the watch of a new namespace, a compensating
		// delete.
		d = b.Permissions + StartWatchWait + b.Deletion
	case siteprotocol.OpCancel:
		d = b.Deletion
	case siteprotocol.OpCleanup:
		// A revocation retried first, then the deletions.
		d = b.Grants + b.Deletion
	case siteprotocol.OpReadLogs:
		d = b.Permissions + b.ReadLogs
	case siteprotocol.OpReadFile:
		// A reader left by another read removed, the reader's line, its
		// removal.
		d = b.Permissions + b.Removal + b.ReadFile + b.Removal
	case siteprotocol.OpProxy:
		d = b.Permissions + b.Proxy
	default:
		for _, o := range siteprotocol.Operations() {
			d = max(d, b.Ceiling(o)-CeilingAllowance)
		}
	}
	return d + CeilingAllowance
}

// Wait is one bounded wait of a command: what it waits for, since when and
// until when at most (docs/site-runtime.md#command-bounds).
type Wait struct {
	What  string
	Since time.Time
	Until time.Time
}

// waitReporter is told of a command's bounded waits (the worker: its
// heartbeat and its log); the returned function ends the wait with how it
// ended ("ended", "reached its bound").
type waitReporter interface {
	waitBegan(w Wait) func(result string)
}

// commandKey is the context key of the command the worker runs.
type commandKey struct{}

// commandScope is what the worker tells an executor, through its context,
// of the command it runs: when the command began and who is told of its
// waits.
type commandScope struct {
	start time.Time
	waits waitReporter
}

// WithCommandStart returns ctx carrying start as the start of the command
// it runs: the time saved with the command when it was first pulled. The
// worker does this for every Execute and Recover; a test calling an
// executor directly uses it to run a Recover as after a restart.
func WithCommandStart(ctx context.Context, start time.Time) context.Context {
	s, _ := ctx.Value(commandKey{}).(*commandScope)
	n := &commandScope{start: start}
	if s != nil {
		n.waits = s.waits
	}
	return context.WithValue(ctx, commandKey{}, n)
}

func withCommand(ctx context.Context, start time.Time, waits waitReporter) context.Context {
	return context.WithValue(ctx, commandKey{}, &commandScope{start: start, waits: waits})
}

// CommandStart is when the command ctx carries began: the time saved with
// it in the journal when it was first pulled, so that a Recover after a
// restart counts the time already spent (docs/site-runtime.md#command-bounds).
// It is now when ctx carries none (a command saved pending by a Runtime
// before it kept the time, or a caller that is not the worker).
func CommandStart(ctx context.Context) time.Time {
	if s, ok := ctx.Value(commandKey{}).(*commandScope); ok && !s.start.IsZero() {
		return s.start
	}
	return time.Now()
}

// commandDeadline is CommandStart(ctx) plus bound: the end of a bounded
// wait that counts from the command's start.
func commandDeadline(ctx context.Context, bound time.Duration) time.Time {
	return CommandStart(ctx).Add(bound)
}

// beginWait reports a bounded wait of the command ctx carries, from now
// until at most until, and returns the function that ends it with how it
// ended (docs/site-runtime.md#command-bounds). Without a command in ctx it
// reports nothing.
func beginWait(ctx context.Context, what string, until time.Time) func(result string) {
	s, ok := ctx.Value(commandKey{}).(*commandScope)
	if !ok || s.waits == nil {
		return func(string) {}
	}
	return s.waits.waitBegan(Wait{What: what, Since: time.Now(), Until: until})
}

// How a bounded wait ended, as its end reports it.
const (
	waitDone    = "ended"
	waitAtBound = "reached its bound"
)
