package application

import (
	"context"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

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

// ApplicationConfig configures the application service executors.
type ApplicationConfig struct {
	// DeletionWait bounds the wait for a deleted object (default
	// DefaultDeletionWait).
	DeletionWait time.Duration
	// ProgressDeadline is the Deployment's progressDeadlineSeconds
	// (default DefaultProgressDeadline), rendered at prepare.
	ProgressDeadline time.Duration
	// Reads bounds the private reads (docs/site-runtime.md#command-bounds).
	Reads ReadConfig
}

// DeploymentObserver reads an application service's native state.
type DeploymentObserver interface {
	// ObserveDeployment reports the state of the Deployment ref names (its
	// ReplicaSets and Pods by controller UID lineage); found is false when
	// no Deployment with ref's name and UID exists.
	ObserveDeployment(ctx context.Context, ref siteprotocol.NativeRef) (obs Observation, found bool, err error)
}

// ApplicationNatives is what the application family uses of the native
// system: the shared native objects and its Deployments' observation.
type ApplicationNatives interface {
	NativeObjects
	DeploymentObserver
}

// ApplicationExecutor performs the application family's prepare, start,
// observe, cancel and cleanup on the shared Lifecycle
// (docs/site-runtime.md#application-services-on-kubernetes,
// docs/site-runtime.md#one-lifecycle-for-every-family):
//
//   - prepare renders the Deployment and the ClusterIP Service (a demand
//     the Site cannot render is refused invalid-payload before anything is
//     created), creates the Attempt's workspace claim as the member (as for
//     batch) and saves both specifications in services.sqlite (phase
//     prepared) before answering; a prepare or start of an Attempt recorded
//     in another family's file (WithOtherFamilies) is refused
//     attempt-conflict; a prepare of an Attempt already prepared by another
//     command is refused attempt-conflict, whatever it asks for, so a later
//     command never changes the service kind or the specification;
//   - start creates exactly what prepare saved, the Deployment and then the
//     Service, as the member after one fresh access check (StartAccess:
//     its identity serves both creates). When the Service
//     is refused after the Deployment exists, the Deployment is deleted by
//     its UID (recorded before and after; FailAtCompensatingDelete) and the
//     start is refused with the Service's refusal: nothing of the Attempt is
//     left;
//   - observe reports the Deployment's state (DeploymentObserver);
//     native-missing when the Deployment or the Service is gone;
//   - cancel (Deployment, then Service) and cleanup (also the claim) are the
//     Lifecycle's UID-bound foreground deletes as the Runtime.
type ApplicationExecutor struct {
	// checkout is set by WithCheckout; without it a prepare with a
	// repository is refused unsupported-operation.
	checkout *Checkout
	life     *Lifecycle
	native   ApplicationNatives
	specs    ApplicationSpecs
	fp       Failpoints
	cfg      ApplicationConfig
	// reads are set by WithReads.
	reads *PrivateReads
}

// NewApplicationExecutor returns the application service executors;
// records is services.sqlite.
func NewApplicationExecutor(access *Access, native ApplicationNatives, specs ApplicationSpecs, records ServiceRecords, fp Failpoints, cfg ApplicationConfig) *ApplicationExecutor {
	if fp == nil {
		fp = NoFailpoints{}
	}
	if cfg.DeletionWait <= 0 {
		cfg.DeletionWait = DefaultDeletionWait
	}
	if cfg.ProgressDeadline <= 0 {
		cfg.ProgressDeadline = DefaultProgressDeadline
	}
	life := NewLifecycle(access, native, records, fp, LifecycleConfig{
		DeletionWait: cfg.DeletionWait, ServiceKind: string(siteprotocol.ServiceApplication),
		Workload: []string{domain.KindDeployment, domain.KindService},
		Owned:    []string{domain.KindDeployment, domain.KindService, domain.KindPod, domain.KindSecret, domain.KindWorkspace},
		State:    deploymentState(native),
	})
	return &ApplicationExecutor{life: life, native: native, specs: specs, fp: fp, cfg: cfg}
}

// deploymentState is cancel's reading of a Deployment still being deleted
// (a Service has no state of its own: missing).
func deploymentState(obs DeploymentObserver) WorkloadState {
	return func(ctx context.Context, ref siteprotocol.NativeRef) (siteprotocol.State, bool, error) {
		if ref.Kind != domain.KindDeployment {
			return "", false, nil
		}
		o, found, err := obs.ObserveDeployment(ctx, ref)
		return o.State, found, err
	}
}

// WithOtherFamilies makes e see the other families' record files
// (jobs.sqlite): a prepare or start of an Attempt recorded there is
// refused attempt-conflict and changes nothing
// (docs/site-runtime.md#one-lifecycle-for-every-family). It returns e.
func (e *ApplicationExecutor) WithOtherFamilies(others ...FamilyRecords) *ApplicationExecutor {
	e.life.others = others
	return e
}

// WithCheckout makes e's prepare check out a payload's repository into
// the workspace through the workspace helper, and its serving Pod verify
// it (docs/site-runtime.md#services-and-the-prepared-workspace). It
// returns e.
func (e *ApplicationExecutor) WithCheckout(grants RepositoryGrants, specs CheckoutSpecs, pods HelperPods, cfg CheckoutConfig) *ApplicationExecutor {
	e.checkout = NewCheckout(e.life, grants, specs, pods, cfg)
	return e
}

// WithReads makes e answer read-logs of its Deployments' Pods through
// pods (Pod → ReplicaSet → the recorded Deployment;
// docs/site-runtime.md#private-reads); without it read-logs is refused
// unsupported-operation. It returns e.
func (e *ApplicationExecutor) WithReads(pods WorkloadPods) *ApplicationExecutor {
	e.reads = NewPrivateReads(e.life, e.specs, pods, domain.KindDeployment, e.cfg.Reads)
	return e
}

// WithProxy makes e answer proxy to its Attempts' Services through p
// (after WithReads; docs/site-runtime.md#private-reads); without it proxy
// is refused unsupported-operation. It returns e.
func (e *ApplicationExecutor) WithProxy(p ServiceProxy) *ApplicationExecutor {
	if e.reads != nil {
		e.reads.WithProxy(p, domain.KindService)
	}
	return e
}

// WithFileReads makes e answer read-file of its Attempts' workspaces
// through the workspace reader (after WithReads;
// docs/site-runtime.md#the-workspace-reader); without it read-file is
// refused unsupported-operation. It returns e.
func (e *ApplicationExecutor) WithFileReads(specs ReaderSpecs, pods ReaderPods, cfg FileReadConfig) *ApplicationExecutor {
	if e.reads != nil {
		e.reads.WithFiles(specs, pods, cfg)
	}
	return e
}

// Registrations routes the application family's operations to e.
func (e *ApplicationExecutor) Registrations() []Registration {
	return workloadRegistrations(siteprotocol.FamilyApplication, e)
}

// Execute performs a new command; errors are as BatchExecutor.Execute's.
func (e *ApplicationExecutor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, false)
}

// Recover answers a command whose effect is uncertain; see
// ApplicationExecutor.
func (e *ApplicationExecutor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, true)
}

func (e *ApplicationExecutor) perform(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	if err := e.checkout.RetryRevocation(ctx, cmd); err != nil {
		return domain.Answer{}, err
	}
	return e.life.perform(ctx, cmd, recovering, familySteps{name: "application", prepare: e.prepare, start: e.start, observe: e.observe, reads: e.reads})
}

func (e *ApplicationExecutor) prepare(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	p, err := siteprotocol.DecodePayload[siteprotocol.PreparePayload](cmd)
	if err != nil {
		return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
	}
	if p.Repository != nil && e.checkout == nil {
		return domain.Refused(siteprotocol.ReasonUnsupportedOperation,
			"this Runtime cannot check out repositories yet (%s at %s); prepare an empty workspace (no repository)", p.Repository.URL, p.Repository.Commit), nil
	}
	spec, err := ApplicationSpecOf(p)
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
	if refusal, err := e.preparedElsewhere(cmd, records); refusal != nil || err != nil {
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
	// The Deployment and the Service are rendered (and so validated)
	// before the claim is created: a prepare refused for what it asks
	// creates nothing. A saved specification is never rendered again.
	spec.Identity, spec.Namespace, spec.ServiceAccount, spec.WorkspaceClaim = IdentityOf(cmd), b.Namespace, b.Account, ws.Name
	spec.ProgressDeadlineSeconds = int32(e.cfg.ProgressDeadline.Seconds())
	if p.Repository != nil {
		// The serving Pod verifies the prepared checkout, read-only,
		// before its container starts (docs/site-runtime.md#services-and-the-prepared-workspace).
		spec.Verify = &WorkspaceVerification{Image: e.checkout.cfg.Image, Repository: *p.Repository, SizeLimitBytes: e.checkout.SizeLimit(p.WorkspaceSizeBytes)}
	}
	depRec, svcRec := domain.FindRecord(records, domain.KindDeployment), domain.FindRecord(records, domain.KindService)
	dep, err := savedOrRendered(depRec, func() (NativeObject, error) { return e.specs.RenderDeployment(spec) })
	if err != nil {
		return renderRefusal(err)
	}
	svc, err := savedOrRendered(svcRec, func() (NativeObject, error) { return e.specs.RenderService(spec) })
	if err != nil {
		return renderRefusal(err)
	}
	ws, wsUID, checkedOut, answer, err := prepareServiceWorkspace(ctx, e.life, e.checkout, cmd, b, records, ws, p, depRec != nil, recovering)
	if answer != nil || err != nil {
		return OrAnswer(answer), err
	}
	if err := savePrepared(ctx, e.life, e.fp, cmd, depRec, dep); err != nil {
		return domain.Answer{}, err
	}
	if err := savePrepared(ctx, e.life, e.fp, cmd, svcRec, svc); err != nil {
		return domain.Answer{}, err
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared,
		fmt.Sprintf("workspace claim %s created in namespace %s as %s%s; Deployment and Service %s rendered and saved", ws.Name, ws.Namespace, b.Account, checkedOut, dep.Name),
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: ws.Name, UID: wsUID}, SpecDigest: siteprotocol.Digest(dep.Spec)},
		ws.Ref(wsUID)), nil
}

// preparedElsewhere refuses a prepare of an Attempt whose service
// specification another command saved (its Deployment's command label
// names the prepare that rendered it), or that holds a record of another
// service kind: a later command never changes either.
func (e *ApplicationExecutor) preparedElsewhere(cmd siteprotocol.Command, records []domain.NativeRecord) (*domain.Answer, error) {
	return servicePreparedElsewhere(e.specs, siteprotocol.ServiceApplication, cmd, records, domain.KindDeployment, domain.KindService)
}

func (e *ApplicationExecutor) start(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
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
	ws := domain.FindRecord(records, domain.KindWorkspace)
	depRec, svcRec := domain.FindRecord(records, domain.KindDeployment), domain.FindRecord(records, domain.KindService)
	if ws == nil || ws.Phase != domain.PhaseCreated || depRec == nil || svcRec == nil {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no prepared workspace and saved service specification; send prepare first", cmd.AttemptID), nil
	}
	if refusal := CheckoutReadiness(cmd, records); refusal != nil {
		return *refusal, nil
	}
	if compensating(cmd, depRec, svcRec) {
		// A start whose Service was refused, interrupted while it removed
		// its Deployment: finish that, and answer the refusal.
		return e.compensate(ctx, cmd, *depRec, *svcRec, nil)
	}
	b, refusal, err := e.life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	if refusal, err := preparedFor(e.specs, cmd, b, *ws, *depRec); refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	// One access check for the start: its identity creates the Deployment
	// and then the Service (docs/site-runtime.md#access-before-every-native-start).
	access := e.life.Access().Start(cmd, b)
	dep, depUID, refusal, err := e.life.EnsureCreated(ctx, cmd, access, startRecord(cmd, depRec), SavedObject(*depRec), recovering)
	if refusal != nil || err != nil {
		return OrAnswer(refusal), err
	}
	svc, svcUID, refusal, err := e.life.EnsureCreated(ctx, cmd, access, startRecord(cmd, svcRec), SavedObject(*svcRec), recovering)
	if err != nil {
		return domain.Answer{}, err
	}
	if refusal != nil {
		// Nothing of a refused start is left behind: the Deployment goes.
		if err := e.life.Save(ctx, cmd, svc, "", domain.PhaseRefused); err != nil {
			return domain.Answer{}, err
		}
		kind := string(siteprotocol.ServiceApplication)
		rec := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: dep.Kind, Namespace: dep.Namespace, Name: dep.Name, UID: depUID, ServiceKind: kind,
			Spec: dep.Spec, Phase: domain.PhaseCreated, CommandID: cmd.ID}
		svcSaved := domain.NativeRecord{AttemptID: cmd.AttemptID, Kind: svc.Kind, Namespace: svc.Namespace, Name: svc.Name, ServiceKind: kind,
			Spec: svc.Spec, Phase: domain.PhaseRefused, CommandID: cmd.ID}
		return e.compensate(ctx, cmd, rec, svcSaved, refusal)
	}
	return domain.Succeeded(siteprotocol.ReasonCreated,
		fmt.Sprintf("Deployment %s and Service %s created in namespace %s as %s%s", dep.Name, svc.Name, dep.Namespace, b.Account, domain.AccountCheckNote(b)),
		siteprotocol.StateDetail{State: siteprotocol.StateQueued}, dep.Ref(depUID), svc.Ref(svcUID)), nil
}

// startRecord is the record ensureCreated continues from: none while the
// object is only prepared (start creates it, recording its own phases).
func startRecord(cmd siteprotocol.Command, rec *domain.NativeRecord) *domain.NativeRecord {
	if rec.Phase == domain.PhasePrepared && rec.CommandID != cmd.ID {
		return nil
	}
	return rec
}

// compensating reports whether cmd's start saw its Service refused after
// it had created the Deployment.
func compensating(cmd siteprotocol.Command, dep, svc *domain.NativeRecord) bool {
	return cmd.Operation == siteprotocol.OpStart && svc.CommandID == cmd.ID && svc.Phase == domain.PhaseRefused &&
		dep.CommandID == cmd.ID && dep.UID != "" && dep.Phase != domain.PhaseRefused
}

// compensate deletes the Deployment dep that cmd created, by its UID, as
// the Runtime — recorded in phase deleting before the delete
// (FailAtCompensatingDelete) and removed once it is gone — and answers the
// start refused with the Service's refusal and no native reference.
// refusal is the Service's refusal as the create gave it (nil when
// recovering from the records, which keep no reason: then
// native-request-denied, the reason a refused create is recorded for).
func (e *ApplicationExecutor) compensate(ctx context.Context, cmd siteprotocol.Command, dep, svc domain.NativeRecord, refusal *domain.Answer) (domain.Answer, error) {
	if dep.Phase != domain.PhaseRemoved {
		if dep.Phase != domain.PhaseDeleting {
			if err := e.life.SaveRecord(ctx, cmd, dep, domain.PhaseDeleting); err != nil {
				return domain.Answer{}, err
			}
			dep.Phase = domain.PhaseDeleting
		}
		e.fp.Hit(FailAtCompensatingDelete)
		_, pending, err := e.life.Delete(ctx, cmd, dep)
		if err != nil {
			return domain.Answer{}, err
		}
		if pending != nil {
			// Still being deleted: the outcome is not known yet; the
			// worker recovers the start, which waits again.
			return domain.Answer{}, fmt.Errorf("the compensating delete of Deployment %s/%s uid %s is still pending after %s", dep.Namespace, dep.Name, dep.UID, e.cfg.DeletionWait)
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

func (e *ApplicationExecutor) observe(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	records, err := e.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	dep, svc := domain.FindRecord(records, domain.KindDeployment), domain.FindRecord(records, domain.KindService)
	if dep == nil || dep.UID == "" || svc == nil || svc.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no application service", cmd.AttemptID), nil
	}
	depRef, svcRef := RecordRef(*dep), RecordRef(*svc)
	for _, r := range []*domain.NativeRecord{dep, svc} {
		if r.Phase == domain.PhaseRemoved {
			return Missing(RecordRef(*r), "was removed by command "+r.CommandID), nil
		}
	}
	obs, found, err := e.native.ObserveDeployment(ctx, depRef)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("observe Deployment %s/%s: %w", depRef.Namespace, depRef.Name, err)
	}
	if !found {
		return Missing(depRef, "no longer exists"), nil
	}
	live, found, err := e.native.Lookup(ctx, SavedObject(*svc))
	if err != nil {
		return domain.Answer{}, fmt.Errorf("read Service %s/%s: %w", svcRef.Namespace, svcRef.Name, err)
	}
	if !found || live.UID != svc.UID {
		return Missing(svcRef, "no longer exists"), nil
	}
	msg := fmt.Sprintf("%s %s is %s", depRef.Kind, depRef.Name, obs.State)
	if obs.Reason != "" {
		msg += " (" + obs.Reason + ")"
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, msg, siteprotocol.ObserveDetail{
		State: obs.State, Reason: obs.Reason, Message: obs.Message, StartedAt: obs.StartedAt, FinishedAt: obs.FinishedAt,
	}, depRef, svcRef), nil
}
