package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// BatchConfig configures the batch executors.
type BatchConfig struct {
	// DeletionWait bounds the wait for a deleted object (default
	// DefaultDeletionWait).
	DeletionWait time.Duration
	// Reads bounds the private reads (docs/site-runtime.md#command-bounds).
	Reads ReadConfig
}

// BatchExecutor performs the batch family's prepare, start, observe,
// cancel and cleanup (docs/site-runtime.md#batch-on-kubernetes,
// docs/site-runtime.md#recovery-per-operation-and-family):
//
//   - prepare creates the Attempt's private workspace claim as the member,
//     after the access check; a repository checkout is refused
//     unsupported-operation (it is not built into this Runtime yet).
//   - start creates the Attempt's workload as the member after a fresh
//     access check; its answer is always the same bytes for the same
//     command (state queued, the object's UID), whether created or adopted.
//   - observe reports the workload's native state; when the recorded object
//     is gone, the terminal state recorded while it existed (the Runtime's
//     watch, WithTerminalStates), saying it is gone, and native-missing
//     when none was recorded.
//   - cancel (the workload) and cleanup (workload and workspace) delete as
//     the Runtime with the exact UID and foreground propagation, and wait
//     (bounded) until each object is gone; an object of the name with
//     another UID is listed in detail.foreign_objects and never touched.
//
// Creates, recovery, cancel and cleanup are the shared Lifecycle over
// jobs.sqlite (docs/site-runtime.md#one-lifecycle-for-every-family): every
// create is recorded in phase creating BEFORE the create call and with its
// UID after it, so Recover can tell what may have happened: a recorded UID
// is answered at once; otherwise the object is looked up by its
// deterministic name — absent: created (after a fresh access check);
// labels and saved specification match: adopted (also while being
// deleted); otherwise the native state is unexplained (ErrUnexplained: the
// worker stops and nothing is deleted). The batch family supplies what it
// renders (BatchSpecs), how it observes its Job (JobObserver) and its
// kinds: cancel removes the Job, cleanup the Job and then the workspace
// claim.
type BatchExecutor struct {
	life   *Lifecycle
	access *Access
	jobs   JobObserver
	specs  BatchSpecs
	images BatchImages
	// checkout is set by WithCheckout; without it a prepare with a
	// repository is refused unsupported-operation.
	checkout *Checkout
	// terminal, watch and clock are set by WithTerminalStates.
	terminal TerminalStates
	watch    *JobWatcher
	clock    Clock
	// reads are set by WithReads, bounded by readCfg.
	reads   *PrivateReads
	readCfg ReadConfig
}

// NewBatchExecutor returns the batch executors.
func NewBatchExecutor(access *Access, native BatchNatives, specs BatchSpecs, images BatchImages, records BatchRecords, fp Failpoints, cfg BatchConfig) *BatchExecutor {
	life := NewLifecycle(access, native, records, fp, LifecycleConfig{
		DeletionWait: cfg.DeletionWait,
		Workload:     []string{domain.KindJob},
		Owned:        []string{domain.KindJob, domain.KindPod, domain.KindSecret, domain.KindWorkspace},
		State:        jobState(native),
	})
	return &BatchExecutor{life: life, access: access, jobs: native, specs: specs, images: images, readCfg: cfg.Reads}
}

// jobState is the Job's state as its observation reports it.
func jobState(jobs JobObserver) WorkloadState {
	return func(ctx context.Context, ref siteprotocol.NativeRef) (siteprotocol.State, bool, error) {
		obs, found, err := jobs.ObserveJob(ctx, ref)
		return obs.State, found, err
	}
}

// WithTerminalStates makes e use the Runtime's watch of its Jobs
// (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone): start
// makes sure the namespace is watched before it creates a Job; observe
// records a terminal state it reads (a fact of the Job) and, for a Job
// that is gone, reports the state recorded while it existed. It returns e.
func (e *BatchExecutor) WithTerminalStates(states TerminalStates, watch *JobWatcher, clock Clock) *BatchExecutor {
	e.terminal, e.watch, e.clock = states, watch, clock
	return e
}

// WithCheckout makes e's prepare check out a payload's repository into
// the workspace through the workspace helper
// (docs/site-runtime.md#the-workspace-helper). It returns e.
func (e *BatchExecutor) WithCheckout(grants RepositoryGrants, specs CheckoutSpecs, pods HelperPods, cfg CheckoutConfig) *BatchExecutor {
	e.checkout = NewCheckout(e.life, grants, specs, pods, cfg)
	return e
}

// WithOtherFamilies makes e see the other families' record files
// (services.sqlite): a prepare or start of an Attempt recorded there is
// refused attempt-conflict and changes nothing
// (docs/site-runtime.md#one-lifecycle-for-every-family). It returns e.
func (e *BatchExecutor) WithOtherFamilies(others ...FamilyRecords) *BatchExecutor {
	e.life.others = others
	return e
}

// WithReads makes e answer read-logs of its Jobs' Pods through pods
// (docs/site-runtime.md#private-reads); without it read-logs is refused
// unsupported-operation. It returns e.
func (e *BatchExecutor) WithReads(pods WorkloadPods) *BatchExecutor {
	e.reads = NewPrivateReads(e.life, e.specs, pods, domain.KindJob, e.readCfg)
	return e
}

// WithFileReads makes e answer read-file of its Attempts' workspaces
// through the workspace reader (after WithReads;
// docs/site-runtime.md#the-workspace-reader); without it read-file is
// refused unsupported-operation. It returns e.
func (e *BatchExecutor) WithFileReads(specs ReaderSpecs, pods ReaderPods, cfg FileReadConfig) *BatchExecutor {
	if e.reads != nil {
		e.reads.WithFiles(specs, pods, cfg)
	}
	return e
}

// Registrations routes the batch family's workload operations to e.
func (e *BatchExecutor) Registrations() []Registration {
	return workloadRegistrations(siteprotocol.FamilyBatch, e)
}

// Execute performs a new command. Errors leave the effect uncertain (the
// worker then calls Recover) or wrap ErrUnexplained.
func (e *BatchExecutor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, false)
}

// Recover answers a command whose effect is uncertain; see BatchExecutor.
func (e *BatchExecutor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, true)
}

func (e *BatchExecutor) perform(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	if err := e.checkout.RetryRevocation(ctx, cmd); err != nil {
		return domain.Answer{}, err
	}
	return e.life.perform(ctx, cmd, recovering, familySteps{name: "batch", prepare: e.prepare, start: e.start, observe: e.observe, reads: e.reads})
}

func (e *BatchExecutor) prepare(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.PreparePayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	if p.Repository != nil && e.checkout == nil {
		return domain.Refused(siteprotocol.ReasonUnsupportedOperation,
			"this Runtime cannot check out repositories yet (%s at %s); prepare an empty workspace (no repository)", p.Repository.URL, p.Repository.Commit), nil
	}
	if refusal, err := e.life.ElsewhereRefusal(ctx, cmd); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	if refusal, err := PriorPrepare(e.specs, cmd, records); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	b, refusal, err := e.access.Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	obj, err := e.specs.RenderWorkspace(WorkspaceSpec{Identity: IdentityOf(cmd), Namespace: b.Namespace, SizeBytes: p.WorkspaceSizeBytes})
	if err != nil {
		return domain.Answer{}, fmt.Errorf("render the workspace claim: %w", err)
	}
	// One access check for the claim and the checkout's creates.
	access := e.life.Access().Start(cmd, b)
	obj, uid, refusal, err := e.life.EnsureCreated(ctx, cmd, access, domain.FindRecord(records, domain.KindWorkspace), obj, recovering)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	checkedOut := ""
	if p.Repository != nil {
		o, answer, err := e.checkout.Run(ctx, cmd, access, obj.Name, *p.Repository, p.WorkspaceSizeBytes, recovering)
		if answer != nil || err != nil {
			return OrAnswer(answer), err
		}
		checkedOut = fmt.Sprintf("; %s checked out at %s by the workspace helper (%d bytes, %d LFS objects), its credential revoked and the helper gone",
			p.Repository.URL, o.Commit, o.Bytes, o.LFSObjects)
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s%s", obj.Name, obj.Namespace, b.Account, checkedOut),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: obj.Name, UID: uid}, SpecDigest: siteprotocol.Digest(obj.Spec)},
		obj.Ref(uid)), nil
}

func (e *BatchExecutor) start(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.StartPayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "start payload: %v", err), nil
	}
	if refusal, err := e.life.ElsewhereRefusal(ctx, cmd); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	ws := domain.FindRecord(records, domain.KindWorkspace)
	if ws == nil || ws.Phase != domain.PhaseCreated {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no prepared workspace; send prepare first", cmd.AttemptID), nil
	}
	if refusal := CheckoutReadiness(cmd, records); refusal != nil {
		return *refusal, nil
	}
	b, refusal, err := e.access.Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	// The workspace belongs to the Run, member and Project its prepare
	// named: a start naming another cannot use it (admission trusts the
	// Runtime with this pairing; deploy/cluster/README.md).
	wid, err := e.specs.Identity(ws.Spec)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("read the identity of attempt %s's workspace record: %w", cmd.AttemptID, err)
	}
	if wid.RunID != cmd.RunID || wid.MemberID != cmd.MemberID || wid.ProjectID != cmd.ProjectID {
		return domain.Refused(siteprotocol.ReasonAttemptConflict,
			"attempt %s's workspace was not prepared for run %s, member %s, project %s (this start's); nothing was created",
			cmd.AttemptID, cmd.RunID, cmd.MemberID, cmd.ProjectID), nil
	}
	if ws.Namespace != b.Namespace {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s's workspace is in namespace %s; binding %s now names namespace %s",
			cmd.AttemptID, ws.Namespace, b.BindingID, b.Namespace), nil
	}
	obj, err := e.specs.RenderJob(BatchJobSpec{
		Identity: IdentityOf(cmd), Namespace: b.Namespace, ServiceAccount: b.Account, Image: e.images.BatchImage(),
		WorkspaceClaim: ws.Name, Demand: p.Demand, TimeLimitSeconds: p.TimeLimitSeconds, Argv: p.Argv, Env: p.Env,
	})
	switch {
	case errors.Is(err, ErrUnsupportedDemand):
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "start payload: %v", err), nil
	case err != nil:
		return domain.Answer{}, fmt.Errorf("render the Job: %w", err)
	}
	if e.watch != nil {
		// Watched before it exists, so its end is seen even when the Job
		// is removed at once (a TTL of 0).
		e.watch.Ensure(ctx, b.Namespace)
	}
	obj, uid, refusal, err := e.life.EnsureCreated(ctx, cmd, e.life.Access().Start(cmd, b), domain.FindRecord(records, domain.KindJob), obj, recovering)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	a := domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("%s %s created in namespace %s as %s%s", obj.Kind, obj.Name, obj.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, obj.Ref(uid))
	// The start's log line says so too (Delivery.Note).
	a.Note = domain.AccountCheckedByNameOnly(b)
	return a, nil
}

func (e *BatchExecutor) observe(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	job := domain.FindRecord(records, domain.KindJob)
	if job == nil || job.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no workload", cmd.AttemptID), nil
	}
	ref := RecordRef(*job)
	if job.Phase == domain.PhaseRemoved {
		return e.gone(ctx, cmd, ref, "was removed by command "+job.CommandID)
	}
	obs, found, err := e.jobs.ObserveJob(ctx, ref)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("observe %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if !found {
		return e.gone(ctx, cmd, ref, "no longer exists")
	}
	if e.terminal != nil && (obs.State == siteprotocol.StateSucceeded || obs.State == siteprotocol.StateFailed) {
		// A fact of the Job: kept for when it is gone.
		if _, err := e.terminal.SaveTerminal(ctx, TerminalOf(cmd.AttemptID, ref, obs, e.clock.Now())); err != nil {
			return domain.Answer{}, fmt.Errorf("record the terminal state of %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
		}
	}
	msg := fmt.Sprintf("%s %s is %s", ref.Kind, ref.Name, obs.State)
	if obs.Reason != "" {
		msg += " (" + obs.Reason + ")"
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, msg, siteprotocol.ObserveDetail{
		State: obs.State, Reason: obs.Reason, Message: obs.Message, StartedAt: obs.StartedAt, FinishedAt: obs.FinishedAt, ExitCode: obs.ExitCode,
	}, ref), nil
}

// gone answers observe of a recorded Job that no longer exists: the
// terminal state recorded while it existed, saying it is gone, or failed /
// native-missing when none was recorded (why says how it went).
func (e *BatchExecutor) gone(ctx context.Context, cmd siteprotocol.Command, ref siteprotocol.NativeRef, why string) (domain.Answer, error) {
	if e.terminal == nil {
		return Missing(ref, why), nil
	}
	ts, found, err := e.terminal.TerminalState(ctx, cmd.AttemptID, ref.Kind, ref.Name, ref.UID)
	if err != nil {
		return domain.Answer{}, err
	}
	if !found {
		return Missing(ref, why+"; no terminal state was recorded while it existed"), nil
	}
	msg := fmt.Sprintf("%s %s/%s (uid %s) is gone; it was %s when the Runtime saw it last, at %s", ref.Kind, ref.Namespace, ref.Name, ref.UID,
		ts.State, ts.ObservedAt.UTC().Format(time.RFC3339))
	if ts.Reason != "" {
		msg += " (" + ts.Reason + ")"
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, msg, siteprotocol.ObserveDetail{
		State: siteprotocol.State(ts.State), Reason: ts.Reason, Message: ts.Message, StartedAt: ts.StartedAt, FinishedAt: ts.FinishedAt, ExitCode: ts.ExitCode,
	}, ref), nil
}
