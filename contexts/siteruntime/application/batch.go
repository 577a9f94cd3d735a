package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// DefaultDeletionWait bounds how long cancel and cleanup wait for a deleted
// object to be gone before answering failed / deletion-pending
// (docs/site-runtime.md#cancel-and-cleanup).
const DefaultDeletionWait = 2 * time.Minute

// BatchConfig configures the batch executors.
type BatchConfig struct {
	// DeletionWait bounds the wait for a deleted object (default
	// DefaultDeletionWait).
	DeletionWait time.Duration
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
// Every create is recorded in jobs.sqlite in phase creating BEFORE the
// create call and with its UID after it, so Recover can tell what may have
// happened: a recorded UID is answered at once; otherwise the object is
// looked up by its deterministic name — absent: created (after a fresh
// access check); labels and saved specification match: adopted (also
// while being deleted); otherwise the native state is unexplained
// (ErrUnexplained: the worker stops and nothing is deleted).
type BatchExecutor struct {
	access  *Access
	native  NativeWorkloads
	specs   BatchSpecs
	images  BatchImages
	records BatchRecords
	fp      Failpoints
	cfg     BatchConfig
	// terminal, watch and clock are set by WithTerminalStates.
	terminal TerminalStates
	watch    *JobWatcher
	clock    Clock
}

// NewBatchExecutor returns the batch executors.
func NewBatchExecutor(access *Access, native NativeWorkloads, specs BatchSpecs, images BatchImages, records BatchRecords, fp Failpoints, cfg BatchConfig) *BatchExecutor {
	if fp == nil {
		fp = NoFailpoints{}
	}
	if cfg.DeletionWait <= 0 {
		cfg.DeletionWait = DefaultDeletionWait
	}
	return &BatchExecutor{access: access, native: native, specs: specs, images: images, records: records, fp: fp, cfg: cfg}
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

// Registrations routes the batch family's workload operations to e.
func (e *BatchExecutor) Registrations() []Registration {
	var regs []Registration
	for _, op := range []siteprotocol.Operation{siteprotocol.OpPrepare, siteprotocol.OpStart, siteprotocol.OpObserve, siteprotocol.OpCancel, siteprotocol.OpCleanup} {
		regs = append(regs, Registration{Operation: op, Family: siteprotocol.FamilyBatch, Executor: e})
	}
	return regs
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
	switch cmd.Operation {
	case siteprotocol.OpPrepare:
		return e.prepare(ctx, cmd, recovering)
	case siteprotocol.OpStart:
		return e.start(ctx, cmd, recovering)
	case siteprotocol.OpObserve:
		return e.observe(ctx, cmd)
	case siteprotocol.OpCancel:
		return e.remove(ctx, cmd, domain.KindJob)
	case siteprotocol.OpCleanup:
		return e.remove(ctx, cmd, domain.KindJob, domain.KindWorkspace)
	}
	return domain.Refused(siteprotocol.ReasonUnsupportedOperation, "the batch executor does not perform %s", cmd.Operation), nil
}

func (e *BatchExecutor) prepare(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.PreparePayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	if p.Repository != nil {
		return domain.Refused(siteprotocol.ReasonUnsupportedOperation,
			"this Runtime cannot check out repositories yet (%s at %s); prepare an empty workspace (no repository)", p.Repository.URL, p.Repository.Commit), nil
	}
	records, err := e.records.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	b, refusal, err := e.access.Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return orAnswer(refusal), err
	}
	obj, err := e.specs.RenderWorkspace(WorkspaceSpec{Identity: IdentityOf(cmd), Namespace: b.Namespace, SizeBytes: p.WorkspaceSizeBytes})
	if err != nil {
		return domain.Answer{}, fmt.Errorf("render the workspace claim: %w", err)
	}
	obj, uid, refusal, err := e.ensureCreated(ctx, cmd, b, domain.FindRecord(records, domain.KindWorkspace), obj, recovering)
	if refusal != nil || err != nil {
		return orAnswer(refusal), err
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s", obj.Name, obj.Namespace, b.Account),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: obj.Name, UID: uid}, SpecDigest: siteprotocol.Digest(obj.Spec)},
		obj.Ref(uid)), nil
}

func (e *BatchExecutor) start(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.StartPayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "start payload: %v", err), nil
	}
	records, err := e.records.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	ws := domain.FindRecord(records, domain.KindWorkspace)
	if ws == nil || ws.Phase != domain.PhaseCreated {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no prepared workspace; send prepare first", cmd.AttemptID), nil
	}
	b, refusal, err := e.access.Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return orAnswer(refusal), err
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
			"attempt %s's workspace was prepared for run %s, member %s, project %s; this start names run %s, member %s, project %s",
			cmd.AttemptID, wid.RunID, wid.MemberID, wid.ProjectID, cmd.RunID, cmd.MemberID, cmd.ProjectID), nil
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
	obj, uid, refusal, err := e.ensureCreated(ctx, cmd, b, domain.FindRecord(records, domain.KindJob), obj, recovering)
	if refusal != nil || err != nil {
		return orAnswer(refusal), err
	}
	a := domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("%s %s created in namespace %s as %s%s", obj.Kind, obj.Name, obj.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, obj.Ref(uid))
	// The start's log line says so too (Delivery.Note).
	a.Note = domain.AccountCheckedByNameOnly(b)
	return a, nil
}

// ensureCreated makes sure obj exists, created by cmd: see BatchExecutor.
// It returns the object as created (the saved specification when a record
// of cmd holds one) and its UID, or a refusal.
func (e *BatchExecutor) ensureCreated(ctx context.Context, cmd siteprotocol.Command, b domain.MemberBinding, rec *domain.NativeRecord, obj NativeObject, recovering bool) (NativeObject, string, *domain.Answer, error) {
	if rec != nil {
		switch {
		case rec.CommandID != cmd.ID && rec.Phase != domain.PhaseRefused:
			r := domain.Refused(siteprotocol.ReasonAttemptConflict, "attempt %s's %s %s was already created by command %s", cmd.AttemptID, rec.Kind, rec.Name, rec.CommandID)
			return obj, "", &r, nil
		case rec.CommandID == cmd.ID && rec.UID != "" && rec.Phase != domain.PhaseRefused:
			// The create of this command is recorded: answer it again.
			return savedObject(*rec), rec.UID, nil, nil
		case rec.CommandID == cmd.ID && rec.Phase == domain.PhaseCreating:
			// A create of this command may have happened: what it
			// rendered is what recovery compares and creates.
			obj, recovering = savedObject(*rec), true
		}
	}
	if recovering {
		live, found, err := e.native.Lookup(ctx, obj)
		if err != nil {
			return obj, "", nil, fmt.Errorf("look up %s %s/%s: %w", obj.Kind, obj.Namespace, obj.Name, err)
		}
		if found {
			uid, err := e.adopt(ctx, cmd, obj, live)
			return obj, uid, nil, err
		}
	}
	id, refusal, err := e.access.Authorize(ctx, cmd, b, domain.ActionStart)
	if refusal != nil || err != nil {
		return obj, "", refusal, err
	}
	if err := e.save(ctx, cmd, obj, "", domain.PhaseCreating); err != nil {
		return obj, "", nil, err
	}
	uid, err := e.native.Create(ctx, id, obj)
	switch {
	case errors.Is(err, ErrNativeRequestDenied):
		if err := e.save(ctx, cmd, obj, "", domain.PhaseRefused); err != nil {
			return obj, "", nil, err
		}
		r := domain.Refused(siteprotocol.ReasonNativeRequestDenied, "%s %s/%s was refused: %v", obj.Kind, obj.Namespace, obj.Name, err)
		return obj, "", &r, nil
	case errors.Is(err, ErrNativeExists):
		live, found, lerr := e.native.Lookup(ctx, obj)
		if lerr != nil || !found {
			return obj, "", nil, fmt.Errorf("%s %s/%s exists but cannot be read back (%v): %w", obj.Kind, obj.Namespace, obj.Name, lerr, err)
		}
		uid, err := e.adopt(ctx, cmd, obj, live)
		return obj, uid, nil, err
	case err != nil:
		return obj, "", nil, fmt.Errorf("create %s %s/%s as %s: %w", obj.Kind, obj.Namespace, obj.Name, id.Account, err)
	}
	e.fp.Hit(FailAfterNativeCall)
	if err := e.save(ctx, cmd, obj, uid, domain.PhaseCreated); err != nil {
		return obj, "", nil, err
	}
	e.fp.Hit(FailAfterNativeRecord)
	return obj, uid, nil, nil
}

// adopt records the live object as cmd's create when it carries everything
// the Runtime rendered; otherwise the native state is unexplained.
func (e *BatchExecutor) adopt(ctx context.Context, cmd siteprotocol.Command, obj NativeObject, live LiveObject) (string, error) {
	if live.Mismatch != "" {
		return "", fmt.Errorf("%w: %s %s/%s (uid %s) is not the object command %s rendered: %s; nothing was deleted",
			ErrUnexplained, obj.Kind, obj.Namespace, obj.Name, live.UID, cmd.ID, live.Mismatch)
	}
	if err := e.save(ctx, cmd, obj, live.UID, domain.PhaseCreated); err != nil {
		return "", err
	}
	e.fp.Hit(FailAfterNativeRecord)
	return live.UID, nil
}

func (e *BatchExecutor) observe(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	records, err := e.records.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	job := domain.FindRecord(records, domain.KindJob)
	if job == nil || job.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no workload", cmd.AttemptID), nil
	}
	ref := recordRef(*job)
	if job.Phase == domain.PhaseRemoved {
		return e.gone(ctx, cmd, ref, "was removed by command "+job.CommandID)
	}
	obs, found, err := e.native.ObserveJob(ctx, ref)
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
		return missing(ref, why), nil
	}
	ts, found, err := e.terminal.TerminalState(ctx, cmd.AttemptID, ref.Kind, ref.Name, ref.UID)
	if err != nil {
		return domain.Answer{}, err
	}
	if !found {
		return missing(ref, why+"; no terminal state was recorded while it existed"), nil
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

func missing(ref siteprotocol.NativeRef, why string) domain.Answer {
	return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
		Message: fmt.Sprintf("%s %s/%s (uid %s) %s", ref.Kind, ref.Namespace, ref.Name, ref.UID, why),
		Detail:  siteprotocol.ObserveDetail{State: siteprotocol.StateMissing}, NativeRefs: []siteprotocol.NativeRef{ref}}
}

// remove deletes the Attempt's recorded objects of kinds, in order, as the
// Runtime: each with its exact UID and foreground propagation, recorded in
// phase deleting before the delete and removed once gone. It answers the
// same bytes whether it deletes, finds objects gone (removed out of band:
// by a TTL, a policy, an operator), or recovers: the removed references
// are every recorded object of those kinds, and the message says they are
// gone, never who removed them.
func (e *BatchExecutor) remove(ctx context.Context, cmd siteprotocol.Command, kinds ...string) (domain.Answer, error) {
	records, err := e.records.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	var removed, foreign []siteprotocol.NativeRef
	for _, kind := range kinds {
		rec := domain.FindRecord(records, kind)
		if rec == nil || rec.UID == "" {
			continue
		}
		ref := recordRef(*rec)
		if rec.Phase != domain.PhaseRemoved {
			out, pending, err := e.delete(ctx, cmd, *rec)
			if err != nil {
				return domain.Answer{}, err
			}
			if pending != nil {
				return *pending, nil
			}
			if out.Foreign != nil {
				foreign = append(foreign, *out.Foreign)
			}
		}
		removed = append(removed, ref)
	}
	if cmd.Operation == siteprotocol.OpCancel {
		if len(removed) == 0 {
			return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no workload to cancel", cmd.AttemptID), nil
		}
		// One message for "gone", whoever removed it: a delete that finds
		// the object gone cannot tell who did (docs/site-runtime.md#cancel-and-cleanup).
		return domain.Succeeded(siteprotocol.ReasonDeleted, fmt.Sprintf("%s %s/%s (uid %s) is gone", removed[0].Kind, removed[0].Namespace, removed[0].Name, removed[0].UID),
			siteprotocol.CancelDetail{State: siteprotocol.StateMissing, ForeignObjects: foreign}, removed...), nil
	}
	if removed == nil {
		removed = []siteprotocol.NativeRef{}
	}
	return domain.Succeeded(siteprotocol.ReasonDeleted, fmt.Sprintf("%d objects of attempt %s are gone", len(removed), cmd.AttemptID),
		siteprotocol.CleanupDetail{Removed: removed, ForeignObjects: foreign}, removed...), nil
}

// delete removes one recorded object and waits until it is gone. pending
// is the failed / deletion-pending answer when the wait ran out.
func (e *BatchExecutor) delete(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord) (DeleteOutcome, *domain.Answer, error) {
	ref := recordRef(rec)
	if rec.Phase != domain.PhaseDeleting {
		if err := e.saveRecord(ctx, cmd, rec, domain.PhaseDeleting); err != nil {
			return DeleteOutcome{}, nil, err
		}
	}
	out, err := e.native.Delete(ctx, ref)
	if err != nil {
		return DeleteOutcome{}, nil, fmt.Errorf("delete %s %s/%s uid %s: %w", ref.Kind, ref.Namespace, ref.Name, ref.UID, err)
	}
	e.fp.Hit(FailAfterNativeCall)
	if !out.Gone {
		wctx, cancel := context.WithTimeout(ctx, e.cfg.DeletionWait)
		out, err = e.native.WaitGone(wctx, ref)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonDeletionPending,
				Message:    fmt.Sprintf("%s %s/%s (uid %s) is still being deleted after %s", ref.Kind, ref.Namespace, ref.Name, ref.UID, e.cfg.DeletionWait),
				Detail:     siteprotocol.CleanupDetail{Removed: []siteprotocol.NativeRef{}},
				NativeRefs: []siteprotocol.NativeRef{ref}}
			if cmd.Operation == siteprotocol.OpCancel {
				// The workload still exists: report the state it is in.
				obs, found, oerr := e.native.ObserveJob(ctx, ref)
				if oerr != nil {
					return DeleteOutcome{}, nil, fmt.Errorf("observe %s %s/%s being deleted: %w", ref.Kind, ref.Namespace, ref.Name, oerr)
				}
				if !found {
					obs.State = siteprotocol.StateMissing
				}
				a.Detail = siteprotocol.CancelDetail{State: obs.State}
			}
			return DeleteOutcome{}, &a, nil
		case err != nil:
			return DeleteOutcome{}, nil, fmt.Errorf("wait for %s %s/%s uid %s to be gone: %w", ref.Kind, ref.Namespace, ref.Name, ref.UID, err)
		}
	}
	if err := e.saveRecord(ctx, cmd, rec, domain.PhaseRemoved); err != nil {
		return DeleteOutcome{}, nil, err
	}
	e.fp.Hit(FailAfterNativeRecord)
	return out, nil, nil
}

func (e *BatchExecutor) save(ctx context.Context, cmd siteprotocol.Command, obj NativeObject, uid, phase string) error {
	return e.saveRecord(ctx, cmd, domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: uid, Spec: obj.Spec}, phase)
}

// saveRecord writes rec in phase, as last written by cmd.
func (e *BatchExecutor) saveRecord(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord, phase string) error {
	rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = phase, cmd.ID, cmd.Sequence, ""
	if err := e.records.SaveRecord(ctx, rec); err != nil {
		return fmt.Errorf("record %s %s/%s (%s): %w", rec.Kind, rec.Namespace, rec.Name, phase, err)
	}
	return nil
}

func savedObject(r domain.NativeRecord) NativeObject {
	return NativeObject{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Spec: r.Spec}
}

func recordRef(r domain.NativeRecord) siteprotocol.NativeRef {
	return siteprotocol.NativeRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
}

func orAnswer(a *domain.Answer) domain.Answer {
	if a == nil {
		return domain.Answer{}
	}
	return *a
}
