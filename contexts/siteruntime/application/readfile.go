package application

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Defaults of the workspace reader (docs/site-runtime.md#the-workspace-reader).
const (
	// DefaultReaderTimeout is the reader Pod's activeDeadlineSeconds: the
	// kubelet ends a reader still running after it.
	DefaultReaderTimeout = time.Minute
	// MaxReaderTimeout bounds --read-file-timeout: the admission policy
	// metallo-workspace-readers (deploy/cluster) refuses a reader whose
	// activeDeadlineSeconds is beyond it.
	MaxReaderTimeout = time.Hour
	// DefaultReaderWaitExtra is what the Runtime's wait for the reader
	// adds to the timeout, for scheduling and the image pull.
	DefaultReaderWaitExtra = 2 * time.Minute
	// readerPoll is how often a read-file reads the reader Pod while it
	// runs.
	readerPoll = 250 * time.Millisecond
)

// FileReadConfig configures the workspace reader of read-file
// (docs/site-runtime.md#the-workspace-reader).
type FileReadConfig struct {
	// Image is the fixed platform image the reader runs (the workspace
	// helper's: CheckoutConfig.Image, the Site's --batch-image).
	Image string
	// Timeout is the reader Pod's activeDeadlineSeconds, whole seconds
	// (default DefaultReaderTimeout; --read-file-timeout).
	Timeout time.Duration
	// Wait bounds how long a read-file waits for the reader's line, from
	// the command's start (CommandStart: a recovery adopts the reader and
	// waits only what is left; docs/site-runtime.md#command-bounds; default
	// Timeout + DefaultReaderWaitExtra).
	Wait time.Duration
	// DeletionWait is the foreground-deletion allowance of the reader
	// after its grace period (default DefaultHelperDeletionWait).
	DeletionWait time.Duration
}

func (c FileReadConfig) withDefaults() FileReadConfig {
	if c.Timeout < time.Second {
		c.Timeout = DefaultReaderTimeout
	}
	if c.Wait <= 0 {
		c.Wait = c.Timeout + DefaultReaderWaitExtra
	}
	if c.DeletionWait <= 0 {
		c.DeletionWait = DefaultHelperDeletionWait
	}
	return c
}

// ReaderSpec is what an Attempt's workspace reader Pod attempt-<attempt>-read
// is rendered from.
type ReaderSpec struct {
	// Identity is the command's Attempt identity, carried as the reader's
	// labels.
	Identity ObjectIdentity
	// Namespace and ServiceAccount are the binding's: the reader is
	// created there, as that member account.
	Namespace      string
	ServiceAccount string
	// Image is FileReadConfig.Image.
	Image string
	// WorkspaceClaim is the Attempt's claim, mounted read-only.
	WorkspaceClaim string
	// Path is the payload's path, relative to the workspace; MaxBytes its
	// max_bytes (1 to siteprotocol.MaxReadBytes).
	Path     string
	MaxBytes int64
	// Timeout is FileReadConfig.Timeout (activeDeadlineSeconds).
	Timeout time.Duration
	// Node is the node the reader is required on — the node of an exact
	// workload Pod of the Attempt, where the ReadWriteOnce claim is
	// attached — or empty.
	Node string
}

// ReaderSpecs renders the workspace reader deterministically.
type ReaderSpecs interface {
	// RenderReader renders the reader Pod running `metallo
	// workspace-read` with exactly the flags of s.
	RenderReader(s ReaderSpec) (NativeObject, error)
}

// ReaderPods reads the workspace reader as the Runtime.
type ReaderPods interface {
	// ReaderState reads the reader Pod ref names (Done once its container
	// terminated, or the Pod ended without it); found is false when no
	// Pod with ref's name and UID exists.
	ReaderState(ctx context.Context, ref siteprotocol.NativeRef) (s HelperState, found bool, err error)
	// ReaderLog returns at most limit bytes of the reader container's log
	// (pods/log of the Pod ref names). Errors: wrapping ErrLogUnavailable
	// when the kubelet has no log to give; any other error is a failed
	// read.
	ReaderLog(ctx context.Context, ref siteprotocol.NativeRef, limit int64) ([]byte, error)
}

// fileReads is read-file's part of PrivateReads (WithFiles).
type fileReads struct {
	specs ReaderSpecs
	pods  ReaderPods
	cfg   FileReadConfig
}

// WithFiles makes r answer read-file through the workspace reader (the
// reader Pod rendered by specs, read through pods;
// docs/site-runtime.md#the-workspace-reader); without it read-file is
// refused unsupported-operation. It returns r.
func (r *PrivateReads) WithFiles(specs ReaderSpecs, pods ReaderPods, cfg FileReadConfig) *PrivateReads {
	r.files = &fileReads{specs: specs, pods: pods, cfg: cfg.withDefaults()}
	return r
}

// ReadFile answers read-file (docs/site-runtime.md#the-workspace-reader):
// the first max_bytes bytes of the regular file payload.path names inside
// the Attempt's workspace, exact, base64, truncated when the file is
// longer.
//
// Before anything is created: the payload (max_bytes 1 B – 1 MiB, else
// invalid-payload; a path that is not clean and relative, path-rejected),
// PrivateReads' checks (the workload recorded, of the command's member,
// Run and Project in its binding's namespace; the binding current, the
// account's UID, a fresh execution.read; the exact native identity), and
// the claim recorded with a UID that the live claim has. Then the reader
// Pod attempt-<attempt>-read is created as the member — recorded creating
// BEFORE the create and created with its UID after it — mounting the
// claim read-only, required onto the node of the workload's Pod when one
// is bound; its one line is read back through pods/log once it
// terminated (until FileReadConfig.Wait has passed since the command's
// start, CommandStart), the claim's UID is checked again, and the reader
// is deleted as the Runtime by UID (recorded deleting, then removed)
// whatever the outcome. The reader's refusal is path-rejected; a reader
// that did not end in time is deadline-exceeded; one that failed or ended
// without its line is native-error; a reader still there after the
// deletion allowance is deletion-pending (nothing of the file is
// answered).
//
// A Recover adopts this command's own reader while it exists — recorded
// with its UID and live with it, or recorded only as creating and found by
// name carrying everything rendered (otherwise ErrUnexplained: nothing is
// deleted) — and reads it, so no second reader is created; it waits only
// what is left of the bound (docs/site-runtime.md#command-bounds). Every
// read first removes any other reader left (another command's, or one
// being removed) by its UID, never reading its log; then it runs with a
// new reader, none once the bound has passed (deadline-exceeded). The
// reader only reads (the claim is mounted read-only) and the result of an
// interrupted read was never saved, so never sent. Errors leave the effect
// uncertain, or wrap ErrUnexplained.
func (r *PrivateReads) ReadFile(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	f := r.files
	p, err := siteprotocol.DecodePayload[siteprotocol.ReadFilePayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "read-file payload: %v", err), nil
	}
	if p.MaxBytes < 1 || p.MaxBytes > siteprotocol.MaxReadBytes {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "read-file payload: max_bytes must be between 1 and %d", siteprotocol.MaxReadBytes), nil
	}
	if !siteprotocol.SafeRelativePath(p.Path) {
		return domain.Refused(siteprotocol.ReasonPathRejected, "read-file path %q is not a clean relative path inside the workspace (absolute, .., or an empty name); nothing was read", p.Path), nil
	}
	rec, id, access, refusal, err := r.checkAccess(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	// The reader is required onto the node of a bound workload Pod, where
	// the ReadWriteOnce claim is attached (none: the scheduler places it).
	pod, refusal, err := r.pod(ctx, *rec, id, noPodAllowed)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	node := pod.Node
	records, err := r.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	claim, claimObj, refusal, err := r.liveClaim(ctx, cmd, records)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	// The reader's line is awaited until the bound has passed since the
	// command's start, also after a restart.
	until := commandDeadline(ctx, f.cfg.Wait)
	// The refs of the answer: never the reader (it is gone, and a read
	// run again has another reader's UID, so the same command answers the
	// same bytes).
	refs := []siteprotocol.NativeRef{RecordRef(*rec), claim}
	name := domain.AttemptObjectName(cmd.AttemptID, domain.SuffixReader)
	left := domain.FindNamedRecord(records, domain.KindPod, name)
	// This command's own reader, left by a run a restart interrupted, is
	// adopted while it exists: no second reader is created.
	obj, uid, err := r.adoptReader(ctx, cmd, left)
	if err != nil {
		return domain.Answer{}, err
	}
	if uid == "" && left != nil {
		if pending, err := r.removeReader(ctx, cmd, *left, true); pending != nil || err != nil {
			return OrAnswer(pending), err
		}
	}
	if uid == "" {
		if !time.Now().Before(until) {
			// A recovery after the bound creates no reader.
			return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonDeadlineExceeded,
				Message:    fmt.Sprintf("nothing was read: the read of %s reached its bound, %s after its start, before the workspace reader answered", p.Path, f.cfg.Wait),
				NativeRefs: refs}, nil
		}
		b := access.Binding()
		obj, err = f.specs.RenderReader(ReaderSpec{Identity: IdentityOf(cmd), Namespace: b.Namespace, ServiceAccount: b.Account, Image: f.cfg.Image,
			WorkspaceClaim: claim.Name, Path: p.Path, MaxBytes: p.MaxBytes, Timeout: f.cfg.Timeout, Node: node})
		if err != nil {
			return domain.Answer{}, fmt.Errorf("render the workspace reader: %w", err)
		}
		var refusal *domain.Answer
		uid, refusal, err = r.createReader(ctx, cmd, access, obj)
		if refusal != nil || err != nil {
			return OrAnswer(refusal), err
		}
	}
	reader := obj.Ref(uid)
	out, content, err := r.awaitReader(ctx, reader, claim, claimObj, p.MaxBytes, until)
	if err != nil {
		return domain.Answer{}, err
	}
	readerRec := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name, UID: uid,
		ServiceKind: r.life.cfg.ServiceKind, Spec: obj.Spec, Phase: domain.PhaseCreated, CommandID: cmd.ID, Sequence: cmd.Sequence}
	if pending, err := r.removeReader(ctx, cmd, readerRec, false); pending != nil || err != nil {
		return OrAnswer(pending), err
	}

	switch out.Outcome {
	case siteprotocol.OutcomeSucceeded:
		msg := fmt.Sprintf("the whole file %s (%d bytes) of attempt %s's workspace", p.Path, len(content), cmd.AttemptID)
		if out.Truncated {
			msg = fmt.Sprintf("the first %d bytes of the file %s of attempt %s's workspace", len(content), p.Path, cmd.AttemptID)
		}
		return domain.Succeeded(siteprotocol.ReasonRead, msg, siteprotocol.ReadFileDetail{
			ContentBase64: base64.StdEncoding.EncodeToString(content), Truncated: out.Truncated}, refs...), nil
	case siteprotocol.OutcomeRefused:
		return domain.Answer{Outcome: out.Outcome, Reason: out.Reason, Message: "nothing was read: " + out.Message, NativeRefs: refs}, nil
	}
	reason := siteprotocol.ReasonNativeError
	if out.Reason == siteprotocol.ReasonDeadlineExceeded {
		reason = out.Reason
	}
	return domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: reason,
		Message: fmt.Sprintf("the workspace reader of %s: %s", p.Path, out.Message), NativeRefs: refs}, nil
}

// adoptReader adopts rec, the Attempt's reader record, when it is this
// command's reader from a run a restart interrupted and the reader still
// exists (docs/site-runtime.md#the-workspace-reader): recorded with its
// UID and found under its name with that UID, or recorded only creating
// and found carrying everything rendered (its UID then recorded; a reader
// of the name that does not carry it is unexplained, ErrUnexplained, and
// nothing is deleted). It returns the reader's saved object and UID, or
// an empty UID when there is nothing to adopt (no record, another
// command's reader, one removed or refused, or none live).
func (r *PrivateReads) adoptReader(ctx context.Context, cmd siteprotocol.Command, rec *domain.NativeRecord) (NativeObject, string, error) {
	if rec == nil || rec.CommandID != cmd.ID || (rec.Phase != domain.PhaseCreating && rec.Phase != domain.PhaseCreated) {
		return NativeObject{}, "", nil
	}
	l, obj := r.life, SavedObject(*rec)
	live, found, err := l.native.Lookup(ctx, obj)
	switch {
	case err != nil:
		return obj, "", fmt.Errorf("look up the workspace reader %s/%s: %w", rec.Namespace, rec.Name, err)
	case !found:
		return obj, "", nil
	case rec.UID != "":
		if live.UID != rec.UID {
			// Not the reader this command created: removeReader deletes
			// the recorded one by its UID (gone) and the create finds the
			// name taken.
			return obj, "", nil
		}
		return obj, rec.UID, nil
	case live.Mismatch != "":
		return obj, "", fmt.Errorf("%w: the workspace reader %s/%s (uid %s) is not the reader command %s rendered: %s; nothing was deleted",
			ErrUnexplained, rec.Namespace, rec.Name, live.UID, rec.CommandID, live.Mismatch)
	}
	if err := l.Save(ctx, cmd, obj, live.UID, domain.PhaseCreated); err != nil {
		return obj, "", err
	}
	l.fp.Hit(FailAfterNativeRecord)
	return obj, live.UID, nil
}

// liveClaim returns the Attempt's recorded workspace claim (its reference
// and its saved object) after checking that the live claim of its name has
// the recorded UID and carries what was rendered: a claim not recorded (or
// removed) is native-missing, gone native-missing, another UID or a
// changed claim native-identity-mismatch.
func (r *PrivateReads) liveClaim(ctx context.Context, cmd siteprotocol.Command, records []domain.NativeRecord) (siteprotocol.NativeRef, NativeObject, *domain.Answer, error) {
	rec := domain.FindRecord(records, domain.KindWorkspace)
	if rec == nil || rec.UID == "" || rec.Phase == domain.PhaseRemoved || rec.Phase == domain.PhaseDeleting {
		a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
			Message: fmt.Sprintf("attempt %s has no workspace claim to read (none recorded, or removed)", cmd.AttemptID)}
		return siteprotocol.NativeRef{}, NativeObject{}, &a, nil
	}
	ref, obj := RecordRef(*rec), SavedObject(*rec)
	why, err := r.claimMismatch(ctx, ref, obj)
	switch {
	case err != nil:
		return ref, obj, nil, err
	case why == "gone":
		a := domain.Answer{Outcome: siteprotocol.OutcomeFailed, Reason: siteprotocol.ReasonNativeMissing,
			Message: fmt.Sprintf("the workspace claim %s/%s (uid %s) no longer exists; nothing was read", ref.Namespace, ref.Name, ref.UID), NativeRefs: []siteprotocol.NativeRef{ref}}
		return ref, obj, &a, nil
	case why != "":
		a := domain.Answer{Outcome: siteprotocol.OutcomeRefused, Reason: siteprotocol.ReasonNativeIdentityMismatch,
			Message: fmt.Sprintf("nothing was read: the workspace claim %s/%s (uid %s) %s", ref.Namespace, ref.Name, ref.UID, why), NativeRefs: []siteprotocol.NativeRef{ref}}
		return ref, obj, &a, nil
	}
	return ref, obj, nil, nil
}

// claimMismatch compares the live claim of the recorded claim's name with
// it: "" when it has the recorded UID and carries what was rendered,
// "gone" when there is none, else what differs.
func (r *PrivateReads) claimMismatch(ctx context.Context, ref siteprotocol.NativeRef, obj NativeObject) (string, error) {
	live, found, err := r.life.native.Lookup(ctx, obj)
	switch {
	case err != nil:
		return "", fmt.Errorf("look up the workspace claim %s/%s: %w", ref.Namespace, ref.Name, err)
	case !found:
		return "gone", nil
	case live.UID != ref.UID:
		return fmt.Sprintf("has been replaced: the live claim has uid %s", live.UID), nil
	case live.Mismatch != "":
		return "is not the claim the Runtime rendered: " + live.Mismatch, nil
	}
	return "", nil
}

// createReader creates the reader as the member under cmd's access check:
// recorded creating BEFORE the create (failpoint after-native-record),
// the create (after-native-call), recorded created with its UID
// (after-native-record). The API server's refusal is recorded refused and
// answered native-request-denied. A name already taken is adopted when
// the live Pod carries everything rendered (otherwise ErrUnexplained).
func (r *PrivateReads) createReader(ctx context.Context, cmd siteprotocol.Command, access *StartAccess, obj NativeObject) (string, *domain.Answer, error) {
	l := r.life
	as, refusal, err := access.Identity(ctx)
	if refusal != nil || err != nil {
		return "", refusal, err
	}
	if err := l.Save(ctx, cmd, obj, "", domain.PhaseCreating); err != nil {
		return "", nil, err
	}
	l.fp.Hit(FailAfterNativeRecord)
	uid, err := l.native.Create(ctx, as, obj)
	switch {
	case errors.Is(err, ErrNativeRequestDenied):
		if err := l.Save(ctx, cmd, obj, "", domain.PhaseRefused); err != nil {
			return "", nil, err
		}
		l.fp.Hit(FailAfterNativeRecord)
		a := domain.Refused(DeniedReason(err), "the workspace reader %s/%s was refused; nothing was read: %v", obj.Namespace, obj.Name, err)
		return "", &a, nil
	case errors.Is(err, ErrNativeExists):
		live, found, lerr := l.native.Lookup(ctx, obj)
		if lerr != nil || !found {
			return "", nil, fmt.Errorf("the workspace reader %s/%s exists but cannot be read back (%v): %w", obj.Namespace, obj.Name, lerr, err)
		}
		uid, err := l.Adopt(ctx, cmd, obj, live)
		return uid, nil, err
	case err != nil:
		return "", nil, fmt.Errorf("create the workspace reader %s/%s as %s: %w", obj.Namespace, obj.Name, as.Account, err)
	}
	l.fp.Hit(FailAfterNativeCall)
	if err := l.Save(ctx, cmd, obj, uid, domain.PhaseCreated); err != nil {
		return "", nil, err
	}
	l.fp.Hit(FailAfterNativeRecord)
	return uid, nil, nil
}

// awaitReader waits, at most until until, for the reader ref to
// terminate, then reads its line through pods/log and checks that the
// reader still has its UID and the claim its UID (a reader the Runtime
// cannot prove is its own is never read). The outcome is the reader's
// line; deadline-exceeded when it did not terminate in time; or
// native-error: the reader gone without its line, its container failed,
// its log no line of workspace-read, or the claim replaced meanwhile.
// content is the decoded bytes of a succeeded read. Errors are ctx's.
func (r *PrivateReads) awaitReader(ctx context.Context, ref, claimRef siteprotocol.NativeRef, claim NativeObject, maxBytes int64, until time.Time) (out domain.FileRead, content []byte, err error) {
	f := r.files
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	tick := time.NewTicker(readerPoll)
	defer tick.Stop()
	end := beginWait(ctx, fmt.Sprintf("the workspace reader Pod %s/%s (uid %s) to end", ref.Namespace, ref.Name, ref.UID), until)
	defer func() {
		if out.Reason == siteprotocol.ReasonDeadlineExceeded {
			end(waitAtBound)
		} else {
			end(waitDone)
		}
	}()
	for {
		s, found, err := f.pods.ReaderState(ctx, ref)
		switch {
		case err != nil && ctx.Err() != nil:
			return domain.FileRead{}, nil, ctx.Err()
		case err != nil:
			// A failed read of the Pod is retried until the deadline.
		case !found:
			return domain.FileReadFailed("the reader Pod %s/%s (uid %s) is gone without its line", ref.Namespace, ref.Name, ref.UID), nil, nil
		case s.Done:
			return r.readerLine(ctx, ref, claimRef, claim, s, maxBytes)
		}
		select {
		case <-ctx.Done():
			return domain.FileRead{}, nil, ctx.Err()
		case <-deadline.C:
			why := "has not terminated"
			if err != nil {
				why = fmt.Sprintf("could not be read (%v)", err)
			}
			o := domain.FileReadFailed("the reader Pod %s (uid %s) %s within %s of the read's start, the read's bound", ref.Name, ref.UID, why, f.cfg.Wait)
			o.Reason = siteprotocol.ReasonDeadlineExceeded
			return o, nil, nil
		case <-tick.C:
		}
	}
}

// readerLine reads the terminated reader's log and parses its line.
func (r *PrivateReads) readerLine(ctx context.Context, ref, claimRef siteprotocol.NativeRef, claim NativeObject, s HelperState, maxBytes int64) (domain.FileRead, []byte, error) {
	f := r.files
	if s.ExitCode != 0 {
		return domain.FileReadFailed("the reader Pod %s (uid %s) ended with exit code %d: %s", ref.Name, ref.UID, s.ExitCode, s.Message), nil, nil
	}
	log, err := f.pods.ReaderLog(ctx, ref, domain.MaxFileReadLineBytes+1)
	switch {
	case err != nil && ctx.Err() != nil:
		return domain.FileRead{}, nil, ctx.Err()
	case err != nil:
		return domain.FileReadFailed("the log of the reader Pod %s (uid %s) cannot be read: %v", ref.Name, ref.UID, err), nil, nil
	}
	// The log was read by name: the Pod must still be the one created,
	// and the claim the recorded one.
	if _, found, err := f.pods.ReaderState(ctx, ref); err != nil || !found {
		return domain.FileReadFailed("the reader Pod %s (uid %s) could not be read again after its log (found %v, %v); its log is not answered", ref.Name, ref.UID, found, err), nil, nil
	}
	why, err := r.claimMismatch(ctx, claimRef, claim)
	switch {
	case err != nil && ctx.Err() != nil:
		return domain.FileRead{}, nil, ctx.Err()
	case err != nil || why != "":
		return domain.FileReadFailed("the workspace claim %s (uid %s) could not be confirmed after the read (%s%v); its content is not answered", claim.Name, claimRef.UID, why, err), nil, nil
	}
	out, content, err := domain.ParseFileRead(log, maxBytes)
	if err != nil {
		return domain.FileReadFailed("the reader Pod %s (uid %s) wrote no line of workspace-read: %v", ref.Name, ref.UID, err), nil, nil
	}
	return out, content, nil
}

// removeReader deletes a reader as the Runtime by its exact UID,
// recorded deleting before the delete (failpoint after-native-record)
// and removed once gone, within FileReadConfig.DeletionWait; pending is
// the failed / deletion-pending answer when it is still there after it.
// A record without a UID (left creating by a crash: left true) looks the
// reader up by name first: absent, nothing to remove; carrying everything
// rendered, adopted (its UID recorded) and deleted, never read; anything
// else is unexplained (nothing is deleted). A record refused or removed
// needs nothing.
func (r *PrivateReads) removeReader(ctx context.Context, cmd siteprotocol.Command, rec domain.NativeRecord, left bool) (*domain.Answer, error) {
	l := r.life
	switch {
	case rec.Phase == domain.PhaseRemoved || rec.Phase == domain.PhaseRefused:
		return nil, nil
	case rec.UID == "" && left:
		obj := SavedObject(rec)
		live, found, err := l.native.Lookup(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("look up the workspace reader %s/%s left by command %s: %w", rec.Namespace, rec.Name, rec.CommandID, err)
		}
		if !found {
			return nil, nil
		}
		if live.Mismatch != "" {
			return nil, fmt.Errorf("%w: the workspace reader %s/%s (uid %s) is not the reader command %s rendered: %s; nothing was deleted",
				ErrUnexplained, rec.Namespace, rec.Name, live.UID, rec.CommandID, live.Mismatch)
		}
		if err := l.Save(ctx, cmd, obj, live.UID, domain.PhaseCreated); err != nil {
			return nil, err
		}
		l.fp.Hit(FailAfterNativeRecord)
		rec.UID, rec.Phase = live.UID, domain.PhaseCreated
	case rec.UID == "":
		return nil, nil
	}
	if rec.Phase != domain.PhaseDeleting {
		if err := l.SaveRecord(ctx, cmd, rec, domain.PhaseDeleting); err != nil {
			return nil, err
		}
		l.fp.Hit(FailAfterNativeRecord)
		rec.Phase = domain.PhaseDeleting
	}
	_, pending, err := l.DeleteWithin(ctx, cmd, rec, r.files.cfg.DeletionWait)
	if pending != nil {
		pending.Detail = nil
		pending.Message = "the workspace reader is not gone, nothing of the file is answered: " + pending.Message
	}
	return pending, err
}

// Read returns cmd's access check under binding b for a private read
// (domain.ActionRead), not yet performed; its identity is what a
// read-file's reader is created as.
func (a *Access) Read(cmd siteprotocol.Command, b domain.MemberBinding) *StartAccess {
	return &StartAccess{access: a, cmd: cmd, b: b, action: domain.ActionRead}
}
