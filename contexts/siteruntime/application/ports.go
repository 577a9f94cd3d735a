package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Sentinel errors shared by the ports.
var (
	// ErrTransient marks a failure that may pass by itself: connection
	// refused or reset, a timeout, a 5xx answer. The worker retries it with
	// capped exponential backoff and jitter; it never advances or clears
	// anything because of it.
	ErrTransient = errors.New("transient failure")
	// ErrCredentialUnreadable marks a request never sent because the
	// Runtime's own credential file is missing, unreadable or empty (a
	// projected token that vanished). It is retried like ErrTransient — a
	// rotation may be writing the file — and counts as a refusal of the
	// credential, so a file that stays unusable fails liveness
	// (docs/site-runtime.md#a-refused-credential).
	ErrCredentialUnreadable = errors.New("the credential file cannot be used")
	// ErrJournalIntegrity marks a journal whose saved state fails a check
	// (version, digest, binding, missing row). Found while running it stops
	// the worker (reason journal-integrity); found on open it refuses start.
	ErrJournalIntegrity = errors.New("journal integrity check failed")
	// ErrUnexplained is returned (wrapped) by an executor's Recover when
	// the native state cannot be explained (an object with the command's
	// deterministic name whose identity or specification does not match).
	// The worker stops (reason unexplained-native-state) and deletes
	// nothing.
	ErrUnexplained = errors.New("unexplained native state")
	// ErrRecordExists is returned by InstallationRecord.Create when a
	// record exists; the existing record is kept.
	ErrRecordExists = errors.New("installation record exists")
	// ErrOversizedAnswer marks a Site API answer longer than the protocol
	// allows (a pull answer over siteprotocol.MaxPullAnswerBytes): it was
	// not parsed. The worker asks again for one command, which always
	// fits; an answer of one command that is still too long stops it
	// (reason protocol-violation).
	ErrOversizedAnswer = errors.New("answer exceeds the protocol's size bound")
)

// Problem is a 4xx answer of the Site API: RFC 9457 problem details with
// the machine reason the Runtime decides by
// (docs/site-protocol.md#problem-reasons).
type Problem struct {
	// Status is the HTTP status code.
	Status int
	// Reason is the problem's "reason" member, e.g. "result-conflict".
	Reason string
	// Detail is the human explanation.
	Detail string
	// Request names the request answered, "<method> <path>" (empty when
	// unknown), so a problem reads like every other Site API failure.
	Request string
}

func (p *Problem) Error() string {
	if p.Request != "" {
		return fmt.Sprintf("%s: site api answered %d %s: %s", p.Request, p.Status, p.Reason, p.Detail)
	}
	return fmt.Sprintf("site api answered %d %s: %s", p.Status, p.Reason, p.Detail)
}

// SiteControl is the client side of the Site protocol for one environment
// (docs/site-protocol.md#routes). Errors are a *Problem for a 4xx answer,
// wrap ErrTransient for a failure worth retrying, or wrap
// ErrOversizedAnswer for an answer longer than the protocol's bound.
type SiteControl interface {
	// StreamState reads the stream's environment, authority, acknowledged
	// and head sequences and bound installation.
	StreamState(ctx context.Context) (siteprotocol.StreamState, error)
	// Pull returns the commands with sequence > after, oldest first, at
	// most limit (1..100), long-polling up to wait (0..30 s) when none is
	// ready. Each command is returned exactly as the server stores it.
	// The first pull of an installation binds an unbound stream to it.
	Pull(ctx context.Context, after int64, limit int, wait time.Duration) (siteprotocol.Pull, error)
	// SendResult sends the exact result bytes of command sequence and
	// returns the server's acknowledgement.
	SendResult(ctx context.Context, sequence int64, result []byte) (siteprotocol.Acknowledgement, error)
	// ReportStop tells the execution role why the worker stopped, where
	// and which build (the client fills r.RuntimeVersion), once and best
	// effort (docs/site-protocol.md#the-stop-report).
	ReportStop(ctx context.Context, r siteprotocol.StopReport) error
}

// SiteReader is the read-only side of the Site protocol that `metallo
// runtime check` uses: it can neither bind a stream nor acknowledge
// anything. Errors are as SiteControl's.
type SiteReader interface {
	// StreamState reads the stream's state (SiteControl.StreamState).
	StreamState(ctx context.Context) (siteprotocol.StreamState, error)
	// Peek returns the commands with sequence > after, oldest first, at
	// most limit, without waiting and without binding an unbound stream
	// to this installation (the pull's bind=false); a stream bound to
	// another installation is still refused (installation-mismatch).
	Peek(ctx context.Context, after int64, limit int) (siteprotocol.Pull, error)
}

// RuntimeJournal is delivery.sqlite as the worker sees it: the checkpoint,
// the pending command and its exact result. Every write is one durable
// commit. Writes are idempotent: repeating a write that already committed
// succeeds, so a write that failed with an ambiguous error can be retried.
// Errors wrapping ErrJournalIntegrity stop the worker; other errors are
// retried with backoff.
type RuntimeJournal interface {
	// Restore reads the checkpoint and pending command, verifying every
	// digest.
	Restore(ctx context.Context) (domain.Checkpoint, error)
	// SavePending persists p as the pending command (commit #1). When
	// prior is not nil, the same commit first clears the pending command
	// prior names (exactly acknowledged, its result digest matching) and
	// advances the checkpoint to it: the folded commit #3.
	SavePending(ctx context.Context, p domain.Pending, prior *domain.Acknowledgement) error
	// SaveResult persists the exact result of the pending command
	// (commit #2).
	SaveResult(ctx context.Context, sequence int64, result []byte, resultDigest string) error
	// Acknowledge clears the pending command ack names and advances the
	// checkpoint to it (commit #3).
	Acknowledge(ctx context.Context, ack domain.Acknowledgement) error
	// Seal ends all writing when the worker stops: the journal is closed
	// (it stays locked) and every later write fails.
	Seal() error
}

// CommandExecutor performs commands of one operation (and family) on a
// native system. Implementations must be deterministic per command: the
// same command always yields the same Answer, whether through Execute or
// Recover.
//
// Return an Answer for every outcome the native system gave, including
// ordinary failures and refusals. Return an error only when the effect is
// uncertain (the native call's outcome is unknown: a timeout, a lost
// connection); the worker then backs off and calls Recover, never Execute
// again. Return an error wrapping ErrUnexplained when native state cannot
// be explained; the worker stops.
type CommandExecutor interface {
	// Execute performs a command the Runtime has not executed before.
	Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error)
	// Recover answers a command whose effect is uncertain (the Runtime may
	// have crashed after, or during, Execute): it looks up what the command
	// did by its stable identity before acting, and completes it if
	// needed.
	Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error)
}

// Registration routes commands of Operation (and Family; empty for
// operations without one, or for every family) to Executor.
type Registration struct {
	Operation siteprotocol.Operation
	Family    siteprotocol.Family
	Executor  CommandExecutor
	// Override lets a registration replace another for the same route; it
	// exists for test compositions whose executor stands in for a native
	// system. Two overrides of one route conflict.
	Override bool
}

// MemberBindings stores member bindings (delivery.sqlite, table
// member_bindings) and resolves them for access checks.
type MemberBindings interface {
	// Resolve returns the binding stored for ref's binding ID and
	// generation; found is false when none is.
	Resolve(ctx context.Context, ref siteprotocol.AccountRef) (b domain.MemberBinding, found bool, err error)
	// Generations returns every stored generation of bindingID, oldest
	// first.
	Generations(ctx context.Context, bindingID string) ([]domain.MemberBinding, error)
	// LiveOfAccount returns every live (not retired) binding naming
	// account, the native account a member acts as.
	LiveOfAccount(ctx context.Context, account string) ([]domain.MemberBinding, error)
	// Save writes rows (insert or replace by binding ID and generation) in
	// one durable commit.
	Save(ctx context.Context, rows []domain.MemberBinding) error
}

// NativeRecords is the durable record store of one native family's file.
// Executors save a record in the same order every time: native record
// first, then (by the worker) the delivery result.
type NativeRecords interface {
	// SaveRecord inserts or replaces the record (attempt, kind, name) in
	// one durable commit; the specification's digest is computed and saved
	// with it.
	SaveRecord(ctx context.Context, r domain.NativeRecord) error
	// Records returns the records of an Attempt, in (kind, name) order.
	Records(ctx context.Context, attemptID string) ([]domain.NativeRecord, error)
}

// BatchRecords is jobs.sqlite: batch preparation/submission records, saved
// native identity and private workspace records.
type BatchRecords interface{ NativeRecords }

// ServiceRecords is services.sqlite: application/KServe preparation,
// rendered specification, native identity, recovery and clean-up progress.
type ServiceRecords interface{ NativeRecords }

// InstallationRecord is the record, outside the journals' volume, that this
// installation initialised the journals (a ConfigMap, or a file).
type InstallationRecord interface {
	// Read returns the record, or nil when there is none.
	Read(ctx context.Context) (*domain.Installation, error)
	// Create writes the record; it fails with ErrRecordExists (keeping the
	// existing record) when one exists.
	Create(ctx context.Context, rec domain.Installation) error
	// Describe names the record for messages, e.g.
	// "configmap metallo-runtime/metallo-installation".
	Describe() string
}

// JournalSet is the journal directory as the installer sees it.
type JournalSet interface {
	// Present lists which journal files exist.
	Present(ctx context.Context) (domain.JournalSet, error)
	// Initialise creates the three journal files at their fixed schema
	// version, bound to b.
	Initialise(ctx context.Context, b domain.Binding) error
	// Binding reads and verifies the complete journal set read-only, at
	// whichever known schema version each file is, and returns its binding.
	Binding(ctx context.Context) (domain.Binding, error)
	// DiscardUnfinished removes the present journal files when they are
	// exactly what an interrupted Initialise left — fresh files (no
	// command, checkpoint 0) of one installation, a present delivery.sqlite
	// bound to want's environment and authority — and returns their names;
	// otherwise it removes nothing and says why.
	DiscardUnfinished(ctx context.Context, want domain.Binding) ([]string, error)
	// Upgrade brings every journal file of the complete set to the
	// Runtime's schema version by the journal's explicit, versioned
	// upgrade, atomically as a set (a crash leaves the old set or the new
	// one, never a mix), keeping every row, and returns what it upgraded
	// (none when the set is current); it verifies the set first and is
	// safe to run again after a crash
	// (docs/site-runtime.md#schema-versions-and-upgrades).
	Upgrade(ctx context.Context) ([]string, error)
}

// Clock reads the time.
type Clock interface{ Now() time.Time }

// Heartbeat is the worker's liveness signal, read by `metallo runtime
// liveness` in another process.
type Heartbeat interface {
	// Beat records that the worker made progress or completed an idle poll.
	Beat(ctx context.Context) error
	// Stopped records that the worker stopped for reason; liveness fails
	// from then on.
	Stopped(ctx context.Context, reason domain.StopReason, cause string) error
	// Refused records how the last Site API request ended for the
	// credential: cause is the refusal (unauthenticated 401 or forbidden
	// 403, naming the credential) or empty when the request was not
	// refused (accepted, unanswered, or answered otherwise). The first
	// refusal of an unbroken run dates it; liveness fails once the run
	// outlasts the liveness bound (docs/site-runtime.md#a-refused-credential).
	Refused(ctx context.Context, cause string) error
	// Busy records the command the worker executes or recovers now, with
	// its bounded wait under way (nil: between commands), and beats. The
	// worker calls it while the command runs, so the heartbeat shows
	// progress; liveness fails once a command runs past its Until
	// (docs/site-runtime.md#command-bounds).
	Busy(ctx context.Context, w *Work) error
}

// Work is the command the worker is executing or recovering, as the
// heartbeat records it (docs/site-runtime.md#command-bounds).
type Work struct {
	Sequence  int64
	CommandID string
	Operation siteprotocol.Operation
	AttemptID string
	// Since is when this process began executing (or recovering) it;
	// Until is Since plus the operation's ceiling (Bounds.Ceiling).
	Since time.Time
	Until time.Time
	// Wait is the bounded wait under way, nil when none.
	Wait *Wait
}

// Failpoints are crash points for tests: Hit(name) kills the process when a
// test armed name, and does nothing otherwise.
type Failpoints interface{ Hit(name string) }

// Failpoint names: one right after each durable step and each native call.
const (
	// FailAfterPersistPending: commit #1 (pending command) is durable.
	FailAfterPersistPending = "after-persist-pending"
	// FailAfterNativeCall: an executor's native call returned.
	FailAfterNativeCall = "after-native-call"
	// FailAfterNativeRecord: a jobs.sqlite/services.sqlite record is
	// durable, the delivery result is not yet.
	FailAfterNativeRecord = "after-native-record"
	// FailAfterBindingRecord: a member binding change is durable, the
	// delivery result is not yet.
	FailAfterBindingRecord = "after-binding-record"
	// FailAfterRecover: Recover returned; its result is not yet saved.
	FailAfterRecover = "after-recover"
	// FailAfterPersistResult: commit #2 (exact result) is durable.
	FailAfterPersistResult = "after-persist-result"
	// FailAfterSend: the server acknowledged the result; the
	// acknowledgement is not yet recorded.
	FailAfterSend = "after-send"
	// FailAfterAcknowledge: commit #3 (cleared pending, advanced
	// checkpoint) is durable.
	FailAfterAcknowledge = "after-acknowledge"
)

// Failpoints of `metallo runtime install` (JournalSet.Initialise), armed
// by name@n for the n-th file: jobs.sqlite, services.sqlite,
// delivery.sqlite.
const (
	// FailInstallAfterBuild: a journal file is built and synced in the
	// staging directory.
	FailInstallAfterBuild = "install-after-build"
	// FailInstallAfterLink: a journal file is linked into the journal
	// directory and the directory synced.
	FailInstallAfterLink = "install-after-link"
)

// Failpoints of the journal set's upgrade (JournalSet.Upgrade), in the
// order the upgrade reaches them; name@n counts the n-th file upgraded
// (docs/site-runtime.md#schema-versions-and-upgrades).
const (
	// FailUpgradeBeforeCopies: the set is verified, nothing is written yet.
	FailUpgradeBeforeCopies = "upgrade-before-copies"
	// FailUpgradeAfterCopy: an upgraded copy of a journal file is complete
	// and synced beside its original.
	FailUpgradeAfterCopy = "upgrade-after-copy"
	// FailUpgradeAfterMarker: the commit marker is durable; the upgrade is
	// decided and every later step rolls forward.
	FailUpgradeAfterMarker = "upgrade-after-marker"
	// FailUpgradeAfterRename: an upgraded copy has replaced its original
	// and the directory is synced.
	FailUpgradeAfterRename = "upgrade-after-rename"
	// FailUpgradeBeforeMarkerRemoval: every copy has replaced its original;
	// the commit marker is still there.
	FailUpgradeBeforeMarkerRemoval = "upgrade-before-marker-removal"
)

// InstallFailpointNames lists the failpoints of `metallo runtime install`.
func InstallFailpointNames() []string {
	return []string{FailInstallAfterBuild, FailInstallAfterLink, FailUpgradeBeforeCopies, FailUpgradeAfterCopy,
		FailUpgradeAfterMarker, FailUpgradeAfterRename, FailUpgradeBeforeMarkerRemoval}
}

// FailpointNames lists every failpoint of the worker.
func FailpointNames() []string {
	return []string{FailAfterPersistPending, FailAfterNativeCall, FailAfterNativeRecord, FailAfterBindingRecord,
		FailAfterRecover, FailAfterPersistResult, FailAfterSend, FailAfterAcknowledge}
}

// FailAtCompensatingDelete: a start's compensating delete of its
// Deployment (the Service create was refused) is recorded in phase
// deleting; the delete call has not been made.
const FailAtCompensatingDelete = "at-compensating-delete"

// ServiceFailpointNames lists the failpoints only the service executors
// reach (the worker's are FailpointNames).
func ServiceFailpointNames() []string { return []string{FailAtCompensatingDelete} }

// RuntimeFailpointNames lists every failpoint of a serving Runtime: the
// worker's and the service executors'.
func RuntimeFailpointNames() []string { return append(FailpointNames(), ServiceFailpointNames()...) }

// NoFailpoints is the inert Failpoints.
type NoFailpoints struct{}

// Hit does nothing.
func (NoFailpoints) Hit(string) {}

// Events receives what the worker does, for logs and metrics
// (docs/operations.md#metrics, docs/operations.md#logs).
type Events interface {
	// Started reports the restored checkpoint.
	Started(cp domain.Checkpoint)
	// Stopped reports that the worker stopped; the process stays up.
	Stopped(err *domain.StopError)
	// StopReported reports how the stop report to the Site API ended: nil
	// when the server recorded it (docs/site-protocol.md#the-stop-report).
	StopReported(reason domain.StopReason, err error)
	// ShutDown reports that the worker ended because the process is
	// shutting down, with the checkpoint (and pending command) it leaves
	// for the next start.
	ShutDown(cp domain.Checkpoint)
	// Retrying reports the attempt-th consecutive failure (1-based) of
	// step (one of RetrySteps), retried after wait.
	Retrying(step string, attempt int, err error, wait time.Duration)
	// RetryEnded reports that step succeeded after failures consecutive
	// failures (at least one): the outage it was waiting out has ended.
	RetryEnded(step string, failures int)
	// SiteAnswered reports how one Site API request ended.
	SiteAnswered(outcome SiteOutcome)
	// StreamHead reports the stream's head sequence as the server last
	// answered it.
	StreamHead(sequence int64)
	// Pending reports the command saved as pending (commit #1), not yet
	// acknowledged.
	Pending(sequence int64)
	// Delivered reports an exactly acknowledged result; the command is no
	// longer pending.
	Delivered(d Delivery)
	// HeartbeatFailed reports a heartbeat that could not be recorded; the
	// worker goes on (liveness will fail when no beat lands in time).
	HeartbeatFailed(err error)
	// LongWait reports a bounded wait of the command w runs (w.Wait) that
	// has lasted WorkerConfig.LongWait: once per wait.
	LongWait(w Work)
	// LongWaitEnded reports the end of a wait LongWait reported: how it
	// ended (result) and how long it lasted.
	LongWaitEnded(w Work, result string, waited time.Duration)
}

// SiteOutcome is how one Site API request ended, for Events.
type SiteOutcome string

// Site API outcomes.
const (
	// SiteAccepted: the server accepted the request (answered 200).
	SiteAccepted SiteOutcome = "accepted"
	// SiteRefused: the server refused the credential (401 unauthenticated
	// or 403 forbidden).
	SiteRefused SiteOutcome = "refused"
	// SiteFailed: anything else — no answer, a 5xx, 408 or 429, another
	// problem, an answer the Runtime cannot use.
	SiteFailed SiteOutcome = "failed"
)

// DeliveryPath is how a delivered result came about.
type DeliveryPath string

// Delivery paths (the path label of metallo_runtime_results_total).
const (
	// PathExecuted: Execute answered a command pulled for the first time.
	PathExecuted DeliveryPath = "executed"
	// PathRecovered: Recover answered a command whose effect was uncertain.
	PathRecovered DeliveryPath = "recovered"
	// PathReplayed: a saved result was sent again byte for byte.
	PathReplayed DeliveryPath = "replayed"
)

// Delivery describes an exactly acknowledged result.
type Delivery struct {
	Sequence  int64
	CommandID string
	Operation siteprotocol.Operation
	// AttemptID is the command's Attempt (empty for bind-member and
	// retire-member).
	AttemptID string
	Outcome   siteprotocol.Outcome
	Reason    siteprotocol.Reason
	// Message is the result's message.
	Message string
	Path    DeliveryPath
	// Note is the executor's note for the command's log line
	// (domain.Answer.Note), e.g. that a start's account was checked by
	// name only; empty for a replayed result.
	Note string
}

// Steps of the worker that retry transient failures (the step label of
// metallo_runtime_retries_total).
const (
	StepStreamState    = "stream state"
	StepVerifyPending  = "verify pending command"
	StepPull           = "pull"
	StepPersistPending = "persist pending command"
	StepExecute        = "execute"
	StepRecover        = "recover"
	StepPersistResult  = "persist result"
	StepSendResult     = "send result"
	StepAcknowledge    = "record acknowledgement"
)

// RetrySteps lists every step that retries, in the order of delivery.
func RetrySteps() []string {
	return []string{StepStreamState, StepVerifyPending, StepPull, StepPersistPending, StepExecute, StepRecover,
		StepPersistResult, StepSendResult, StepAcknowledge}
}
