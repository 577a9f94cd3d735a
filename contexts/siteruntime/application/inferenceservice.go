package application

import (
	"context"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// InferenceConfig configures the inference service executors.
type InferenceConfig struct {
	// DeletionWait bounds the wait for a deleted object (default
	// DefaultDeletionWait).
	DeletionWait time.Duration
	// ServingRuntime is the KServe ServingRuntime every InferenceService
	// names (--serving-runtime); a command naming another is refused
	// invalid-payload. Required.
	ServingRuntime string
	// Reads bounds the private reads (docs/site-runtime.md#command-bounds).
	Reads ReadConfig
}

// InferenceObserver reads an inference service's native state.
type InferenceObserver interface {
	// ObserveInferenceService reports the state of the InferenceService ref
	// names, and of the predictor Deployment KServe's controller made for
	// it (by controller owner reference to ref's UID, its ReplicaSets and
	// Pods by UID lineage); found is false when no InferenceService with
	// ref's name and UID exists.
	ObserveInferenceService(ctx context.Context, ref siteprotocol.NativeRef) (obs Observation, found bool, err error)
}

// InferenceNatives is what the inference family uses of the native
// system: the shared native objects and its InferenceServices'
// observation.
type InferenceNatives interface {
	NativeObjects
	InferenceObserver
}

// InferenceExecutor performs the inference family's prepare, start,
// observe, cancel and cleanup on the shared Lifecycle
// (docs/site-runtime.md#inference-services-on-kserve,
// docs/site-runtime.md#one-lifecycle-for-every-family):
//
//   - prepare renders the InferenceService on the Site's pinned
//     ServingRuntime (a command naming another runtime, or a demand the
//     Site cannot render, is refused invalid-payload before anything is
//     created), creates the Attempt's workspace claim as the member, checks
//     a payload's repository out into it through the workspace helper
//     (WithCheckout; the predictor then verifies it, read-only, in its
//     init container workspace-verify:
//     docs/site-runtime.md#services-and-the-prepared-workspace) and saves
//     the specification in services.sqlite (phase prepared) before
//     answering; the attempt-conflict rules of the application family hold
//     (another family's Attempt, another command's preparation);
//   - start creates exactly what prepare saved as the member after a fresh
//     access check (Lifecycle.EnsureCreated), once a checkout is verified,
//     its grant revoked and its Secret and helper gone (CheckoutReadiness); recovery adopts an
//     InferenceService of the name only when every rendered field matches;
//   - observe reports the InferenceService's state (InferenceObserver);
//     native-missing when it is gone;
//   - cancel and cleanup (also the claim, and a helper Pod or credential
//     Secret a crash left) are the Lifecycle's UID-bound
//     foreground deletes as the Runtime; KServe's controller removes the
//     predictor it made. A deletion that does not finish within the bound
//     (an InferenceService whose finalizer KServe cannot remove) is
//     failed / deletion-pending: the Runtime never removes finalizers;
//   - read-logs and proxy are the private reads (WithReads, WithProxy) of
//     its predictor Pods and predictor Service.
type InferenceExecutor struct {
	// checkout is set by WithCheckout; without it a prepare with a
	// repository is refused unsupported-operation.
	checkout *Checkout
	life     *Lifecycle
	native   InferenceNatives
	specs    InferenceSpecs
	fp       Failpoints
	cfg      InferenceConfig
	// reads are set by WithReads (and its proxy by WithProxy).
	reads *PrivateReads
}

// NewInferenceExecutor returns the inference service executors; records is
// services.sqlite. It fails when cfg names no serving runtime.
func NewInferenceExecutor(access *Access, native InferenceNatives, specs InferenceSpecs, records ServiceRecords, fp Failpoints, cfg InferenceConfig) (*InferenceExecutor, error) {
	if cfg.ServingRuntime == "" {
		return nil, fmt.Errorf("the inference executor needs the serving runtime it pins")
	}
	if fp == nil {
		fp = NoFailpoints{}
	}
	if cfg.DeletionWait <= 0 {
		cfg.DeletionWait = DefaultDeletionWait
	}
	life := NewLifecycle(access, native, records, fp, LifecycleConfig{
		DeletionWait: cfg.DeletionWait, ServiceKind: string(siteprotocol.ServiceInference),
		Workload: []string{domain.KindInferenceService},
		Owned:    []string{domain.KindInferenceService, domain.KindPod, domain.KindSecret, domain.KindWorkspace},
		State:    inferenceState(native),
	})
	return &InferenceExecutor{life: life, native: native, specs: specs, fp: fp, cfg: cfg}, nil
}

// inferenceState is cancel's reading of an InferenceService still being
// deleted.
func inferenceState(obs InferenceObserver) WorkloadState {
	return func(ctx context.Context, ref siteprotocol.NativeRef) (siteprotocol.State, bool, error) {
		if ref.Kind != domain.KindInferenceService {
			return "", false, nil
		}
		o, found, err := obs.ObserveInferenceService(ctx, ref)
		return o.State, found, err
	}
}

// WithOtherFamilies makes e see the other families' record files
// (jobs.sqlite): a prepare or start of an Attempt recorded there is
// refused attempt-conflict and changes nothing. It returns e.
func (e *InferenceExecutor) WithOtherFamilies(others ...FamilyRecords) *InferenceExecutor {
	e.life.others = others
	return e
}

// WithCheckout makes e's prepare check out a payload's repository into
// the workspace through the workspace helper, and its predictor verify it
// (docs/site-runtime.md#services-and-the-prepared-workspace). It returns
// e.
func (e *InferenceExecutor) WithCheckout(grants RepositoryGrants, specs CheckoutSpecs, pods HelperPods, cfg CheckoutConfig) *InferenceExecutor {
	e.checkout = NewCheckout(e.life, grants, specs, pods, cfg)
	return e
}

// WithReads makes e answer read-logs of its predictor Pods through pods
// (Pod → ReplicaSet → the predictor Deployment, both read live → the
// recorded InferenceService, and the private argument rule against the
// saved specification; docs/site-runtime.md#private-reads); without it
// read-logs is refused unsupported-operation. It returns e.
func (e *InferenceExecutor) WithReads(pods WorkloadPods) *InferenceExecutor {
	e.reads = NewPrivateReads(e.life, e.specs, pods, domain.KindInferenceService, e.cfg.Reads)
	return e
}

// WithProxy makes e answer proxy to its Attempts' predictor Services
// through p (after WithReads): the Service KServe's controller makes for
// the recorded InferenceService, checked live by p
// (docs/site-runtime.md#private-reads); without it proxy is refused
// unsupported-operation. It returns e.
func (e *InferenceExecutor) WithProxy(p ServiceProxy) *InferenceExecutor {
	if e.reads != nil {
		e.reads.WithProxy(p, "")
	}
	return e
}

// WithFileReads makes e answer read-file of its Attempts' workspaces
// through the workspace reader (after WithReads;
// docs/site-runtime.md#the-workspace-reader), pinned to the node of a bound
// predictor Pod; without it read-file is refused unsupported-operation. It
// returns e.
func (e *InferenceExecutor) WithFileReads(specs ReaderSpecs, pods ReaderPods, cfg FileReadConfig) *InferenceExecutor {
	if e.reads != nil {
		e.reads.WithFiles(specs, pods, cfg)
	}
	return e
}

// Registrations routes the inference family's operations to e.
func (e *InferenceExecutor) Registrations() []Registration {
	return workloadRegistrations(siteprotocol.FamilyInference, e)
}

// Execute performs a new command; errors are as BatchExecutor.Execute's.
func (e *InferenceExecutor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, false)
}

// Recover answers a command whose effect is uncertain; see
// InferenceExecutor.
func (e *InferenceExecutor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, true)
}

func (e *InferenceExecutor) perform(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	if err := e.checkout.RetryRevocation(ctx, cmd); err != nil {
		return domain.Answer{}, err
	}
	return e.life.perform(ctx, cmd, recovering, familySteps{name: "inference", prepare: e.prepare, start: e.start, observe: e.observe, reads: e.reads})
}

func (e *InferenceExecutor) prepare(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.PreparePayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	if p.Repository != nil && e.checkout == nil {
		return domain.Refused(siteprotocol.ReasonUnsupportedOperation,
			"this Runtime cannot check out repositories yet (%s at %s); prepare an empty workspace (no repository)", p.Repository.URL, p.Repository.Commit), nil
	}
	spec, err := InferenceSpecOf(p, e.cfg.ServingRuntime)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	if refusal, err := e.life.ElsewhereRefusal(ctx, cmd); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	if refusal, err := servicePreparedElsewhere(e.specs, siteprotocol.ServiceInference, cmd, records, domain.KindInferenceService); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	if refusal, err := PriorPrepare(e.specs, cmd, records); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	b, refusal, err := e.life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	ws, err := e.specs.RenderWorkspace(WorkspaceSpec{Identity: IdentityOf(cmd), Namespace: b.Namespace, SizeBytes: p.WorkspaceSizeBytes})
	if err != nil {
		return domain.Answer{}, fmt.Errorf("render the workspace claim: %w", err)
	}
	// The InferenceService is rendered (and so validated) before the claim
	// is created: a prepare refused for what it asks creates nothing. A
	// saved specification is never rendered again.
	spec.Identity, spec.Namespace, spec.ServiceAccount, spec.WorkspaceClaim = IdentityOf(cmd), b.Namespace, b.Account, ws.Name
	if p.Repository != nil {
		// The predictor verifies the prepared checkout, read-only, before
		// its container starts (docs/site-runtime.md#services-and-the-prepared-workspace).
		spec.Verify = &WorkspaceVerification{Image: e.checkout.cfg.Image, Repository: *p.Repository, SizeLimitBytes: e.checkout.SizeLimit(p.WorkspaceSizeBytes)}
	}
	isvcRec := domain.FindRecord(records, domain.KindInferenceService)
	isvc, err := savedOrRendered(isvcRec, func() (NativeObject, error) { return e.specs.RenderInferenceService(spec) })
	if err != nil {
		return renderRefusal(err)
	}
	ws, wsUID, checkedOut, answer, err := prepareServiceWorkspace(ctx, e.life, e.checkout, cmd, b, records, ws, p, isvcRec != nil, recovering)
	if answer != nil || err != nil {
		return OrAnswer(answer), err
	}
	if err := savePrepared(ctx, e.life, e.fp, cmd, isvcRec, isvc); err != nil {
		return domain.Answer{}, err
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s%s; InferenceService %s rendered on serving runtime %s and saved", ws.Name, ws.Namespace, b.Account, checkedOut, isvc.Name, e.cfg.ServingRuntime),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: ws.Name, UID: wsUID}, SpecDigest: siteprotocol.Digest(isvc.Spec)},
		ws.Ref(wsUID)), nil
}

func (e *InferenceExecutor) start(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	if _, err := siteprotocol.DecodePayload[siteprotocol.StartPayload](cmd); err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "start payload: %v", err), nil
	}
	if refusal, err := e.life.ElsewhereRefusal(ctx, cmd); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	ws, isvcRec := domain.FindRecord(records, domain.KindWorkspace), domain.FindRecord(records, domain.KindInferenceService)
	if ws == nil || ws.Phase != domain.PhaseCreated || isvcRec == nil {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no prepared workspace and saved InferenceService specification; send prepare first", cmd.AttemptID), nil
	}
	if refusal := CheckoutReadiness(cmd, records); refusal != nil {
		return *refusal, nil
	}
	b, refusal, err := e.life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	if refusal, err := preparedFor(e.specs, cmd, b, *ws, *isvcRec); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	isvc, uid, refusal, err := e.life.EnsureCreated(ctx, cmd, e.life.Access().Start(cmd, b), startRecord(cmd, isvcRec), SavedObject(*isvcRec), recovering)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	return domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("InferenceService %s created in namespace %s as %s%s", isvc.Name, isvc.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, isvc.Ref(uid)), nil
}

func (e *InferenceExecutor) observe(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	rec := domain.FindRecord(records, domain.KindInferenceService)
	if rec == nil || rec.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no inference service", cmd.AttemptID), nil
	}
	ref := RecordRef(*rec)
	if rec.Phase == domain.PhaseRemoved {
		return Missing(ref, "was removed by command "+rec.CommandID), nil
	}
	obs, found, err := e.native.ObserveInferenceService(ctx, ref)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("observe InferenceService %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if !found {
		return Missing(ref, "no longer exists"), nil
	}
	msg := fmt.Sprintf("%s %s is %s", ref.Kind, ref.Name, obs.State)
	if obs.Reason != "" {
		msg += " (" + obs.Reason + ")"
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, msg, siteprotocol.ObserveDetail{
		State: obs.State, Reason: obs.Reason, Message: obs.Message, StartedAt: obs.StartedAt, FinishedAt: obs.FinishedAt, ExitCode: obs.ExitCode,
	}, ref), nil
}
