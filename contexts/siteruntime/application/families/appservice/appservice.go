// Package appservice is the application service executor family: a
// Deployment and its ClusterIP Service over the Attempt's private
// workspace claim (docs/site-runtime.md#application-services-on-kubernetes).
// It supplies what application.Family asks for; application.Executor
// performs it.
package appservice

import (
	"context"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Config configures the application family.
type Config struct {
	// ProgressDeadline is the Deployment's progressDeadlineSeconds
	// (default application.DefaultProgressDeadline), rendered at prepare.
	ProgressDeadline time.Duration
}

// Natives is what the application family uses of the native system: the
// shared native objects and the observation of its Deployments.
type Natives interface {
	application.NativeObjects
	// ObserveDeployment reports the state of the Deployment ref names (its
	// ReplicaSets and Pods by controller UID lineage); found is false when
	// no Deployment with ref's name and UID exists.
	ObserveDeployment(ctx context.Context, ref siteprotocol.NativeRef) (obs application.Observation, found bool, err error)
}

// Family is the application family, performed by application.Executor
// (docs/site-runtime.md#application-services-on-kubernetes,
// docs/site-runtime.md#one-lifecycle-for-every-family):
//
//   - prepare renders the Deployment and the ClusterIP Service (a demand
//     the Site cannot render is refused invalid-payload before anything is
//     created), creates the Attempt's workspace claim as the member (as for
//     batch) and saves both specifications in services.sqlite (phase
//     prepared) before answering; a prepare or start of an Attempt recorded
//     in another family's file is refused attempt-conflict; a prepare of an
//     Attempt already prepared by another command is refused
//     attempt-conflict, whatever it asks for, so a later command never
//     changes the service kind or the specification;
//   - start creates exactly what prepare saved, the Deployment and then the
//     Service, as the member after one fresh access check (StartAccess:
//     its identity serves both creates). When the Service
//     is refused after the Deployment exists, the Deployment is deleted by
//     its UID (recorded before and after; application.FailAtCompensatingDelete) and the
//     start is refused with the Service's refusal: nothing of the Attempt is
//     left;
//   - observe reports the Deployment's state (Natives); native-missing
//     when the Deployment or the Service is gone;
//   - cancel (Deployment, then Service) and cleanup (also the claim) are the
//     Lifecycle's UID-bound foreground deletes as the Runtime;
//   - read-logs of its Pods (Pod → ReplicaSet → the recorded Deployment),
//     proxy to its recorded Service and read-file are its private reads.
type Family struct {
	application.Workspaces
	native Natives
	specs  application.ApplicationSpecs
	cfg    Config
}

// New returns the application family acting through native and rendering
// with specs.
func New(native Natives, specs application.ApplicationSpecs, cfg Config) *Family {
	if cfg.ProgressDeadline <= 0 {
		cfg.ProgressDeadline = application.DefaultProgressDeadline
	}
	return &Family{native: native, specs: specs, cfg: cfg}
}

// NewExecutor is the application family's Executor over services.sqlite
// (records), acting through native.
func NewExecutor(access *application.Access, native Natives, specs application.ApplicationSpecs, records application.ServiceRecords,
	fp application.Failpoints, cfg application.ExecutorConfig, progressDeadline time.Duration) *application.Executor {
	f := New(native, specs, Config{ProgressDeadline: progressDeadline})
	return application.NewExecutor(f, access, native, records, fp, cfg)
}

// Name is siteprotocol.FamilyApplication.
func (f *Family) Name() siteprotocol.Family { return siteprotocol.FamilyApplication }

// Kinds: cancel removes the Deployment, then the Service; cleanup also a
// helper or reader Pod, a credential Secret and then the workspace claim.
// Cancel's reading of a Deployment still being deleted is its state (a
// Service has no state of its own: missing).
func (f *Family) Kinds() application.FamilyKinds {
	return application.FamilyKinds{
		ServiceKind: string(siteprotocol.ServiceApplication),
		Workload:    []string{domain.KindDeployment, domain.KindService},
		State:       application.StateOf(domain.KindDeployment, f.native.ObserveDeployment),
	}
}

// Specs is the application renderer.
func (f *Family) Specs() application.WorkspaceSpecs { return f.specs }

// LogRoot: its Pods' chains end at the recorded Deployment.
func (f *Family) LogRoot() string { return domain.KindDeployment }

// ProxyService: proxy goes to the recorded Service.
func (f *Family) ProxyService() string { return domain.KindService }

// Prepare renders and saves the Deployment and Service and creates the
// workspace claim (checking a repository out into it).
func (f *Family) Prepare(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool) (domain.Answer, error) {
	spec, invalid := application.ApplicationSpecOf(p)
	return application.PrepareService(ctx, env, f.specs, cmd, p, recovering, application.ServicePrepare{
		Invalid: invalid, Kind: siteprotocol.ServiceApplication, SpecKinds: []string{domain.KindDeployment, domain.KindService},
		Render: func(kind string, b domain.MemberBinding, claim string, verify *application.WorkspaceVerification) (application.NativeObject, error) {
			spec.Identity, spec.Namespace, spec.ServiceAccount, spec.WorkspaceClaim = application.IdentityOf(cmd), b.Namespace, b.Account, claim
			spec.ProgressDeadlineSeconds, spec.Verify = int32(f.cfg.ProgressDeadline.Seconds()), verify
			if kind == domain.KindService {
				return f.specs.RenderService(spec)
			}
			return f.specs.RenderDeployment(spec)
		},
		Saved: func(objs []application.NativeObject) string {
			return fmt.Sprintf("Deployment and Service %s rendered and saved", objs[0].Name)
		},
	})
}

// Start creates the saved Deployment and then the Service; a refused
// Service removes the Deployment again.
func (f *Family) Start(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, _ siteprotocol.StartPayload, records []domain.NativeRecord, recovering bool) (domain.Answer, error) {
	depRec, svcRec := domain.FindRecord(records, domain.KindDeployment), domain.FindRecord(records, domain.KindService)
	ws, refusal := application.ReadyToStart(cmd, records, "prepared workspace and saved service specification", depRec, svcRec)
	if refusal != nil {
		return *refusal, nil
	}
	if compensating(cmd, depRec, svcRec) {
		// A start whose Service was refused, interrupted while it removed
		// its Deployment: finish that, and answer the refusal.
		return f.compensate(ctx, env, cmd, *depRec, *svcRec, nil)
	}
	b, refusal, err := env.Life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	if refusal, err := application.PreparedFor(f.specs, cmd, b, *ws, *depRec); refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	// One access check for the start: its identity creates the Deployment
	// and then the Service (docs/site-runtime.md#access-before-every-native-start).
	access := env.Life.Access().Start(cmd, b)
	dep, depUID, refusal, err := env.Life.EnsureCreated(ctx, cmd, access, application.StartRecord(cmd, depRec), application.SavedObject(*depRec), recovering)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	svc, svcUID, refusal, err := env.Life.EnsureCreated(ctx, cmd, access, application.StartRecord(cmd, svcRec), application.SavedObject(*svcRec), recovering)
	if err != nil {
		return domain.Answer{}, err
	}
	if refusal != nil {
		// Nothing of a refused start is left behind: the Deployment goes.
		if err := env.Life.Save(ctx, cmd, svc, "", domain.PhaseRefused); err != nil {
			return domain.Answer{}, err
		}
		kind := string(siteprotocol.ServiceApplication)
		rec := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: dep.Kind, Namespace: dep.Namespace, Name: dep.Name, UID: depUID, ServiceKind: kind,
			Spec: dep.Spec, Phase: domain.PhaseCreated, CommandID: cmd.ID}
		svcSaved := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: svc.Kind, Namespace: svc.Namespace, Name: svc.Name, ServiceKind: kind,
			Spec: svc.Spec, Phase: domain.PhaseRefused, CommandID: cmd.ID}
		return f.compensate(ctx, env, cmd, rec, svcSaved, refusal)
	}
	return domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("Deployment %s and Service %s created in namespace %s as %s%s", dep.Name, svc.Name, dep.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, dep.Ref(depUID), svc.Ref(svcUID)), nil
}

// compensating reports whether cmd's start saw its Service refused after
// it had created the Deployment.
func compensating(cmd siteprotocol.Command, dep, svc *domain.NativeRecord) bool {
	return cmd.Operation == siteprotocol.OpStart && svc.CommandID == cmd.ID && svc.Phase == domain.PhaseRefused &&
		dep.CommandID == cmd.ID && dep.UID != "" && dep.Phase != domain.PhaseRefused
}

// compensate deletes the Deployment dep that cmd created, by its UID, as
// the Runtime — recorded in phase deleting before the delete
// (application.FailAtCompensatingDelete) and removed once it is gone — and answers the
// start refused with the Service's refusal and no native reference.
// refusal is the Service's refusal as the create gave it (nil when
// recovering from the records, which keep no reason: then
// native-request-denied, the reason a refused create is recorded for).
func (f *Family) compensate(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, dep, svc domain.NativeRecord, refusal *domain.Answer) (domain.Answer, error) {
	if dep.Phase != domain.PhaseRemoved {
		if dep.Phase != domain.PhaseDeleting {
			if err := env.Life.SaveRecord(ctx, cmd, dep, domain.PhaseDeleting); err != nil {
				return domain.Answer{}, err
			}
			dep.Phase = domain.PhaseDeleting
		}
		env.Failpoints.Hit(application.FailAtCompensatingDelete)
		_, pending, err := env.Life.Delete(ctx, cmd, dep)
		if err != nil {
			return domain.Answer{}, err
		}
		if pending != nil {
			// Still being deleted: the outcome is not known yet; the
			// worker recovers the start, which waits again.
			return domain.Answer{}, fmt.Errorf("the compensating delete of Deployment %s/%s uid %s is still pending after %s", dep.Namespace, dep.Name, dep.UID, env.Life.DeletionWait())
		}
	}
	reason, why := siteprotocol.ReasonNativeRequestDenied, "refused by the API server"
	if refusal != nil {
		reason, why = refusal.Reason, trimRefused(refusal.Message, svc)
	}
	return domain.Refused(reason,
		"Service %s/%s was %s; the Deployment %s created before it was deleted by its UID %s: nothing of attempt %s remains",
		svc.Namespace, svc.Name, why, dep.Name, dep.UID, cmd.AttemptID), nil
}

// trimRefused turns ensureCreated's refusal message ("Service ns/name was
// refused: …") into the part after the object's name.
func trimRefused(msg string, svc domain.NativeRecord) string {
	prefix := fmt.Sprintf("%s %s/%s was ", svc.Kind, svc.Namespace, svc.Name)
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return "refused: " + msg
}

// Observe reports the Deployment's state while both objects exist.
func (f *Family) Observe(ctx context.Context, _ application.FamilyEnv, cmd siteprotocol.Command, records []domain.NativeRecord) (domain.Answer, error) {
	dep, svc := domain.FindRecord(records, domain.KindDeployment), domain.FindRecord(records, domain.KindService)
	if dep == nil || dep.UID == "" || svc == nil || svc.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no application service", cmd.AttemptID), nil
	}
	depRef, svcRef := application.RecordRef(*dep), application.RecordRef(*svc)
	for _, r := range []*domain.NativeRecord{dep, svc} {
		if r.Phase == domain.PhaseRemoved {
			return application.Missing(application.RecordRef(*r), "was removed by command "+r.CommandID), nil
		}
	}
	obs, found, err := f.native.ObserveDeployment(ctx, depRef)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("observe Deployment %s/%s: %w", depRef.Namespace, depRef.Name, err)
	}
	if !found {
		return application.Missing(depRef, "no longer exists"), nil
	}
	live, found, err := f.native.Lookup(ctx, application.SavedObject(*svc))
	if err != nil {
		return domain.Answer{}, fmt.Errorf("read Service %s/%s: %w", svcRef.Namespace, svcRef.Name, err)
	}
	if !found || live.UID != svc.UID {
		return application.Missing(svcRef, "no longer exists"), nil
	}
	// A Deployment reports no exit code.
	obs.ExitCode = nil
	return application.Observed(obs, depRef, svcRef), nil
}
