// Package inference is the inference service executor family: a KServe
// InferenceService on the ServingRuntime the Site pins for its model
// format over the Attempt's
// private workspace claim (docs/site-runtime.md#inference-services-on-kserve).
// It supplies what application.Family asks for; application.Executor
// performs it.
package inference

import (
	"context"
	"fmt"
	"maps"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Config configures the inference family.
type Config struct {
	// ServingRuntimes maps each model format the Site serves to the KServe
	// ServingRuntime an InferenceService of that format names
	// (--serving-runtimes); a command naming another format, or another
	// runtime for its format, is refused invalid-payload. At least one.
	ServingRuntimes map[string]string
}

// Natives is what the inference family uses of the native system: the
// shared native objects and the observation of its InferenceServices.
type Natives interface {
	application.NativeObjects
	// ObserveInferenceService reports the state of the InferenceService ref
	// names, and of the predictor Deployment KServe's controller made for
	// it (by controller owner reference to ref's UID, its ReplicaSets and
	// Pods by UID lineage); found is false when no InferenceService with
	// ref's name and UID exists.
	ObserveInferenceService(ctx context.Context, ref siteprotocol.NativeRef) (obs application.Observation, found bool, err error)
}

// Family is the inference family, performed by application.Executor
// (docs/site-runtime.md#inference-services-on-kserve,
// docs/site-runtime.md#one-lifecycle-for-every-family):
//
//   - prepare renders the InferenceService on the ServingRuntime the Site
//     pins for the model's format (a command naming a format the Site does
//     not serve, another runtime, or a demand the Site cannot render, is
//     refused invalid-payload before anything is created); the saved
//     specification keeps that runtime, so an Attempt prepared on a
//     runtime the Site has since retired starts on it as saved, creates the Attempt's workspace claim as the member, checks
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
//   - observe reports the InferenceService's state (Natives);
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
	application.Workspaces
	native Natives
	specs  application.InferenceSpecs
	cfg    Config
}

// New returns the inference family acting through native and rendering
// with specs. It fails when cfg names no serving runtime, or a format or
// runtime that is empty.
func New(native Natives, specs application.InferenceSpecs, cfg Config) (*Family, error) {
	if len(cfg.ServingRuntimes) == 0 {
		return nil, fmt.Errorf("the inference executor needs the serving runtime of at least one model format")
	}
	for format, runtime := range cfg.ServingRuntimes {
		if format == "" || runtime == "" {
			return nil, fmt.Errorf("the inference executor's serving runtimes name an empty format or runtime (%q=%q)", format, runtime)
		}
	}
	cfg.ServingRuntimes = maps.Clone(cfg.ServingRuntimes)
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
		State:       application.StateOf(domain.KindInferenceService, f.native.ObserveInferenceService),
	}
}

// Specs is the inference renderer.
func (f *Family) Specs() application.WorkspaceSpecs { return f.specs }

// LogRoot: its predictor Pods' chains end at the recorded
// InferenceService.
func (f *Family) LogRoot() string { return domain.KindInferenceService }

// ProxyService is empty: proxy goes to the predictor Service KServe's
// controller makes for the recorded InferenceService, checked live.
func (f *Family) ProxyService() string { return "" }

// Prepare renders and saves the InferenceService and creates the
// workspace claim (checking a repository out into it).
func (f *Family) Prepare(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool) (domain.Answer, error) {
	spec, invalid := application.InferenceSpecOf(p, f.cfg.ServingRuntimes)
	return application.PrepareService(ctx, env, f.specs, cmd, p, recovering, application.ServicePrepare{
		Invalid: invalid, Kind: siteprotocol.ServiceInference, SpecKinds: []string{domain.KindInferenceService},
		Render: func(_ string, b domain.MemberBinding, claim string, verify *application.WorkspaceVerification) (application.NativeObject, error) {
			spec.Identity, spec.Namespace, spec.ServiceAccount, spec.WorkspaceClaim = application.IdentityOf(cmd), b.Namespace, b.Account, claim
			spec.Verify = verify
			return f.specs.RenderInferenceService(spec)
		},
		Saved: func(objs []application.NativeObject) string {
			return fmt.Sprintf("InferenceService %s rendered on serving runtime %s and saved", objs[0].Name, spec.Runtime)
		},
	})
}

// Start creates the saved InferenceService.
func (f *Family) Start(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, _ siteprotocol.StartPayload, records []domain.NativeRecord, recovering bool) (domain.Answer, error) {
	isvcRec := domain.FindRecord(records, domain.KindInferenceService)
	ws, refusal := application.ReadyToStart(cmd, records, "prepared workspace and saved InferenceService specification", isvcRec)
	if refusal != nil {
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
	return application.ObserveOne(ctx, cmd, records, domain.KindInferenceService, "inference service", f.native.ObserveInferenceService, nil, nil)
}
