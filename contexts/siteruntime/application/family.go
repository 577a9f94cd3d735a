package application

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Family is what an executor family supplies to the one Executor every
// family runs on (docs/architecture.md#executor-families,
// docs/site-runtime.md#one-lifecycle-for-every-family): the protocol family
// it serves, the native kinds it owns, what it renders (Specs) and its
// prepare, start and observe. Access, the lifecycle's records and creates,
// cancel, cleanup, recovery and the optional capabilities (CheckoutFamily,
// LogReadFamily, ProxyFamily, FileReadFamily) are the Executor's, written
// once. A family lives in a package of its own under
// application/families and imports no other family's package.
type Family interface {
	// Name is the protocol family whose workload operations the Executor
	// is registered for; it also names the executor in an
	// unsupported-operation refusal.
	Name() siteprotocol.Family
	// Kinds are the native kinds the family owns.
	Kinds() FamilyKinds
	// Specs renders the Attempt's workspace claim and reads the identity
	// of a saved specification (the private reads check it).
	Specs() WorkspaceSpecs
	// Prepare performs a prepare whose payload p decoded; a payload
	// naming a repository reaches it only when env.Checkout is set.
	// Errors leave the effect uncertain or wrap ErrUnexplained.
	Prepare(ctx context.Context, env FamilyEnv, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool) (domain.Answer, error)
	// Start performs a start whose payload p decoded, of an Attempt
	// recorded in no other family's file; records are the Attempt's
	// records in the family's file. Errors as Prepare's.
	Start(ctx context.Context, env FamilyEnv, cmd siteprotocol.Command, p siteprotocol.StartPayload, records []domain.NativeRecord, recovering bool) (domain.Answer, error)
	// Observe reports the workload's native state; records as Start's.
	Observe(ctx context.Context, env FamilyEnv, cmd siteprotocol.Command, records []domain.NativeRecord) (domain.Answer, error)
}

// FamilyKinds are the native kinds a family owns, as its Lifecycle uses
// them (LifecycleConfig).
type FamilyKinds struct {
	// ServiceKind is written into every record saved from a rendered
	// object ("application" or "inference"; empty for batch).
	ServiceKind string
	// Workload lists the kinds cancel removes, in deletion order; cleanup
	// removes them, then the kinds every family may own
	// (SharedOwnedKinds).
	Workload []string
	// State reads a workload object's state for cancel's failed /
	// deletion-pending answer; nil reports it missing.
	State WorkloadState
}

// SharedOwnedKinds are the kinds every family's Attempt may own besides
// its workload, in cleanup's deletion order: the workspace helper's and
// reader's Pods, the checkout's credential Secret, then the workspace
// claim.
func SharedOwnedKinds() []string {
	return []string{domain.KindPod, domain.KindSecret, domain.KindWorkspace}
}

// Workspaces is embedded by a family whose prepare checks repositories
// out (CheckoutFamily) and whose read-file reads its Attempts' workspaces
// (FileReadFamily, with its LogRoot): it declares both.
type Workspaces struct{}

// ChecksOutRepositories declares CheckoutFamily.
func (Workspaces) ChecksOutRepositories() {}

// ReadsWorkspaceFiles declares FileReadFamily.
func (Workspaces) ReadsWorkspaceFiles() {}

// FamilyEnv is what the Executor lends a family's steps: the family's
// Lifecycle (its access check, record file and creates), the workspace
// checkout (nil unless the family is a CheckoutFamily and WithCheckout
// wired it) and the failpoints.
type FamilyEnv struct {
	Life       *Lifecycle
	Checkout   *Checkout
	Failpoints Failpoints
}

// PreparedWorkspace is what BeginPrepare gives a family's prepare: the
// Attempt's records in the family's file, the command's current binding
// and the workspace claim rendered into its namespace (not yet created).
type PreparedWorkspace struct {
	Records   []domain.NativeRecord
	Binding   domain.MemberBinding
	Workspace NativeObject
}

// BeginPrepare is the first part of every family's prepare, in this
// order: an Attempt recorded in another family's file is refused
// attempt-conflict (Lifecycle.ElsewhereRefusal); the family's own rule on
// the records, when elsewhere is not nil (a service kind or specification
// another command saved); a prepare of another command is refused
// (PriorPrepare); the binding is read (Access.Binding's refusals); and the
// workspace claim is rendered with specs. A refusal is returned as the
// answer; errors are the record store's, the binding's and the render's.
func (env FamilyEnv) BeginPrepare(ctx context.Context, specs WorkspaceSpecs, cmd siteprotocol.Command, p siteprotocol.PreparePayload,
	elsewhere func(records []domain.NativeRecord) (*domain.Answer, error)) (PreparedWorkspace, *domain.Answer, error) {
	var w PreparedWorkspace
	refusal, err := env.Life.ElsewhereRefusal(ctx, cmd)
	if refusal != nil || err != nil {
		return w, refusal, err
	}
	if w.Records, err = env.Life.Records(ctx, cmd.AttemptID); err != nil {
		return w, nil, err
	}
	if elsewhere != nil {
		if refusal, err := elsewhere(w.Records); refusal != nil || err != nil {
			return w, refusal, err
		}
	}
	if refusal, err := PriorPrepare(specs, cmd, w.Records); refusal != nil || err != nil {
		return w, refusal, err
	}
	if w.Binding, refusal, err = env.Life.Access().Binding(ctx, cmd); refusal != nil || err != nil {
		return w, refusal, err
	}
	if w.Workspace, err = specs.RenderWorkspace(WorkspaceSpec{Identity: IdentityOf(cmd), Namespace: w.Binding.Namespace, SizeBytes: p.WorkspaceSizeBytes}); err != nil {
		return w, nil, fmt.Errorf("render the workspace claim: %w", err)
	}
	return w, nil, nil
}

// ReadyToStart is the first check of every family's start: refused
// not-prepared, naming what it lacks (missing), unless the Attempt's
// workspace claim is created and every record of saved (its saved
// specification) exists; refused as CheckoutReadiness says while a
// checkout is not finished. It returns the claim's record.
func ReadyToStart(cmd siteprotocol.Command, records []domain.NativeRecord, missing string, saved ...*domain.NativeRecord) (*domain.NativeRecord, *domain.Answer) {
	ws := domain.FindRecord(records, domain.KindWorkspace)
	ready := ws != nil && ws.Phase == domain.PhaseCreated
	for _, r := range saved {
		ready = ready && r != nil
	}
	if !ready {
		a := domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no %s; send prepare first", cmd.AttemptID, missing)
		return nil, &a
	}
	return ws, CheckoutReadiness(cmd, records)
}

// ObserveOne is the observe of a family whose workload is one object of
// kind: refused not-started, naming what, while none was created; gone
// answers it when a command removed it ("was removed by command …") or it
// no longer exists ("no longer exists"; nil gone: failed /
// native-missing, Missing); otherwise observe reads it and seen turns the
// observation into the answer (nil seen: Observed). Errors are the
// observation's and seen's.
func ObserveOne(ctx context.Context, cmd siteprotocol.Command, records []domain.NativeRecord, kind, what string,
	observe func(ctx context.Context, ref siteprotocol.NativeRef) (Observation, bool, error),
	gone func(ref siteprotocol.NativeRef, why string) (domain.Answer, error),
	seen func(ref siteprotocol.NativeRef, obs Observation) (domain.Answer, error)) (domain.Answer, error) {
	if gone == nil {
		gone = func(ref siteprotocol.NativeRef, why string) (domain.Answer, error) { return Missing(ref, why), nil }
	}
	if seen == nil {
		seen = func(ref siteprotocol.NativeRef, obs Observation) (domain.Answer, error) {
			return Observed(obs, ref), nil
		}
	}
	rec := domain.FindRecord(records, kind)
	if rec == nil || rec.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no %s", cmd.AttemptID, what), nil
	}
	ref := RecordRef(*rec)
	if rec.Phase == domain.PhaseRemoved {
		return gone(ref, "was removed by command "+rec.CommandID)
	}
	obs, found, err := observe(ctx, ref)
	if err != nil {
		return domain.Answer{}, fmt.Errorf("observe %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if !found {
		return gone(ref, "no longer exists")
	}
	return seen(ref, obs)
}

// StateOf is a FamilyKinds.State reading the state of a workload object
// of kind through observe; an object of another kind (a Service) has no
// state of its own: missing.
func StateOf(kind string, observe func(ctx context.Context, ref siteprotocol.NativeRef) (Observation, bool, error)) WorkloadState {
	return func(ctx context.Context, ref siteprotocol.NativeRef) (siteprotocol.State, bool, error) {
		if ref.Kind != kind {
			return "", false, nil
		}
		o, found, err := observe(ctx, ref)
		return o.State, found, err
	}
}

// CheckoutFamily is a Family whose prepare checks a payload's repository
// out into the workspace through the workspace helper
// (docs/site-runtime.md#the-workspace-helper). ChecksOutRepositories
// declares it; Executor.WithCheckout wires the checkout only for such a
// family, and a prepare naming a repository is otherwise refused
// unsupported-operation.
type CheckoutFamily interface {
	Family
	ChecksOutRepositories()
}

// LogReadFamily is a Family that answers read-logs of its workload's Pods
// (docs/site-runtime.md#private-reads); Executor.WithReads wires it.
type LogReadFamily interface {
	Family
	// LogRoot is the recorded kind its Pods' controller chains end at.
	LogRoot() string
}

// ProxyFamily is a LogReadFamily that answers proxy to its service
// (docs/site-runtime.md#private-reads); Executor.WithProxy wires it.
type ProxyFamily interface {
	LogReadFamily
	// ProxyService is the recorded kind of the Service proxied to; empty
	// when it is the Service a controller makes from LogRoot's object
	// (KServe's predictor Service).
	ProxyService() string
}

// FileReadFamily is a LogReadFamily that answers read-file of its
// Attempts' workspaces through the workspace reader
// (docs/site-runtime.md#the-workspace-reader); ReadsWorkspaceFiles
// declares it and Executor.WithFileReads wires it.
type FileReadFamily interface {
	LogReadFamily
	ReadsWorkspaceFiles()
}

// Operations lists the operations f performs, in the protocol's order:
// prepare, start, observe, cancel and cleanup always, then read-logs,
// read-file and proxy as its capabilities declare. The Executor refuses
// the others unsupported-operation.
func Operations(f Family) []siteprotocol.Operation {
	ops := []siteprotocol.Operation{siteprotocol.OpPrepare, siteprotocol.OpStart, siteprotocol.OpObserve, siteprotocol.OpCancel, siteprotocol.OpCleanup}
	if _, ok := f.(LogReadFamily); ok {
		ops = append(ops, siteprotocol.OpReadLogs)
	}
	if _, ok := f.(FileReadFamily); ok {
		ops = append(ops, siteprotocol.OpReadFile)
	}
	if _, ok := f.(ProxyFamily); ok {
		ops = append(ops, siteprotocol.OpProxy)
	}
	return ops
}

// ExecutorConfig configures the Executor of any family.
type ExecutorConfig struct {
	// DeletionWait bounds the wait for a deleted object (default
	// DefaultDeletionWait; --deletion-wait).
	DeletionWait time.Duration
	// Reads bounds the private reads (docs/site-runtime.md#command-bounds).
	Reads ReadConfig
}

// Executor performs one family's workload operations
// (docs/site-runtime.md#one-lifecycle-for-every-family): prepare, start
// and observe are the Family's; cancel and cleanup are its Lifecycle's
// UID-bound foreground deletes as the Runtime; read-logs, proxy and
// read-file are the private reads its capabilities declare and the With*
// methods wire; every other operation is refused unsupported-operation.
// Before the family's steps it decodes the payload (invalid-payload), refuses a
// repository it cannot check out (unsupported-operation), and, for a start, an
// Attempt recorded in another family's file (attempt-conflict,
// WithOtherFamilies). Every create is recorded in phase creating BEFORE the
// create call and with its UID after it, so Recover can tell what may have
// happened (Lifecycle).
type Executor struct {
	family Family
	life   *Lifecycle
	fp     Failpoints
	cfg    ExecutorConfig
	// checkout is set by WithCheckout, reads by WithReads (and their
	// proxy and files by WithProxy and WithFileReads).
	checkout *Checkout
	reads    *PrivateReads
}

// NewExecutor returns the executor of family f over its record file
// records (jobs.sqlite or services.sqlite), acting through native and
// checking access with access.
func NewExecutor(f Family, access *Access, native NativeObjects, records NativeRecords, fp Failpoints, cfg ExecutorConfig) *Executor {
	if fp == nil {
		fp = NoFailpoints{}
	}
	k := f.Kinds()
	life := NewLifecycle(access, native, records, fp, LifecycleConfig{
		DeletionWait: cfg.DeletionWait, ServiceKind: k.ServiceKind, Workload: k.Workload,
		Owned: append(slices.Clone(k.Workload), SharedOwnedKinds()...), State: k.State,
	})
	return &Executor{family: f, life: life, fp: fp, cfg: cfg}
}

// Family is the family e performs.
func (e *Executor) Family() Family { return e.family }

// WithOtherFamilies makes e see the other families' record files: a
// prepare or start of an Attempt recorded there is refused
// attempt-conflict and changes nothing
// (docs/site-runtime.md#one-lifecycle-for-every-family). It returns e.
func (e *Executor) WithOtherFamilies(others ...FamilyRecords) *Executor {
	e.life.others = others
	return e
}

// WithCheckout makes a CheckoutFamily's prepare check out a payload's
// repository into the workspace through the workspace helper
// (docs/site-runtime.md#the-workspace-helper); for another family it does
// nothing. It returns e.
func (e *Executor) WithCheckout(grants RepositoryGrants, specs CheckoutSpecs, pods HelperPods, cfg CheckoutConfig) *Executor {
	if _, ok := e.family.(CheckoutFamily); ok {
		e.checkout = NewCheckout(e.life, grants, specs, pods, cfg)
	}
	return e
}

// WithReads makes a LogReadFamily's executor answer read-logs through pods
// (docs/site-runtime.md#private-reads); for another family, or without it,
// read-logs is refused unsupported-operation. It returns e.
func (e *Executor) WithReads(pods WorkloadPods) *Executor {
	if f, ok := e.family.(LogReadFamily); ok {
		e.reads = NewPrivateReads(e.life, f.Specs(), pods, f.LogRoot(), e.cfg.Reads)
	}
	return e
}

// WithProxy makes a ProxyFamily's executor answer proxy through p (after
// WithReads; docs/site-runtime.md#private-reads); otherwise proxy is
// refused unsupported-operation. It returns e.
func (e *Executor) WithProxy(p ServiceProxy) *Executor {
	if f, ok := e.family.(ProxyFamily); ok && e.reads != nil {
		e.reads.WithProxy(p, f.ProxyService())
	}
	return e
}

// WithFileReads makes a FileReadFamily's executor answer read-file
// through the workspace reader (after WithReads;
// docs/site-runtime.md#the-workspace-reader); otherwise read-file is
// refused unsupported-operation. It returns e.
func (e *Executor) WithFileReads(specs ReaderSpecs, pods ReaderPods, cfg FileReadConfig) *Executor {
	if _, ok := e.family.(FileReadFamily); ok && e.reads != nil {
		e.reads.WithFiles(specs, pods, cfg)
	}
	return e
}

// Operations lists the operations e performs as wired, in Operations'
// order: its family's, less a private read that WithReads, WithProxy or
// WithFileReads has not wired (refused unsupported-operation).
func (e *Executor) Operations() []siteprotocol.Operation {
	var ops []siteprotocol.Operation
	for _, op := range Operations(e.family) {
		switch {
		case op == siteprotocol.OpReadLogs && e.reads == nil,
			op == siteprotocol.OpReadFile && (e.reads == nil || e.reads.files == nil),
			op == siteprotocol.OpProxy && (e.reads == nil || e.reads.proxy == nil):
			continue
		}
		ops = append(ops, op)
	}
	return ops
}

// Registrations routes every workload operation of e's family (prepare,
// start, observe, cancel, cleanup, read-logs, read-file, proxy) to e; the
// ones it does not perform are answered unsupported-operation.
func (e *Executor) Registrations() []Registration {
	var regs []Registration
	for _, op := range []siteprotocol.Operation{siteprotocol.OpPrepare, siteprotocol.OpStart, siteprotocol.OpObserve, siteprotocol.OpCancel, siteprotocol.OpCleanup,
		siteprotocol.OpReadLogs, siteprotocol.OpReadFile, siteprotocol.OpProxy} {
		regs = append(regs, Registration{Operation: op, Family: e.family.Name(), Executor: e})
	}
	return regs
}

// Execute performs a new command. Errors leave the effect uncertain (the
// worker then calls Recover) or wrap ErrUnexplained.
func (e *Executor) Execute(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, false)
}

// Recover answers a command whose effect is uncertain; see Executor.
func (e *Executor) Recover(ctx context.Context, cmd siteprotocol.Command) (domain.Answer, error) {
	return e.perform(ctx, cmd, true)
}

// perform routes cmd to the family's step, the lifecycle's Cancel and
// Cleanup or the private reads; a cleanup first retries a grant
// revocation a crash left (Checkout.RetryRevocation).
func (e *Executor) perform(ctx context.Context, cmd siteprotocol.Command, recovering bool) (domain.Answer, error) {
	if err := e.checkout.RetryRevocation(ctx, cmd); err != nil {
		return domain.Answer{}, err
	}
	env := FamilyEnv{Life: e.life, Checkout: e.checkout, Failpoints: e.fp}
	switch cmd.Operation {
	case siteprotocol.OpPrepare:
		p, err := siteprotocol.DecodePayload[siteprotocol.PreparePayload](cmd)
		if err != nil {
			return domain.Refused(siteprotocol.ReasonInvalidPayload, "prepare payload: %v", err), nil
		}
		if p.Repository != nil && e.checkout == nil {
			return domain.Refused(siteprotocol.ReasonUnsupportedOperation,
				"this Runtime's %s executor checks out no repositories (%s at %s); prepare an empty workspace (no repository)", e.family.Name(), p.Repository.URL, p.Repository.Commit), nil
		}
		return e.family.Prepare(ctx, env, cmd, p, recovering)
	case siteprotocol.OpStart:
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
		return e.family.Start(ctx, env, cmd, p, records, recovering)
	case siteprotocol.OpObserve:
		records, err := e.life.Records(ctx, cmd.AttemptID)
		if err != nil {
			return domain.Answer{}, err
		}
		return e.family.Observe(ctx, env, cmd, records)
	case siteprotocol.OpCancel:
		return e.life.Cancel(ctx, cmd)
	case siteprotocol.OpCleanup:
		return e.life.Cleanup(ctx, cmd)
	case siteprotocol.OpReadLogs:
		if e.reads != nil {
			return e.reads.ReadLogs(ctx, cmd)
		}
	case siteprotocol.OpProxy:
		if e.reads != nil {
			return e.reads.Proxy(ctx, cmd, recovering)
		}
	case siteprotocol.OpReadFile:
		if e.reads != nil && e.reads.files != nil {
			return e.reads.ReadFile(ctx, cmd)
		}
	}
	return domain.Refused(siteprotocol.ReasonUnsupportedOperation, "the %s executor does not perform %s", e.family.Name(), cmd.Operation), nil
}
