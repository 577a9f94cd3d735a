// Package inference is the inference service executor family: a KServe
// InferenceService on the Site's pinned ServingRuntime over the Attempt's
// private workspace claim (docs/site-runtime.md#inference-services-on-kserve).
// It supplies what application.Family asks for; application.Executor
// performs it.
package inference

import (
	"context"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Config configures the inference family.
type Config struct {
	// ServingRuntime is the KServe ServingRuntime every InferenceService
	// names (--serving-runtime); a command naming another is refused
	// invalid-payload. Required.
	ServingRuntime string
}

// Observer reads an inference service's native state.
type Observer interface {
	// ObserveInferenceService reports the state of the InferenceService ref
	// names, and of the predictor Deployment KServe's controller made for
	// it (by controller owner reference to ref's UID, its ReplicaSets and
	// Pods by UID lineage); found is false when no InferenceService with
	// ref's name and UID exists.
	ObserveInferenceService(ctx context.Context, ref siteprotocol.NativeRef) (obs application.Observation, found bool, err error)
}

// Natives is what the inference family uses of the native system: the
// shared native objects and its InferenceServices' observation.
type Natives interface {
	application.NativeObjects
	Observer
}

// Family is the inference family, performed by application.Executor
// (docs/site-runtime.md#inference-services-on-kserve,
// docs/site-runtime.md#one-lifecycle-for-every-family):
//
//   - prepare renders the InferenceService on the Site's pinned
//     ServingRuntime (a command naming another runtime, or a demand the
//     Site cannot render, is refused invalid-payload before anything is
//     created), creates the Attempt's workspace claim as the member, checks
//     a payload's repository out into it through the workspace helper
//     (a CheckoutFamily; the predictor then verifies it, read-only, in its
//     init container workspace-verify:
//     docs/site-runtime.md#services-and-the-prepared-workspace) and saves
//     the specification in services.sqlite (phase prepared) before
//     answering; the attempt-conflict rules of the application family hold
//     (another family's Attempt, another command's preparation);
//   - start creates exactly what prepare saved as the member after a fresh
//     access check (application.Lifecycle.EnsureCreated), once a checkout is verified,
//     its grant revoked and its Secret and helper gone (application.CheckoutReadiness); recovery adopts an
//     InferenceService of the name only when every rendered field matches;
//   - observe reports the InferenceService's state (Observer);
//     native-missing when it is gone;
//   - cancel and cleanup (also the claim, and a helper Pod or credential
//     Secret a crash left) are the Lifecycle's UID-bound
//     foreground deletes as the Runtime; KServe's controller removes the
//     predictor it made. A deletion that does not finish within the bound
//     (an InferenceService whose finalizer KServe cannot remove) is
//     failed / deletion-pending: the Runtime never removes finalizers;
//   - read-logs of its predictor Pods (Pod → ReplicaSet → the predictor
//     Deployment, both read live → the recorded InferenceService), proxy
//     to KServe's predictor Service and read-file (the reader pinned to
//     the node of a bound predictor Pod) are its private reads.
type Family struct {
	native Natives
	specs  application.InferenceSpecs
	cfg    Config
}

// New returns the inference family acting through native and rendering
// with specs. It fails when cfg names no serving runtime.
func New(native Natives, specs application.InferenceSpecs, cfg Config) (*Family, error) {
	if cfg.ServingRuntime == "" {
		return nil, fmt.Errorf("the inference executor needs the serving runtime it pins")
	}
	return &Family{native: native, specs: specs, cfg: cfg}, nil
}

// NewExecutor is the inference family's Executor over services.sqlite
// (records), acting through native. It fails as New does.
func NewExecutor(access *application.Access, native Natives, specs application.InferenceSpecs, records application.ServiceRecords,
	fp application.Failpoints, cfg application.ExecutorConfig, family Config) (*application.Executor, error) {
	f, err := New(native, specs, family)
	if err != nil {
		return nil, err
	}
	return application.NewExecutor(f, access, native, records, fp, cfg), nil
}

// Name is siteprotocol.FamilyInference.
func (f *Family) Name() siteprotocol.Family { return siteprotocol.FamilyInference }

// Kinds: cancel removes the InferenceService; cleanup also a helper or
// reader Pod, a credential Secret and then the workspace claim. Cancel's
// reading of an InferenceService still being deleted is its state.
func (f *Family) Kinds() application.FamilyKinds {
	return application.FamilyKinds{
		ServiceKind: string(siteprotocol.ServiceInference),
		Workload:    []string{domain.KindInferenceService},
		Owned:       []string{domain.KindInferenceService, domain.KindPod, domain.KindSecret, domain.KindWorkspace},
		State: func(ctx context.Context, ref siteprotocol.NativeRef) (siteprotocol.State, bool, error) {
			if ref.Kind != domain.KindInferenceService {
				return "", false, nil
			}
			o, found, err := f.native.ObserveInferenceService(ctx, ref)
			return o.State, found, err
		},
	}
}

// Specs is the inference renderer.
func (f *Family) Specs() application.WorkspaceSpecs { return f.specs }

// ChecksOutRepositories: a prepare checks a repository out, and the
// predictor verifies it
// (docs/site-runtime.md#services-and-the-prepared-workspace).
func (f *Family) ChecksOutRepositories() {}

// LogRoot: its predictor Pods' chains end at the recorded
// InferenceService.
func (f *Family) LogRoot() string { return domain.KindInferenceService }

// ProxyService is empty: proxy goes to the predictor Service KServe's
// controller makes for the recorded InferenceService, checked live.
func (f *Family) ProxyService() string { return "" }

// ReadsWorkspaceFiles: read-file reads its Attempts' workspaces.
func (f *Family) ReadsWorkspaceFiles() {}

// Prepare renders and saves the InferenceService and creates the
// workspace claim (checking a repository out into it).
func (f *Family) Prepare(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool) (domain.Answer, error) {
	spec, err := application.InferenceSpecOf(p, f.cfg.ServingRuntime)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	if refusal, err := env.Life.ElsewhereRefusal(ctx, cmd); refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	records, err := env.Life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	if refusal, err := application.ServicePreparedElsewhere(f.specs, siteprotocol.ServiceInference, cmd, records, domain.KindInferenceService); refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	if refusal, err := application.PriorPrepare(f.specs, cmd, records); refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	b, refusal, err := env.Life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	ws, err := f.specs.RenderWorkspace(application.WorkspaceSpec{Identity: application.IdentityOf(cmd), Namespace: b.Namespace, SizeBytes: p.WorkspaceSizeBytes})
	if err != nil {
		return domain.Answer{}, fmt.Errorf("render the workspace claim: %w", err)
	}
	// The InferenceService is rendered (and so validated) before the claim
	// is created: a prepare refused for what it asks creates nothing. A
	// saved specification is never rendered again.
	spec.Identity, spec.Namespace, spec.ServiceAccount, spec.WorkspaceClaim = application.IdentityOf(cmd), b.Namespace, b.Account, ws.Name
	if p.Repository != nil {
		// The predictor verifies the prepared checkout, read-only, before
		// its container starts (docs/site-runtime.md#services-and-the-prepared-workspace).
		spec.Verify = env.Checkout.Verification(*p.Repository, p.WorkspaceSizeBytes)
	}
	isvcRec := domain.FindRecord(records, domain.KindInferenceService)
	isvc, err := application.SavedOrRendered(isvcRec, func() (application.NativeObject, error) { return f.specs.RenderInferenceService(spec) })
	if err != nil {
		return application.RenderRefusal(err)
	}
	ws, wsUID, checkedOut, answer, err := application.PrepareServiceWorkspace(ctx, env, cmd, b, records, ws, p, isvcRec != nil, recovering)
	if answer != nil || err != nil {
		return application.OrAnswer(answer), err
	}
	if err := application.SavePrepared(ctx, env, cmd, isvcRec, isvc); err != nil {
		return domain.Answer{}, err
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s%s; InferenceService %s rendered on serving runtime %s and saved", ws.Name, ws.Namespace, b.Account, checkedOut, isvc.Name, f.cfg.ServingRuntime),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: ws.Name, UID: wsUID}, SpecDigest: siteprotocol.Digest(isvc.Spec)},
		ws.Ref(wsUID)), nil
}

// Start creates the saved InferenceService.
func (f *Family) Start(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, _ siteprotocol.StartPayload, records []domain.NativeRecord, recovering bool) (domain.Answer, error) {
	ws, isvcRec := domain.FindRecord(records, domain.KindWorkspace), domain.FindRecord(records, domain.KindInferenceService)
	if ws == nil || ws.Phase != domain.PhaseCreated || isvcRec == nil {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no prepared workspace and saved InferenceService specification; send prepare first", cmd.AttemptID), nil
	}
	if refusal := application.CheckoutReadiness(cmd, records); refusal != nil {
		return *refusal, nil
	}
	b, refusal, err := env.Life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	if refusal, err := application.PreparedFor(f.specs, cmd, b, *ws, *isvcRec); refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	isvc, uid, refusal, err := env.Life.EnsureCreated(ctx, cmd, env.Life.Access().Start(cmd, b), application.StartRecord(cmd, isvcRec), application.SavedObject(*isvcRec), recovering)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	return domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("InferenceService %s created in namespace %s as %s%s", isvc.Name, isvc.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, isvc.Ref(uid)), nil
}

// Observe reports the InferenceService's state.
func (f *Family) Observe(ctx context.Context, _ application.FamilyEnv, cmd siteprotocol.Command, records []domain.NativeRecord) (domain.Answer, error) {
	rec := domain.FindRecord(records, domain.KindInferenceService)
	if rec == nil || rec.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no inference service", cmd.AttemptID), nil
	}
	ref := application.RecordRef(*rec)
	if rec.Phase == domain.PhaseRemoved {
		return application.Missing(ref, "was removed by command "+rec.CommandID), nil
	}
	obs, found, err := f.native.ObserveInferenceService(ctx, ref)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("observe InferenceService %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if !found {
		return application.Missing(ref, "no longer exists"), nil
	}
	msg := fmt.Sprintf("%s %s is %s", ref.Kind, ref.Name, obs.State)
	if obs.Reason != "" {
		msg += " (" + obs.Reason + ")"
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, msg, siteprotocol.ObserveDetail{
		State: obs.State, Reason: obs.Reason, Message: obs.Message, StartedAt: obs.StartedAt, FinishedAt: obs.FinishedAt, ExitCode: obs.ExitCode,
	}, ref), nil
}
