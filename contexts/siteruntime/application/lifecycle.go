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

// NativeObjects creates, reads and removes an Attempt's native objects of
// any family (docs/site-runtime.md#one-lifecycle-for-every-family). Creates
// act as the member's account; reads and deletes act as the Runtime
// itself. A family's observer (JobObserver for batch) is a port of its
// own, so no family sees another's methods.
type NativeObjects interface {
	ProjectNamespaces
	// Create creates obj as the member account of as and returns the
	// identity the backend assigned it (the record's uid). Errors: wrapping
	// ErrNativeRequestDenied when the native system refused it (nothing
	// exists), wrapping ErrNativeExists when the name is taken; any other
	// error leaves the effect uncertain.
	Create(ctx context.Context, as domain.StartIdentity, obj NativeObject) (uid string, err error)
	NativeIdentity
}

// NativeIdentity is what each backend supplies to the shared lifecycle so
// that the lifecycle itself assumes no backend
// (docs/site-runtime.md#one-lifecycle-for-every-family): the adopt check
// (Lookup) and the identity-bound delete (Delete, WaitGone). The saved
// reference of an object is (kind, namespace, name, uid) whatever the
// backend — namespace an opaque scope and uid an opaque identity the
// backend assigned at create, which the lifecycle records and compares
// byte for byte and never parses: a Kubernetes namespace and metadata.uid,
// a Slurm account and job ID (docs/site-protocol.md#native-references-by-backend).
// The Kubernetes adaptor (kube.Workloads) reads by name and compares the
// rendered fields, and deletes with a UID precondition and foreground
// propagation.
type NativeIdentity interface {
	// Lookup is the adopt check: it reads the object under obj's name
	// (in obj's scope) and compares it with obj's specification — the
	// live object's identity, whether it is being removed, and the first
	// rendered field it lacks (LiveObject.Mismatch: an object the
	// lifecycle must not adopt); found is false when no object has the
	// name.
	Lookup(ctx context.Context, obj NativeObject) (live LiveObject, found bool, err error)
	// Delete removes the object ref names only if it still has the
	// identity ref.UID (on Kubernetes: a UID precondition, foreground
	// propagation). A missing object is Gone; an object of the name with
	// another identity is Gone and Foreign, and is never touched.
	Delete(ctx context.Context, ref siteprotocol.NativeRef) (DeleteOutcome, error)
	// WaitGone waits until no object with the identity ref.UID exists, or
	// ctx ends (its error is returned).
	WaitGone(ctx context.Context, ref siteprotocol.NativeRef) (DeleteOutcome, error)
}

// WorkloadState reads the state of a family's workload object ref (cancel
// reports it when the object is still being deleted after the deletion
// wait); found is false when no object with ref's name and UID exists.
type WorkloadState func(ctx context.Context, ref siteprotocol.NativeRef) (state siteprotocol.State, found bool, err error)

// LifecycleConfig is what a family tells the shared lifecycle.
type LifecycleConfig struct {
	// DeletionWait bounds the wait for a deleted object (default
	// DefaultDeletionWait; --deletion-wait).
	DeletionWait time.Duration
	// ServiceKind is written into every record the lifecycle saves from a
	// rendered object ("application" or "inference" in services.sqlite;
	// empty for batch).
	ServiceKind string
	// Workload lists the kinds cancel removes, in the order they are
	// deleted (batch: the Job; application: the Deployment, then the
	// Service).
	Workload []string
	// Owned lists every kind cleanup removes, in the order they are
	// deleted (the workload's kinds first, then the workspace claim).
	Owned []string
	// State reads a workload object's state for cancel's failed /
	// deletion-pending answer; nil reports the state missing.
	State WorkloadState
}

// Lifecycle is the protocol every native family shares
// (docs/site-runtime.md#one-lifecycle-for-every-family); a family supplies
// only what it renders, how it reads its native state, and which kinds it
// owns (LifecycleConfig):
//
//   - EnsureCreated: the command's access check (StartAccess, performed
//     once per command however many objects it creates) before a create;
//     the record saved in phase creating BEFORE the create call;
//     the create as the member; the UID recorded after it. A record of the
//     command with its UID is answered again; a record in phase creating,
//     or recovery, looks the object up by its deterministic name first —
//     absent: created (after a fresh access check); labels and saved
//     specification match: adopted (also while being deleted); otherwise
//     the native state is unexplained (ErrUnexplained: the worker stops and
//     nothing is deleted).
//   - Cancel and Cleanup (Remove): each recorded object deleted as the
//     Runtime with its exact UID and foreground propagation, recorded in
//     phase deleting before and removed once gone, waiting at most until
//     the deletion wait has passed since the command's start
//     (docs/site-runtime.md#command-bounds); an object of the name with another UID is listed in
//     detail.foreign_objects and never touched.
//
// Failpoints FailAfterNativeCall and FailAfterNativeRecord are hit after
// each native call and each record.
type Lifecycle struct {
	access  *Access
	native  NativeObjects
	records NativeRecords
	fp      Failpoints
	cfg     LifecycleConfig
	// others are the other families' record files (WithOtherFamilies).
	others []FamilyRecords
}

// FamilyRecords reads an Attempt's records in one family's record file
// (jobs.sqlite or services.sqlite); BatchRecords and ServiceRecords are
// FamilyRecords.
type FamilyRecords interface {
	// Records returns the records of an Attempt, in (kind, name) order.
	Records(ctx context.Context, attemptID string) ([]domain.NativeRecord, error)
}

// ElsewhereRefusal refuses a prepare or start of an Attempt that holds a
// record in another family's record file (set by the executors'
// WithOtherFamilies): attempt-conflict, nothing changed. An Attempt
// belongs to the family that first prepared it
// (docs/site-runtime.md#one-lifecycle-for-every-family).
func (l *Lifecycle) ElsewhereRefusal(ctx context.Context, cmd siteprotocol.Command) (*domain.Answer, error) {
	for _, o := range l.others {
		records, err := o.Records(ctx, cmd.AttemptID)
		if err != nil {
			return nil, fmt.Errorf("read attempt %s's records of another family: %w", cmd.AttemptID, err)
		}
		if len(records) == 0 {
			continue
		}
		r := records[0]
		family := "batch"
		if r.ServiceKind != "" {
			family = r.ServiceKind
		}
		a := domain.Refused(siteprotocol.ReasonAttemptConflict,
			"attempt %s belongs to the %s family (its %s %s is recorded there); a %s %s cannot use it",
			cmd.AttemptID, family, r.Kind, r.Name, cmd.Family, cmd.Operation)
		return &a, nil
	}
	return nil, nil
}

// NewLifecycle returns the lifecycle of one family over its record file.
func NewLifecycle(access *Access, native NativeObjects, records NativeRecords, fp Failpoints, cfg LifecycleConfig) *Lifecycle {
	if fp == nil {
		fp = NoFailpoints{}
	}
	if cfg.DeletionWait <= 0 {
		cfg.DeletionWait = DefaultDeletionWait
	}
	return &Lifecycle{access: access, native: native, records: records, fp: fp, cfg: cfg}
}

// DeletionWait is the bound of the lifecycle's deletes
// (LifecycleConfig.DeletionWait).
func (l *Lifecycle) DeletionWait() time.Duration { return l.cfg.DeletionWait }

// Access returns the access check the lifecycle creates after.
func (l *Lifecycle) Access() *Access { return l.access }

// Records returns the Attempt's records, in (kind, name) order.
func (l *Lifecycle) Records(ctx context.Context, attemptID string) ([]domain.NativeRecord, error) {
	return l.records.Records(ctx, attemptID)
}

// EnsureCreated makes sure obj exists, created by cmd under the binding of
// access, cmd's access check (Access.Start; see Lifecycle): the check runs
// before the first create of the command and its identity serves every
// later create of it; rec is the Attempt's record of obj's kind, or nil. It
// returns the object as created (the saved specification when a record of
// cmd holds one) and its UID, or a refusal: attempt-conflict when another
// command created the kind, the access check's refusals, and
// native-request-denied when the native system refused the create (the
// record then says refused; pod-security-violation for a saved
// specification that Pod Security restricted, enforced in its namespace,
// would refuse: docs/site-runtime.md#pod-security). An error leaves the
// effect uncertain, or wraps ErrUnexplained.
func (l *Lifecycle) EnsureCreated(ctx context.Context, cmd siteprotocol.Command, access *StartAccess, rec *domain.NativeRecord, obj NativeObject, recovering bool) (NativeObject, string, *domain.Answer, error) {
	if rec != nil {
		switch {
		case rec.CommandID != cmd.ID && (rec.Phase == domain.PhaseDeleting || rec.Phase == domain.PhaseRemoved):
			// Another command's ID is not named: it may be another
			// member's (docs/site-runtime.md#one-lifecycle-for-every-family).
			r := domain.Refused(siteprotocol.ReasonAttemptConflict, "attempt %s's %s %s was already created by an earlier command, and is removed (or being removed); it is not created again",
				cmd.AttemptID, rec.Kind, rec.Name)
			return obj, "", &r, nil
		case rec.CommandID != cmd.ID && rec.Phase != domain.PhaseRefused:
			r := domain.Refused(siteprotocol.ReasonAttemptConflict, "attempt %s's %s %s was already created by an earlier command; an Attempt's objects are created once",
				cmd.AttemptID, rec.Kind, rec.Name)
			return obj, "", &r, nil
		case rec.CommandID == cmd.ID && rec.UID != "" && rec.Phase != domain.PhaseRefused:
			// The create of this command is recorded: answer it again.
			// Recovery first makes sure the name does not now hold
			// another object (another UID: unexplained, nothing
			// deleted); an object gone since is answered as recorded
			// (observe reports it missing).
			if recovering && rec.Phase == domain.PhaseCreated {
				live, found, err := l.native.Lookup(ctx, SavedObject(*rec))
				if err != nil {
					return obj, "", nil, fmt.Errorf("look up %s %s/%s: %w", rec.Kind, rec.Namespace, rec.Name, err)
				}
				if found && live.UID != rec.UID {
					return obj, "", nil, fmt.Errorf("%w: %s %s/%s has uid %s, but command %s recorded creating uid %s; nothing was deleted",
						ErrUnexplained, rec.Kind, rec.Namespace, rec.Name, live.UID, cmd.ID, rec.UID)
				}
			}
			return SavedObject(*rec), rec.UID, nil, nil
		case rec.CommandID == cmd.ID && rec.Phase == domain.PhaseCreating:
			// A create of this command may have happened: what it
			// rendered is what recovery compares and creates.
			// A Secret's Data is never saved: the caller's render holds it.
			saved := SavedObject(*rec)
			saved.Data = obj.Data
			obj, recovering = saved, true
		}
	}
	if recovering {
		live, found, err := l.native.Lookup(ctx, obj)
		if err != nil {
			return obj, "", nil, fmt.Errorf("look up %s %s/%s: %w", obj.Kind, obj.Namespace, obj.Name, err)
		}
		if found {
			uid, err := l.Adopt(ctx, cmd, obj, live)
			return obj, uid, nil, err
		}
	}
	id, refusal, err := access.Identity(ctx)
	if refusal != nil || err != nil {
		return obj, "", refusal, err
	}
	if err := l.Save(ctx, cmd, obj, "", domain.PhaseCreating); err != nil {
		return obj, "", nil, err
	}
	uid, err := l.native.Create(ctx, id, obj)
	switch {
	case errors.Is(err, ErrNativeRequestDenied):
		if err := l.Save(ctx, cmd, obj, "", domain.PhaseRefused); err != nil {
			return obj, "", nil, err
		}
		r := domain.Refused(DeniedReason(err), "%s %s/%s was refused: %v", obj.Kind, obj.Namespace, obj.Name, err)
		return obj, "", &r, nil
	case errors.Is(err, ErrNativeExists):
		live, found, lerr := l.native.Lookup(ctx, obj)
		if lerr != nil || !found {
			return obj, "", nil, fmt.Errorf("%s %s/%s exists but cannot be read back (%v): %w", obj.Kind, obj.Namespace, obj.Name, lerr, err)
		}
		uid, err := l.Adopt(ctx, cmd, obj, live)
		return obj, uid, nil, err
	case err != nil:
		return obj, "", nil, fmt.Errorf("create %s %s/%s as %s: %w", obj.Kind, obj.Namespace, obj.Name, id.Account, err)
	}
	l.fp.Hit(FailAfterNativeCall)
	if err := l.Save(ctx, cmd, obj, uid, domain.PhaseCreated); err != nil {
		return obj, "", nil, err
	}
	l.fp.Hit(FailAfterNativeRecord)
	return obj, uid, nil, nil
}

// Adopt records the live object as cmd's create when it carries everything
// the Runtime rendered; otherwise the native state is unexplained (an
// error wrapping ErrUnexplained; nothing is deleted).
func (l *Lifecycle) Adopt(ctx context.Context, cmd siteprotocol.Command, obj NativeObject, live LiveObject) (string, error) {
	if live.Mismatch != "" {
		return "", fmt.Errorf("%w: %s %s/%s (uid %s) is not the object command %s rendered: %s; nothing was deleted",
			ErrUnexplained, obj.Kind, obj.Namespace, obj.Name, live.UID, cmd.ID, live.Mismatch)
	}
	if err := l.Save(ctx, cmd, obj, live.UID, domain.PhaseCreated); err != nil {
		return "", err
	}
	l.fp.Hit(FailAfterNativeRecord)
	return live.UID, nil
}

// Cancel removes the Attempt's workload (LifecycleConfig.Workload): its
// answer names the first removed object, refused not-started when none is
// recorded.
func (l *Lifecycle) Cancel(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return l.Remove(ctx, cmd, l.cfg.Workload...)
}

// Cleanup removes every object the family owns (LifecycleConfig.Owned).
func (l *Lifecycle) Cleanup(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return l.Remove(ctx, cmd, l.cfg.Owned...)
}

// Remove deletes the Attempt's recorded objects of kinds, in order, as the
// Runtime: each with its exact UID and foreground propagation, recorded in
// phase deleting before the delete and removed once gone. It answers the
// same bytes whether it deletes, finds objects gone (removed out of band:
// by a TTL, a policy, an operator), or recovers: the removed references
// are every recorded object of those kinds, and the message says they are
// gone, never who removed them. The answer is cancel's for a cancel
// command and cleanup's otherwise.
func (l *Lifecycle) Remove(ctx context.Context, cmd siteprotocol.Command, kinds ...string) (domain.Answer, error) {
	records, err := l.records.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	var removed, foreign []siteprotocol.NativeRef
	for _, kind := range kinds {
		// Every record of the kind: an Attempt's Pods are its workspace
		// helper and its workspace reader.
		for i := range records {
			rec := &records[i]
			if rec.Kind != kind || rec.UID == "" {
				continue
			}
			ref := RecordRef(*rec)
			if rec.Phase != domain.PhaseRemoved {
				out, pending, err := l.Delete(ctx, cmd, *rec)
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

// Delete removes one recorded object as the Runtime (its exact UID,
// foreground propagation; recorded deleting before and removed after) and
// waits until it is gone, at most until the deletion wait has passed since
// the command's start (CommandStart: a restart counts the time already
// spent, and every object of a cancel or cleanup shares the bound;
// docs/site-runtime.md#command-bounds). pending is the failed /
// deletion-pending answer when the wait ran out (for a cancel, with the
// workload's state).
func (l *Lifecycle) Delete(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord) (DeleteOutcome, *domain.Answer, error) {
	return l.deleteUntil(ctx, cmd, rec, commandDeadline(ctx, l.cfg.DeletionWait),
		fmt.Sprintf("%s after the command began (its deletion bound)", l.cfg.DeletionWait))
}

// DeleteWithin is Delete waiting at most wait from the delete on (a
// workspace helper's or reader's removal allowance, and a start's
// compensating delete, which a Recover runs again;
// docs/site-runtime.md#the-workspace-helper).
func (l *Lifecycle) DeleteWithin(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord, wait time.Duration) (DeleteOutcome, *domain.Answer, error) {
	return l.deleteUntil(ctx, cmd, rec, time.Now().Add(wait), wait.String())
}

// deleteUntil is Delete waiting at most until deadline; bound says what
// the deadline is, for the deletion-pending answer.
func (l *Lifecycle) deleteUntil(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord, deadline time.Time, bound string) (DeleteOutcome, *domain.Answer, error) {
	ref := RecordRef(rec)
	if rec.Phase != domain.PhaseDeleting {
		if err := l.SaveRecord(ctx, cmd, rec, domain.PhaseDeleting); err != nil {
			return DeleteOutcome{}, nil, err
		}
	}
	out, err := l.native.Delete(ctx, ref)
	if err != nil {
		return DeleteOutcome{}, nil, fmt.Errorf("delete %s %s/%s uid %s: %w", ref.Kind, ref.Namespace, ref.Name, ref.UID, err)
	}
	l.fp.Hit(FailAfterNativeCall)
	if !out.Gone {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		end := beginWait(ctx, fmt.Sprintf("%s %s/%s (uid %s) to be gone", ref.Kind, ref.Namespace, ref.Name, ref.UID), deadline)
		out, err = l.native.WaitGone(wctx, ref)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			end(waitAtBound)
		} else {
			end(waitDone)
		}
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonDeletionPending,
				Message:    fmt.Sprintf("%s %s/%s (uid %s) is still being deleted after %s", ref.Kind, ref.Namespace, ref.Name, ref.UID, bound),
				Detail:     siteprotocol.CleanupDetail{Removed: []siteprotocol.NativeRef{}},
				NativeRefs: []siteprotocol.NativeRef{ref}}
			if cmd.Operation == siteprotocol.OpCancel {
				// The workload still exists: report the state it is in.
				state := siteprotocol.StateMissing
				if l.cfg.State != nil {
					s, found, serr := l.cfg.State(ctx, ref)
					if serr != nil {
						return DeleteOutcome{}, nil, fmt.Errorf("observe %s %s/%s being deleted: %w", ref.Kind, ref.Namespace, ref.Name, serr)
					}
					if found {
						state = s
					}
				}
				a.Detail = siteprotocol.CancelDetail{State: state}
			}
			return DeleteOutcome{}, &a, nil
		case err != nil:
			return DeleteOutcome{}, nil, fmt.Errorf("wait for %s %s/%s uid %s to be gone: %w", ref.Kind, ref.Namespace, ref.Name, ref.UID, err)
		}
	}
	if err := l.SaveRecord(ctx, cmd, rec, domain.PhaseRemoved); err != nil {
		return DeleteOutcome{}, nil, err
	}
	l.fp.Hit(FailAfterNativeRecord)
	return out, nil, nil
}

// Save records obj (with uid, when known) in phase, as last written by cmd.
func (l *Lifecycle) Save(ctx context.Context, cmd siteprotocol.Command, obj NativeObject, uid, phase string) error {
	return l.SaveRecord(ctx, cmd, domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: uid,
		ServiceKind: l.cfg.ServiceKind, Spec: obj.Spec}, phase)
}

// SaveRecord writes rec in phase, as last written by cmd (the digest is
// the record store's).
func (l *Lifecycle) SaveRecord(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord, phase string) error {
	rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = phase, cmd.ID, cmd.Sequence, ""
	if err := l.records.SaveRecord(ctx, rec); err != nil {
		return fmt.Errorf("record %s %s/%s (%s): %w", rec.Kind, rec.Namespace, rec.Name, phase, err)
	}
	return nil
}

// SavedObject is the object a record's saved specification describes.
func SavedObject(r domain.NativeRecord) NativeObject {
	return NativeObject{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Spec: r.Spec}
}

// RecordRef is the native reference of a record.
func RecordRef(r domain.NativeRecord) siteprotocol.NativeRef {
	return siteprotocol.NativeRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
}

// Missing is observe's failed / native-missing answer for ref, which no
// longer exists (why says how it went).
func Missing(ref siteprotocol.NativeRef, why string) domain.Answer {
	return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
		Message: fmt.Sprintf("%s %s/%s (uid %s) %s", ref.Kind, ref.Namespace, ref.Name, ref.UID, why),
		Detail:  siteprotocol.ObserveDetail{State: siteprotocol.StateMissing}, NativeRefs: []siteprotocol.NativeRef{ref}}
}

// Observed is observe's succeeded / observed answer for the workload obs
// describes: the message names refs[0] and its state (and the native
// reason), the detail carries obs, and the answer names refs.
func Observed(obs Observation, refs ...siteprotocol.NativeRef) domain.Answer {
	msg := fmt.Sprintf("%s %s is %s", refs[0].Kind, refs[0].Name, obs.State)
	if obs.Reason != "" {
		msg += " (" + obs.Reason + ")"
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, msg, siteprotocol.ObserveDetail{
		State: obs.State, Reason: obs.Reason, Message: obs.Message, StartedAt: obs.StartedAt, FinishedAt: obs.FinishedAt, ExitCode: obs.ExitCode,
	}, refs...)
}

// OrAnswer is *a, or the zero Answer when a is nil.
func OrAnswer(a *domain.Answer) domain.Answer {
	if a == nil {
		return domain.Answer{}
	}
	return *a
}
