package application_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// lifecycleFixture is the shared lifecycle of a family that is not batch
// (two kinds of its own, a service kind), on the batch fixture's fakes of
// the API server and the permission provider (outside this project).
type lifecycleFixture struct {
	*batchFixture
	life *application.Lifecycle
}

func newLifecycleFixture(t *testing.T, state application.WorkloadState) *lifecycleFixture {
	t.Helper()
	f := newBatchFixture(t, 50*time.Millisecond)
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	life := application.NewLifecycle(access, f.native, f.records, nil, application.LifecycleConfig{
		DeletionWait: 50 * time.Millisecond, ServiceKind: "application",
		Workload: []string{domain.KindDeployment, domain.KindService},
		Owned:    []string{domain.KindDeployment, domain.KindService, domain.KindWorkspace},
		State:    state,
	})
	return &lifecycleFixture{batchFixture: f, life: life}
}

func object(kind string, spec string) application.NativeObject {
	return application.NativeObject{Kind: kind, Namespace: namespace, Name: domain.AttemptObjectName(attempt, ""), Spec: []byte(spec)}
}

// ensure runs EnsureCreated of obj for cmd with the Attempt's record of
// obj's kind.
func (f *lifecycleFixture) ensure(t *testing.T, cmd siteprotocol.Command, obj application.NativeObject, recovering bool) (string, *domain.Answer, error) {
	t.Helper()
	ctx := context.Background()
	b, refusal, err := f.life.Access().Binding(ctx, cmd)
	if refusal != nil || err != nil {
		t.Fatalf("binding: %v %v", refusal, err)
	}
	recs, err := f.life.Records(ctx, cmd.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	_, uid, refusal, err := f.life.EnsureCreated(ctx, cmd, f.life.Access().Start(cmd, b), domain.FindRecord(recs, obj.Kind), obj, recovering)
	return uid, refusal, err
}

func (f *lifecycleFixture) record(t *testing.T, kind string) domain.NativeRecord {
	t.Helper()
	recs, _ := f.life.Records(context.Background(), attempt)
	r := domain.FindRecord(recs, kind)
	if r == nil {
		t.Fatalf("no %s record", kind)
	}
	return *r
}

func TestTheLifecycleCreatesAnyFamilysObjectsOnceAndRemovesThemByUIDInTheFamilysOrder(t *testing.T) {
	f := newLifecycleFixture(t, nil)
	start := f.cmd(t, siteprotocol.OpStart, startBody).Command
	uids := map[string]string{}
	for _, kind := range []string{domain.KindDeployment, domain.KindService} {
		uid, refusal, err := f.ensure(t, start, object(kind, `{"kind":"`+kind+`"}`), false)
		if refusal != nil || err != nil || uid == "" {
			t.Fatalf("create %s: uid %q, %v, %v", kind, uid, refusal, err)
		}
		uids[kind] = uid
		if r := f.record(t, kind); r.Phase != domain.PhaseCreated || r.UID != uid || r.ServiceKind != "application" || r.CommandID != start.ID {
			t.Fatalf("%s record %+v", kind, r)
		}
	}
	creates, checks := len(f.native.creates), len(f.perms.queries)
	// The same command again: its recorded creates are answered, nothing is created.
	for kind, want := range uids {
		if uid, _, err := f.ensure(t, start, object(kind, `{"kind":"`+kind+`"}`), true); err != nil || uid != want {
			t.Fatalf("again %s: %q %v, want %q", kind, uid, err, want)
		}
	}
	if len(f.native.creates) != creates || len(f.perms.queries) != checks {
		t.Fatal("a recorded create was performed or checked again")
	}
	// Another command of the Attempt cannot create the kind again.
	other := f.cmd(t, siteprotocol.OpStart, startBody).Command
	if _, refusal, err := f.ensure(t, other, object(domain.KindService, `{}`), false); err != nil || refusal == nil || refusal.Reason != siteprotocol.ReasonAttemptConflict {
		t.Fatalf("another command's create: %+v %v", refusal, err)
	}

	cancel := f.cmd(t, siteprotocol.OpCancel, nil).Command
	a, err := f.life.Cancel(context.Background(), cancel)
	if err != nil || a.Reason != siteprotocol.ReasonDeleted || len(a.NativeRefs) != 2 {
		t.Fatalf("cancel: %+v %v", a, err)
	}
	if len(f.native.deletes) != 2 || f.native.deletes[0].Kind != domain.KindDeployment || f.native.deletes[0].UID != uids[domain.KindDeployment] ||
		f.native.deletes[1].Kind != domain.KindService || f.native.deletes[1].UID != uids[domain.KindService] {
		t.Fatalf("deletes %+v: want the Deployment, then the Service, by UID", f.native.deletes)
	}
	for _, kind := range []string{domain.KindDeployment, domain.KindService} {
		if r := f.record(t, kind); r.Phase != domain.PhaseRemoved || r.ServiceKind != "application" {
			t.Fatalf("%s record after cancel %+v", kind, r)
		}
	}
}

func TestTheLifecycleAdoptsALostCreateOnlyWhenTheLiveObjectMatchesAndDeletesNothingOtherwise(t *testing.T) {
	f := newLifecycleFixture(t, nil)
	start := f.cmd(t, siteprotocol.OpStart, startBody).Command
	f.native.createLost, f.native.createErr = true, errors.New("connection reset")
	dep := object(domain.KindDeployment, `{"replicas":1}`)
	if _, _, err := f.ensure(t, start, dep, false); err == nil {
		t.Fatal("a lost create answer must leave the effect uncertain")
	}
	if r := f.record(t, domain.KindDeployment); r.Phase != domain.PhaseCreating || r.UID != "" {
		t.Fatalf("record after a lost create %+v: want creating, before the create", r)
	}
	uid, refusal, err := f.ensure(t, start, dep, true)
	if err != nil || refusal != nil || uid == "" || len(f.native.creates) != 1 {
		t.Fatalf("recovery: %q %v %v, %d creates", uid, refusal, err, len(f.native.creates))
	}

	// A Service under the name that is not the one rendered: unexplained.
	svc := object(domain.KindService, `{"port":8080}`)
	f.native.objects[key(domain.KindService, namespace, svc.Name)] = fakeObject{uid: "someone-else", spec: []byte(`{"port":9090}`)}
	if _, _, err := f.ensure(t, start, svc, true); !errors.Is(err, application.ErrUnexplained) {
		t.Fatalf("recovery of a differing Service: %v, want ErrUnexplained", err)
	}
	if len(f.native.deletes) != 0 {
		t.Fatalf("deleted %+v; an unexplained object is never touched", f.native.deletes)
	}
}

func TestACancelStillDeletingReportsTheStateTheFamilyReads(t *testing.T) {
	f := newLifecycleFixture(t, func(_ context.Context, ref siteprotocol.NativeRef) (siteprotocol.State, bool, error) {
		if ref.Kind != domain.KindDeployment {
			t.Errorf("state of a %s", ref.Kind)
		}
		return siteprotocol.StateRunning, true, nil
	})
	start := f.cmd(t, siteprotocol.OpStart, startBody).Command
	if _, _, err := f.ensure(t, start, object(domain.KindDeployment, `{}`), false); err != nil {
		t.Fatal(err)
	}
	f.native.neverGone = true
	a, err := f.life.Cancel(context.Background(), f.cmd(t, siteprotocol.OpCancel, nil).Command)
	if err != nil || a.Reason != siteprotocol.ReasonDeletionPending {
		t.Fatalf("cancel: %+v %v", a, err)
	}
	if d, ok := a.Detail.(siteprotocol.CancelDetail); !ok || d.State != siteprotocol.StateRunning {
		t.Fatalf("detail %#v: want the state the family read", a.Detail)
	}
	if r := f.record(t, domain.KindDeployment); r.Phase != domain.PhaseDeleting {
		t.Fatalf("record %+v: want deleting", r)
	}
}
