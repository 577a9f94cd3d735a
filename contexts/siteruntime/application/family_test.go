package application_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// noteFamily is a family that exists only in this test
// (docs/architecture.md#executor-families): prepare creates the workspace
// claim, start one ConfigMap holding the command's argv, observe reports
// it running while it is recorded. It declares no capability, so it
// supplies nothing but Family's methods; the protocol's families are a
// closed vocabulary, so it serves batch's commands.
type noteFamily struct{ specs jsonSpecs }

const kindNote = "ConfigMap"

func (noteFamily) Name() siteprotocol.Family { return siteprotocol.FamilyBatch }

func (noteFamily) Kinds() application.FamilyKinds {
	return application.FamilyKinds{Workload: []string{kindNote}}
}

func (f noteFamily) Specs() application.WorkspaceSpecs { return f.specs }

func (f noteFamily) Prepare(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.PreparePayload, recovering bool) (domain.Answer, error) {
	records, err := env.Life.Records(ctx, cmd.AttemptID)
	if err != nil {
		return domain.Answer{}, err
	}
	b, refusal, err := env.Life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	obj, err := f.specs.RenderWorkspace(application.WorkspaceSpec{Identity: application.IdentityOf(cmd), Namespace: b.Namespace, SizeBytes: p.WorkspaceSizeBytes})
	if err != nil {
		return domain.Answer{}, err
	}
	obj, uid, refusal, err := env.Life.EnsureCreated(ctx, cmd, env.Life.Access().Start(cmd, b), domain.FindRecord(records, domain.KindWorkspace), obj, recovering)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	return domain.Succeeded(siteprotocol.ReasonPrepared, "claim "+obj.Name,
		siteprotocol.PrepareDetail{Workspace: siteprotocol.WorkspaceRef{ClaimName: obj.Name, UID: uid}, SpecDigest: siteprotocol.Digest(obj.Spec)}, obj.Ref(uid)), nil
}

func (noteFamily) Start(ctx context.Context, env application.FamilyEnv, cmd siteprotocol.Command, p siteprotocol.StartPayload, records []domain.NativeRecord, recovering bool) (domain.Answer, error) {
	ws := domain.FindRecord(records, domain.KindWorkspace)
	if ws == nil {
		return domain.Refused(siteprotocol.ReasonNotPrepared, "attempt %s has no workspace", cmd.AttemptID), nil
	}
	b, refusal, err := env.Life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	obj := application.NativeObject{Kind: kindNote, Namespace: b.Namespace, Name: domain.AttemptObjectName(cmd.AttemptID, ""), Spec: []byte(strings.Join(p.Argv, " "))}
	obj, uid, refusal, err := env.Life.EnsureCreated(ctx, cmd, env.Life.Access().Start(cmd, b), domain.FindRecord(records, kindNote), obj, recovering)
	if refusal != nil || err != nil {
		return application.OrAnswer(refusal), err
	}
	return domain.Succeeded(siteprotocol.ReasonCreated, "note "+obj.Name, siteprotocol.StateDetail{State: siteprotocol.StateQueued}, obj.Ref(uid)), nil
}

func (noteFamily) Observe(_ context.Context, _ application.FamilyEnv, cmd siteprotocol.Command, records []domain.NativeRecord) (domain.Answer, error) {
	rec := domain.FindRecord(records, kindNote)
	if rec == nil || rec.UID == "" {
		return domain.Refused(siteprotocol.ReasonNotStarted, "attempt %s has no note", cmd.AttemptID), nil
	}
	if rec.Phase == domain.PhaseRemoved {
		return application.Missing(application.RecordRef(*rec), "was removed"), nil
	}
	return domain.Succeeded(siteprotocol.ReasonObserved, "note is running", siteprotocol.ObserveDetail{State: siteprotocol.StateRunning}, application.RecordRef(*rec)), nil
}

// A family is its Family methods and one registration line: the shared
// Executor gives it the access check, the records written before and
// after each create, recovery by adoption, cancel and cleanup by UID, and
// an unsupported-operation refusal of every operation it declares no
// capability for.
func TestAFamilyOfItsOwnIsRegisteredInOneLine(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	// The registration: one line.
	regs := application.NewExecutor(noteFamily{}, access, f.native, f.records, nil, application.ExecutorConfig{DeletionWait: time.Second}).Registrations()
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), regs...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	if got := application.Operations(noteFamily{}); !slices.Equal(got, []siteprotocol.Operation{
		siteprotocol.OpPrepare, siteprotocol.OpStart, siteprotocol.OpObserve, siteprotocol.OpCancel, siteprotocol.OpCleanup}) {
		t.Errorf("operations of a family without capabilities: %v", got)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20}), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	// A repository is refused before the family sees the prepare: it
	// declares no checkout.
	repo := f.run(t, f.cmd(t, siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20,
		"repository": map[string]any{"url": "https://git.example/r.git", "commit": strings.Repeat("a", 40)}}), false)
	expect(t, repo, siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
	start := f.cmd(t, siteprotocol.OpStart, startBody)
	started := f.run(t, start, false)
	expect(t, started, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	// Recovery of the start answers the same bytes and creates nothing.
	creates := len(f.native.createdKinds)
	if again := f.run(t, start, true); again.Message != started.Message || len(again.NativeRefs) != 1 || again.NativeRefs[0] != started.NativeRefs[0] {
		t.Errorf("recovered start: %+v, first: %+v", again, started)
	}
	if len(f.native.createdKinds) != creates {
		t.Errorf("recovery created again: %v", f.native.createdKinds)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	logs := f.run(t, f.cmd(t, siteprotocol.OpReadLogs, readLogs(10, "")), false)
	expect(t, logs, siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
	if logs.Message != "the batch executor does not perform read-logs" {
		t.Errorf("read-logs refusal: %q", logs.Message)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpCancel, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
	cleanup := f.run(t, f.cmd(t, siteprotocol.OpCleanup, nil), false)
	expect(t, cleanup, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	var kinds []string
	for _, d := range f.native.deletes {
		kinds = append(kinds, d.Kind)
	}
	if !slices.Equal(kinds, []string{kindNote, domain.KindWorkspace}) {
		t.Errorf("deleted %v, want the note (cancel) and then the claim (cleanup)", kinds)
	}
	if len(f.native.objects) != 0 {
		t.Errorf("left behind: %v", f.native.objects)
	}
}
