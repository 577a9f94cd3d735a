package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// appNative is fakeNative (the Kubernetes API server's stand-in) with the
// application family's observer and a create refusal per kind.
type appNative struct {
	*fakeNative
	refuse map[string]error // kind → the error of its next create
}

func (a *appNative) Create(ctx context.Context, as domain.StartIdentity, obj application.NativeObject) (string, error) {
	if err, ok := a.refuse[obj.Kind]; ok {
		delete(a.refuse, obj.Kind)
		return "", err
	}
	return a.fakeNative.Create(ctx, as, obj)
}

func (a *appNative) ObserveDeployment(_ context.Context, ref siteprotocol.NativeRef) (application.Observation, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.objects[key(ref.Kind, ref.Namespace, ref.Name)]
	if !ok || o.uid != ref.UID {
		return application.Observation{}, false, nil
	}
	return a.observation, true, nil
}

// jsonAppSpecs renders the application objects as the JSON of their input
// (deterministic), the workspace claim as jsonSpecs does.
type jsonAppSpecs struct{ jsonSpecs }

func (jsonAppSpecs) RenderDeployment(s application.ApplicationServiceSpec) (application.NativeObject, error) {
	if s.Demand["gpu.amd"] > 0 {
		return application.NativeObject{}, fmt.Errorf("%w: gpu.amd", application.ErrUnsupportedDemand)
	}
	b, _ := json.Marshal(s)
	return application.NativeObject{Kind: domain.KindDeployment, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, ""), Spec: b}, nil
}

func (jsonAppSpecs) RenderService(s application.ApplicationServiceSpec) (application.NativeObject, error) {
	b, _ := json.Marshal(map[string]any{"Identity": s.Identity, "Port": s.Port})
	return application.NativeObject{Kind: domain.KindService, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, ""), Spec: b}, nil
}

// killAt is a Failpoints that "kills" (panics) at one name's n-th hit.
type killAt struct {
	name string
	n    int
}

type killed struct{ name string }

func (k *killAt) Hit(name string) {
	if name != k.name {
		return
	}
	if k.n--; k.n == 0 {
		panic(killed{name})
	}
}

type appFixture struct {
	*batchFixture
	app *appNative
	fp  *killAt
}

func newAppFixture(t *testing.T, deadline time.Duration) *appFixture {
	t.Helper()
	b := &batchFixture{
		native:   newFakeNative(),
		perms:    &fakePermissions{answer: domain.Permission{Allowed: true, EvidenceID: "ev-1", ValidUntil: now.Add(time.Minute)}},
		records:  &memRecords{rows: map[string]domain.NativeRecord{}},
		bindings: &memBindings{rows: map[string]map[int64]domain.MemberBinding{}},
	}
	f := &appFixture{batchFixture: b, app: &appNative{fakeNative: b.native, refuse: map[string]error{}}, fp: &killAt{}}
	f.restart(t, deadline)
	f.run(t, bindCmd(t, 900, bindingID, 1, 1, namespace), false)
	return f
}

// restart builds the executors again over the same records and cluster
// (a Runtime restart), with deadline as --progress-deadline.
func (f *appFixture) restart(t *testing.T, deadline time.Duration) {
	t.Helper()
	access := application.NewAccess(f.bindings, f.app, f.perms, fixedClock{now})
	exec := appservice.NewExecutor(access, f.app, jsonAppSpecs{}, f.records, f.fp,
		application.ExecutorConfig{DeletionWait: time.Second}, deadline)
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
}

func (f *appFixture) cmd(t *testing.T, op siteprotocol.Operation, payload any) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": "application", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": bindingID, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	b, _ := json.Marshal(c)
	return pending(t, b)
}

const appImage = "registry.example/app@sha256:2222222222222222222222222222222222222222222222222222222222222222"

func preparePayload(port int) map[string]any {
	return map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "application", "image": appImage, "port": port,
		"readiness": map[string]any{"path": "/healthz"}, "demand": map[string]int64{"cpu": 500, "memory": 256 << 20}}
}

func (f *appFixture) record(kind string) domain.NativeRecord {
	for _, r := range f.records.rows {
		if r.Kind == kind {
			return r
		}
	}
	return domain.NativeRecord{}
}

func (f *appFixture) live(kind string) (fakeObject, bool) {
	o, ok := f.native.objects[key(kind, namespace, domain.AttemptObjectName(attempt, ""))]
	return o, ok
}

// prepare renders the Deployment and the Service and saves both (phase
// prepared, service kind application) before answering, creating only the
// claim; its spec_digest is the saved Deployment's. Fakes: the API server
// and the permission provider.
func TestApplicationPrepareSavesTheRenderedSpecificationAndCreatesOnlyTheClaim(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	dep, svc := f.record(domain.KindDeployment), f.record(domain.KindService)
	if dep.Phase != domain.PhasePrepared || svc.Phase != domain.PhasePrepared || dep.ServiceKind != "application" || svc.ServiceKind != "application" || dep.UID != "" {
		t.Fatalf("records %+v %+v", dep, svc)
	}
	var spec application.ApplicationServiceSpec
	if err := json.Unmarshal(dep.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Image != appImage || spec.Port != 8080 || spec.ServiceAccount == "" || spec.ProgressDeadlineSeconds != 600 || spec.WorkspaceClaim != domain.AttemptObjectName(attempt, "-ws") {
		t.Fatalf("saved specification %+v", spec)
	}
	var detail siteprotocol.PrepareDetail
	_ = json.Unmarshal(r.Detail, &detail)
	if detail.SpecDigest != siteprotocol.Digest(dep.Spec) {
		t.Fatalf("spec_digest %s, the saved Deployment's %s", detail.SpecDigest, siteprotocol.Digest(dep.Spec))
	}
	if len(f.native.creates) != 1 {
		t.Fatalf("%d creates at prepare; only the claim", len(f.native.creates))
	}
}

// A second prepare of the Attempt (another command) is refused
// attempt-conflict whatever it asks, and changes no record; a replay of the
// first answers the same bytes.
func TestASecondPrepareOfTheAttemptCannotChangeItsSpecification(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	first := f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080))
	a := f.run(t, first, false)
	saved := f.record(domain.KindDeployment)
	for _, payload := range []map[string]any{preparePayload(9090), preparePayload(8080)} {
		r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, payload), false)
		expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	}
	if got := f.record(domain.KindDeployment); got.CommandID != saved.CommandID || string(got.Spec) != string(saved.Spec) {
		t.Fatal("a refused prepare changed the saved specification")
	}
	if again := f.run(t, first, true); again.Digest != a.Digest {
		t.Fatalf("the replayed prepare answered other bytes:\n%s\n%s", mustJSON(again), mustJSON(a))
	}
	// A record of another service kind refuses an application prepare.
	rec := f.record(domain.KindService)
	rec.ServiceKind = "inference"
	_ = f.records.SaveRecord(context.Background(), rec)
	r := f.run(t, first, true)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if !strings.Contains(r.Message, "inference") {
		t.Fatalf("message %q", r.Message)
	}
}

// start after a restart with another --progress-deadline creates exactly
// the saved specification, the Deployment and then the Service, and names
// both UIDs; observe, cancel follow.
func TestStartAfterARestartCreatesExactlyTheSavedSpecification(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	saved := f.record(domain.KindDeployment)
	f.restart(t, 30*time.Second)
	r := f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	dep, ok := f.live(domain.KindDeployment)
	if !ok || string(dep.spec) != string(saved.Spec) {
		t.Fatalf("created %s\nsaved   %s", dep.spec, saved.Spec)
	}
	svc, ok := f.live(domain.KindService)
	if !ok || len(r.NativeRefs) != 2 || r.NativeRefs[0].UID != dep.uid || r.NativeRefs[1].UID != svc.uid {
		t.Fatalf("refs %+v, live %s %s", r.NativeRefs, dep.uid, svc.uid)
	}
	f.native.observation = application.Observation{State: siteprotocol.StateHealthy}
	o := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	var od siteprotocol.ObserveDetail
	_ = json.Unmarshal(o.Detail, &od)
	if o.Reason != siteprotocol.ReasonObserved || od.State != siteprotocol.StateHealthy {
		t.Fatalf("observe %s %s", o.Reason, o.Detail)
	}
	c := f.run(t, f.cmd(t, siteprotocol.OpCancel, nil), false)
	expect(t, c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if _, ok := f.live(domain.KindDeployment); ok {
		t.Fatal("cancel left the Deployment")
	}
	if _, ok := f.live(domain.KindService); ok {
		t.Fatal("cancel left the Service")
	}
	if len(f.native.deletes) != 2 || f.native.deletes[0].UID != dep.uid || f.native.deletes[1].UID != svc.uid {
		t.Fatalf("deletes %+v", f.native.deletes)
	}
	gone := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	expect(t, gone, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
}

// The Service refused by a count quota after the Deployment exists: the
// Deployment is deleted by its UID and the start is refused
// native-request-denied with no native reference; a Runtime killed at the
// compensating delete finishes it on recovery with the same outcome.
func TestAServiceRefusedAfterTheDeploymentLeavesNothingAlsoWhenKilledAtTheCompensatingDelete(t *testing.T) {
	quota := fmt.Errorf("%w: services \"attempt-x\" is forbidden: exceeded quota: count, requested: count/services=1, used: count/services=1, limited: count/services=1", application.ErrNativeRequestDenied)
	for _, kill := range []string{"", application.FailAtCompensatingDelete, application.FailAfterNativeCall} {
		t.Run("kill at "+kill, func(t *testing.T) {
			f := newAppFixture(t, 600*time.Second)
			f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
			f.app.refuse[domain.KindService] = quota
			start := f.cmd(t, siteprotocol.OpStart, nil)
			var r siteprotocol.Result
			if kill == "" {
				r = f.run(t, start, false)
			} else {
				// after-native-call: the Deployment's create (1), then the compensating delete (2).
				f.fp.name, f.fp.n = kill, map[string]int{application.FailAtCompensatingDelete: 1, application.FailAfterNativeCall: 2}[kill]
				func() {
					defer func() {
						if k, ok := recover().(killed); !ok || k.name != kill {
							t.Fatalf("not killed at %s", kill)
						}
					}()
					f.run(t, start, false)
				}()
				f.fp.name = ""
				f.restart(t, 600*time.Second)
				r = f.run(t, start, true)
			}
			expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
			if len(r.NativeRefs) != 0 {
				t.Fatalf("a refused start names %+v", r.NativeRefs)
			}
			if _, ok := f.live(domain.KindDeployment); ok {
				t.Fatal("the Deployment of a refused start is left")
			}
			if _, ok := f.live(domain.KindService); ok {
				t.Fatal("a Service exists")
			}
			if dep := f.record(domain.KindDeployment); dep.Phase != domain.PhaseRemoved || dep.UID == "" {
				t.Fatalf("the Deployment's record %+v", dep)
			}
			if again := f.run(t, start, true); again.Outcome != r.Outcome || again.Reason != r.Reason {
				t.Fatal("recovery after the compensation answered otherwise")
			}
		})
	}
}

// A Service create whose answer was lost is adopted on recovery: the same
// result bytes as a clean start, no second create.
func TestAServiceCreateWhoseAnswerWasLostIsAdoptedWithTheSameBytes(t *testing.T) {
	clean := newAppFixture(t, 600*time.Second)
	clean.run(t, clean.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	want := clean.run(t, clean.cmd(t, siteprotocol.OpStart, nil), false)

	f := newAppFixture(t, 600*time.Second)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	start := f.cmd(t, siteprotocol.OpStart, nil)
	f.fp.name, f.fp.n = application.FailAfterNativeCall, 2 // after the Service create
	func() {
		defer func() {
			if _, ok := recover().(killed); !ok {
				t.Fatal("not killed after the Service create")
			}
		}()
		f.run(t, start, false)
	}()
	f.fp.name = ""
	f.restart(t, 600*time.Second)
	got := f.run(t, start, true)
	if got.Digest != want.Digest {
		t.Fatalf("recovered %s\nclean     %s", mustJSON(got), mustJSON(want))
	}
	if len(f.native.creates) != 3 { // claim, Deployment, Service
		t.Fatalf("%d creates", len(f.native.creates))
	}
}

// An object under the Deployment's name that is not the saved
// specification stops the worker (ErrUnexplained) and is not deleted.
func TestRecoveryOfAnApplicationStartStopsOnAForeignDeploymentAndDeletesNothing(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	f.native.objects[key(domain.KindDeployment, namespace, domain.AttemptObjectName(attempt, ""))] = fakeObject{uid: "someone-else", spec: []byte(`{}`)}
	_, err := f.reg.Recover(context.Background(), f.cmd(t, siteprotocol.OpStart, nil))
	if !errors.Is(err, application.ErrUnexplained) {
		t.Fatalf("want ErrUnexplained, got %v", err)
	}
	if len(f.native.deletes) != 0 {
		t.Fatal("recovery deleted something")
	}
}

// The Runtime's own checks of an application prepare payload.
func TestApplicationSpecOfRefusesWhatTheRuntimeCannotRender(t *testing.T) {
	good := siteprotocol.PreparePayload{ServiceKind: "application", Image: appImage, Port: 8080, Demand: map[string]int64{"cpu": 1, "memory": 1},
		Readiness: &siteprotocol.Readiness{Path: "/ready", PeriodSeconds: 5}}
	if _, err := application.ApplicationSpecOf(good); err != nil {
		t.Fatal(err)
	}
	for field, edit := range map[string]func(p *siteprotocol.PreparePayload){
		"service_kind":   func(p *siteprotocol.PreparePayload) { p.ServiceKind = "inference" },
		"image":          func(p *siteprotocol.PreparePayload) { p.Image = "registry.example/app:latest" },
		"port":           func(p *siteprotocol.PreparePayload) { p.Port = 70000 },
		"readiness.path": func(p *siteprotocol.PreparePayload) { p.Readiness = &siteprotocol.Readiness{Path: "ready"} },
		"initial_delay": func(p *siteprotocol.PreparePayload) {
			p.Readiness = &siteprotocol.Readiness{Path: "/", InitialDelaySeconds: -1}
		},
		"demand": func(p *siteprotocol.PreparePayload) { p.Demand = map[string]int64{"cpu": 1} },
	} {
		p := good
		edit(&p)
		if _, err := application.ApplicationSpecOf(p); err == nil || !strings.Contains(err.Error(), strings.Split(field, ".")[0]) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// A prepare refused for its demand (a GPU the Site has no resource for)
// creates nothing — no workspace claim, no record — so a corrected
// prepare of the Attempt succeeds. Fakes: the API server and the
// permission provider.
func TestAPrepareRefusedForItsDemandCreatesNothing(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	bad := preparePayload(8080)
	bad["demand"] = map[string]int64{"cpu": 1, "memory": 1, "gpu.amd": 1}
	r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, bad), false)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload)
	if len(f.native.creates) != 0 || len(f.records.rows) != 0 {
		t.Fatalf("a refused prepare left %d creates and records %+v", len(f.native.creates), f.records.rows)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
}

// After start (A) and cancel (B), another start (C) is attempt-conflict
// saying the Deployment was created and is removed, naming neither
// command: a refusal names no other command, which may be another
// member's (docs/site-runtime.md#one-lifecycle-for-every-family).
func TestAStartAfterACancelSaysTheDeploymentWasRemoved(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	start := f.cmd(t, siteprotocol.OpStart, nil)
	expect(t, f.run(t, start, false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	cancel := f.cmd(t, siteprotocol.OpCancel, nil)
	expect(t, f.run(t, cancel, false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	creates := len(f.native.creates)
	r := f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if !strings.Contains(r.Message, "removed") || strings.Contains(r.Message, cancel.Command.ID) || strings.Contains(r.Message, start.Command.ID) {
		t.Fatalf("message %q does not say the Deployment was removed, or names a command", r.Message)
	}
	if len(f.native.creates) != creates {
		t.Fatal("a refused start created something")
	}
}

// An application start makes one access check (one permission query) for
// its two creates, and both creates act as the identity it returned; the
// prepare makes its own. The provider is a fake (outside this project).
func TestAnApplicationStartChecksAccessOnceForBothCreates(t *testing.T) {
	f := newAppFixture(t, 600*time.Second)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false)
	before := len(f.perms.queries)
	r := f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if got := len(f.perms.queries) - before; got != 1 {
		t.Fatalf("the start asked the permission provider %d times, want once", got)
	}
	if len(r.NativeRefs) != 2 {
		t.Fatalf("refs %+v", r.NativeRefs)
	}
}
