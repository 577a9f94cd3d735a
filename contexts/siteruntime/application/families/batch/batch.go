// Package batch is the batch executor family: a Kubernetes Job over the
// Attempt's private workspace claim (docs/site-runtime.md#batch-on-kubernetes).
// It supplies what application.Family asks for; application.Executor
// performs it.
package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Family is the batch family (docs/site-runtime.md#batch-on-kubernetes,
// docs/site-runtime.md#recovery-per-operation-and-family), performed by
// application.Executor:
//
//   - prepare creates the Attempt's private workspace claim as the member,
//     after the access check, and checks a payload's repository out into
//     it through the workspace helper (a CheckoutFamily).
//   - start creates the Attempt's workload as the member after a fresh
//     access check; its answer is always the same bytes for the same
//     command (state queued, the object's UID), whether created or adopted.
//   - observe reports the workload's native state; when the recorded object
//     is gone, the terminal state recorded while it existed (the Runtime's
//     watch, WithTerminalStates), saying it is gone, and native-missing
//     when none was recorded.
//   - cancel removes the Job, cleanup the Job, a helper or reader Pod, a
//     credential Secret and then the workspace claim (Kinds; the
//     Executor's Lifecycle over jobs.sqlite).
//   - read-logs of its Jobs' Pods and read-file of its workspaces are its
//     private reads; it has no service to proxy to.
type Family struct {
	application.Workspaces
	jobs   application.JobObserver
	specs  application.BatchSpecs
	images application.BatchImages
	// terminal, watch and clock are set by WithTerminalStates.
	terminal application.TerminalStates
	watch    *application.JobWatcher
	clock    application.Clock
}

// New returns the batch family observing its Jobs through jobs, rendering
// with specs and running images' pinned batch image.
func New(jobs application.JobObserver, specs application.BatchSpecs, images application.BatchImages) *Family {
	return &Family{jobs: jobs, specs: specs, images: images}
}

// NewExecutor is the batch family's Executor over jobs.sqlite (records),
// acting through native.
func NewExecutor(access *application.Access, native application.BatchNatives, specs application.BatchSpecs, images application.BatchImages,
	records application.BatchRecords, fp application.Failpoints, cfg application.ExecutorConfig) *application.Executor {
	return application.NewExecutor(New(native, specs, images), access, native, records, fp, cfg)
}

// WithTerminalStates makes f use the Runtime's watch of its Jobs
// (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone): start
// makes sure the namespace is watched before it creates a Job; observe
// records a terminal state it reads (a fact of the Job) and, for a Job
// that is gone, reports the state recorded while it existed. It returns f.
func (f *Family) WithTerminalStates(states application.TerminalStates, watch *application.JobWatcher, clock application.Clock) *Family {
	f.terminal, f.watch, f.clock = states, watch, clock
	return f
}

// Name is siteprotocol.FamilyBatch.
func (f *Family) Name() siteprotocol.Family { return siteprotocol.FamilyBatch }

// Kinds: cancel removes the Job; cleanup the Job, a helper or reader Pod,
// a credential Secret and then the workspace claim.
func (f *Family) Kinds() application.FamilyKinds {
	return application.FamilyKinds{
		Workload: []string{domain.KindJob},
		State:    application.StateOf(domain.KindJob, f.jobs.ObserveJob),
	}
}

// Specs is the batch renderer.
func (f *Family) Specs() application.WorkspaceSpecs { return f.specs }

// LogRoot: its Pods' controller chains end at the recorded Job.
func (f *Family) LogRoot() string { return domain.KindJob }

// Prepare creates the workspace claim and checks a repository out into it.
func (f *Family) Prepare(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool) (domain.Answer, error) {
	w, refusal, err := env.BeginPrepare(ctx, f.specs, cmd, p, nil)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	records, b, obj := w.Records, w.Binding, w.Workspace
	// One access check for the claim and the checkout's creates.
	access := env.Life.Access().Start(cmd, b)
	obj, uid, refusal, err := env.Life.EnsureCreated(ctx, cmd, access, domain.FindRecord(records, domain.KindWorkspace), obj, recovering)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	checkedOut := ""
	if p.Repository != nil {
		o, answer, err := env.Checkout.Run(ctx, cmd, access, obj.Name, *p.Repository, p.WorkspaceSizeBytes, recovering)
		if answer != nil || err != nil {
			return application.OrAnswer(answer), err
		}
		checkedOut = fmt.Sprintf("; %s checked out at %s by the workspace helper (%d bytes, %d LFS objects), its credential revoked and the helper gone",
			p.Repository.URL, o.Commit, o.Bytes, o.LFSObjects)
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s%s", obj.Name, obj.Namespace, b.Account, checkedOut),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: obj.Name, UID: uid}, SpecDigest: siteprotocol.Digest(obj.Spec)},
		obj.Ref(uid)), nil
}

// Start creates the Job on the prepared workspace.
func (f *Family) Start(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.StartPayload, records []domain.NativeRecord, recovering bool) (domain.Answer, error) {
	ws, refusal := application.ReadyToStart(cmd, records, "prepared workspace")
	if refusal != nil {
		return *refusal, nil
	}
	b, refusal, err := env.Life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	// The workspace belongs to the Run, member and Project its prepare
	// named: a start naming another cannot use it (admission trusts the
	// Runtime with this pairing; deploy/cluster/README.md).
	wid, err := f.specs.Identity(ws.Spec)
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
	obj, err := f.specs.RenderJob(application.BatchJobSpec{
		Identity: application.IdentityOf(cmd), Namespace: b.Namespace, ServiceAccount: b.Account, Image: f.images.BatchImage(),
		WorkspaceClaim: ws.Name, Demand: p.Demand, TimeLimitSeconds: p.TimeLimitSeconds, Argv: p.Argv, Env: p.Env,
	})
	switch {
	case errors.Is(err, application.ErrUnsupportedDemand):
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "start payload: %v", err), nil
	case err != nil:
		return domain.Answer{}, fmt.Errorf("render the Job: %w", err)
	}
	if f.watch != nil {
		// Watched before it exists, so its end is seen even when the Job
		// is removed at once (a TTL of 0).
		f.watch.Ensure(ctx, b.Namespace)
	}
	obj, uid, refusal, err := env.Life.EnsureCreated(ctx, cmd, env.Life.Access().Start(cmd, b), domain.FindRecord(records, domain.KindJob), obj, recovering)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	a := domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("%s %s created in namespace %s as %s%s", obj.Kind, obj.Name, obj.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, obj.Ref(uid))
	// The start's log line says so too (Delivery.Note).
	a.Note = domain.AccountCheckedByNameOnly(b)
	return a, nil
}

// Observe reports the Job's state, or the terminal state recorded while
// it existed.
func (f *Family) Observe(ctx context.Context, _ application.FamilyEnv, cmd siteprotocol.Command, records []domain.NativeRecord) (domain.Answer, error) {
	return application.ObserveOne(ctx, cmd, records, domain.KindJob, "workload", f.jobs.ObserveJob,
		func(ref siteprotocol.NativeRef, why string) (domain.Answer, error) { return f.gone(ctx, cmd, ref, why) },
		func(ref siteprotocol.NativeRef, obs application.Observation) (domain.Answer, error) {
			if f.terminal != nil && (obs.State == siteprotocol.StateSucceeded || obs.State == siteprotocol.StateFailed) {
				// A fact of the Job: kept for when it is gone.
				if _, err := f.terminal.SaveTerminal(ctx, application.TerminalOf(cmd.AttemptID, ref, obs, f.clock.Now())); err != nil {
					return domain.Answer{}, fmt.Errorf("record the terminal state of %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
				}
			}
			return application.Observed(obs, ref), nil
		})
}

// gone answers observe of a recorded Job that no longer exists: the
// terminal state recorded while it existed, saying it is gone, or failed /
// native-missing when none was recorded (why says how it went).
func (f *Family) gone(ctx context.Context, cmd siteprotocol.Command, ref siteprotocol.NativeRef, why string) (domain.Answer, error) {
	if f.terminal == nil {
		return application.Missing(ref, why), nil
	}
	ts, found, err := f.terminal.TerminalState(ctx, cmd.AttemptID, ref.Kind, ref.Name, ref.UID)
	if err != nil {
		return domain.Answer{}, err
	}
	if !found {
		return application.Missing(ref, why+"; no terminal state was recorded while it existed"), nil
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
