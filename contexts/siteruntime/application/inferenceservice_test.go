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
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

const servingRuntime = "kserve-huggingfaceserver"

// isvcNative is fakeNative (the Kubernetes API server's stand-in) with the
// inference family's observer.
type isvcNative struct{ *fakeNative }

func (a *isvcNative) ObserveInferenceService(_ context.Context, ref siteprotocol.NativeRef) (application.Observation, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.objects[key(ref.Kind, ref.Namespace, ref.Name)]
	if !ok || o.uid != ref.UID {
		return application.Observation{}, false, nil
	}
	return a.observation, true, nil
}

// jsonIsvcSpecs renders the InferenceService as the JSON of its input
// (deterministic), the workspace claim as jsonSpecs does.
type jsonIsvcSpecs struct{ jsonSpecs }

func (jsonIsvcSpecs) RenderInferenceService(s application.InferenceServiceSpec) (application.NativeObject, error) {
	if s.Demand["gpu.amd"] > 0 {
		return application.NativeObject{}, fmt.Errorf("%w: gpu.amd", application.ErrUnsupportedDemand)
	}
	b, _ := json.Marshal(s)
	return application.NativeObject{Kind: domain.KindInferenceService, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, ""), Spec: b}, nil
}

type isvcFixture struct {
	*appFixture
	isvc *isvcNative
	// runtimes are the Site's serving runtimes by model format
	// (--serving-runtimes; huggingface on servingRuntime when nil).
	runtimes map[string]string
}

func newIsvcFixture(t *testing.T) *isvcFixture {
	t.Helper()
	a := newAppFixture(t, 600*time.Second)
	f := &isvcFixture{appFixture: a, isvc: &isvcNative{fakeNative: a.native}}
	f.restart(t)
	return f
}

// restart builds the inference executors again over the same records and
// cluster (a Runtime restart).
func (f *isvcFixture) restart(t *testing.T) {
	t.Helper()
	access := application.NewAccess(f.bindings, f.isvc, f.perms, fixedClock{now})
	runtimes := f.runtimes
	if runtimes == nil {
		runtimes = map[string]string{"huggingface": servingRuntime}
	}
	exec, err := inference.NewExecutor(access, f.isvc, jsonIsvcSpecs{}, f.records, f.fp,
		application.ExecutorConfig{DeletionWait: time.Second}, inference.Config{ServingRuntimes: runtimes})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
}

func (f *isvcFixture) cmd(t *testing.T, op siteprotocol.Operation, payload any) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": "inference", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": bindingID, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	b, _ := json.Marshal(c)
	return pending(t, b)
}

var modelArgs = []string{"--model_id=hf-internal-testing/tiny-random-BertForSequenceClassification", "--task=sequence_classification"}

func inferencePayload(runtime string) map[string]any {
	model := map[string]any{"format": "huggingface", "args": modelArgs}
	if runtime != "" {
		model["runtime"] = runtime
	}
	return map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "inference", "model": model, "port": 8080,
		"demand": map[string]int64{"cpu": 1000, "memory": 2 << 30}}
}

func (f *isvcFixture) savedSpec(t *testing.T) application.InferenceServiceSpec {
	t.Helper()
	var s application.InferenceServiceSpec
	if err := json.Unmarshal(f.record(domain.KindInferenceService).Spec, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// prepare renders the InferenceService on the pinned runtime and saves it
// (phase prepared, service kind inference, mode Standard) before
// answering, creating only the claim; its spec_digest is the saved
// InferenceService's. Fakes: the API server and the permission provider.
func TestInferencePrepareSavesTheRenderedSpecificationOnThePinnedRuntime(t *testing.T) {
	for _, runtime := range []string{"", servingRuntime} {
		f := newIsvcFixture(t)
		r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload(runtime)), false)
		expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
		rec := f.record(domain.KindInferenceService)
		if rec.Phase != domain.PhasePrepared || rec.ServiceKind != "inference" || rec.UID != "" {
			t.Fatalf("record %+v", rec)
		}
		s := f.savedSpec(t)
		if s.Runtime != servingRuntime || s.DeploymentMode != application.DeploymentModeStandard || s.ModelFormat != "huggingface" ||
			strings.Join(s.Args, " ") != strings.Join(modelArgs, " ") || s.ServiceAccount == "" || s.WorkspaceClaim != domain.AttemptObjectName(attempt, "-ws") {
			t.Fatalf("saved specification %+v", s)
		}
		var detail siteprotocol.PrepareDetail
		_ = json.Unmarshal(r.Detail, &detail)
		if detail.SpecDigest != siteprotocol.Digest(rec.Spec) {
			t.Fatalf("spec_digest %s, the saved InferenceService's %s", detail.SpecDigest, siteprotocol.Digest(rec.Spec))
		}
		if len(f.native.creates) != 1 {
			t.Fatalf("%d creates at prepare; only the claim", len(f.native.creates))
		}
	}
}

// A prepare naming another serving runtime than the Site pins for its
// format, a model format the Site does not serve, or a demand the Site
// cannot render, is refused invalid-payload and creates nothing.
func TestAnInferencePrepareNamingAnotherRuntimeIsRefusedAndCreatesNothing(t *testing.T) {
	f := newIsvcFixture(t)
	gpu := inferencePayload("")
	gpu["demand"] = map[string]int64{"cpu": 1, "memory": 1, "gpu.amd": 1}
	unserved := inferencePayload("")
	unserved["model"] = map[string]any{"format": "sklearn", "args": []string{"--model_dir=/workspace/iris"}}
	for _, p := range []map[string]any{inferencePayload("kserve-sklearnserver"), gpu, unserved} {
		r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, p), false)
		expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload)
	}
	if len(f.native.creates) != 0 || len(f.records.rows) != 0 {
		t.Fatalf("a refused prepare left %d creates and records %+v", len(f.native.creates), f.records.rows)
	}
	if _, err := inference.NewExecutor(nil, f.isvc, jsonIsvcSpecs{}, f.records, nil, application.ExecutorConfig{}, inference.Config{}); err == nil {
		t.Fatal("an inference executor without a pinned serving runtime was built")
	}
}

// An Attempt prepared on a runtime the Site has since retired (the
// Runtime restarted with --serving-runtimes no longer serving the format)
// starts on the runtime its saved specification names: start creates
// exactly what prepare saved; a new prepare of that format is refused
// invalid-payload and creates nothing
// (docs/site-runtime.md#inference-services-on-kserve).
func TestAnAttemptPreparedOnARetiredRuntimeStartsOnItsSavedRuntime(t *testing.T) {
	f := newIsvcFixture(t)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	saved := f.record(domain.KindInferenceService)
	f.runtimes = map[string]string{"sklearn": "sklearn-runtime"}
	f.restart(t)
	r := f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	isvc, ok := f.live(domain.KindInferenceService)
	var created application.InferenceServiceSpec
	_ = json.Unmarshal(isvc.spec, &created)
	if !ok || string(isvc.spec) != string(saved.Spec) || created.Runtime != servingRuntime {
		t.Fatalf("created %s (runtime %q)\nsaved   %s", isvc.spec, created.Runtime, saved.Spec)
	}

	other := newIsvcFixture(t)
	other.runtimes = map[string]string{"sklearn": "sklearn-runtime"}
	other.restart(t)
	expect(t, other.run(t, other.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload)
	if len(other.native.creates) != 0 || len(other.records.rows) != 0 {
		t.Fatalf("a refused prepare left %d creates and records %+v", len(other.native.creates), other.records.rows)
	}
}

// start creates exactly the saved specification as the member and names
// its UID; observe reports the observer's state with its exit code;
// cancel deletes it by UID; observe then says native-missing.
func TestInferenceStartObserveCancelOnTheSharedLifecycle(t *testing.T) {
	f := newIsvcFixture(t)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	saved := f.record(domain.KindInferenceService)
	f.restart(t)
	r := f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	isvc, ok := f.live(domain.KindInferenceService)
	if !ok || string(isvc.spec) != string(saved.Spec) || len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != isvc.uid {
		t.Fatalf("created %s (refs %+v)\nsaved   %s", isvc.spec, r.NativeRefs, saved.Spec)
	}
	if len(f.native.creates) != 2 || f.native.creates[1].Account != "member-"+member {
		t.Fatalf("creates %+v", f.native.creates)
	}
	code := int32(1)
	f.native.observation = application.Observation{State: siteprotocol.StateFailed, Reason: "ModelLoadFailed", Message: "exit 1", ExitCode: &code}
	o := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	var od siteprotocol.ObserveDetail
	_ = json.Unmarshal(o.Detail, &od)
	if o.Reason != siteprotocol.ReasonObserved || od.State != siteprotocol.StateFailed || od.Reason != "ModelLoadFailed" || od.ExitCode == nil || *od.ExitCode != 1 {
		t.Fatalf("observe %s %s", o.Reason, o.Detail)
	}
	c := f.run(t, f.cmd(t, siteprotocol.OpCancel, nil), false)
	expect(t, c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if _, ok := f.live(domain.KindInferenceService); ok || len(f.native.deletes) != 1 || f.native.deletes[0].UID != isvc.uid {
		t.Fatalf("cancel: deletes %+v", f.native.deletes)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
	cl := f.run(t, f.cmd(t, siteprotocol.OpCleanup, nil), false)
	expect(t, cl, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if _, ok := f.native.objects[key(domain.KindWorkspace, namespace, domain.AttemptObjectName(attempt, "-ws"))]; ok {
		t.Fatal("cleanup left the claim")
	}
}

// An InferenceService create whose answer was lost (the Runtime killed
// after the create returned, before its record) is adopted on recovery:
// the same result bytes as a clean start, no second create.
func TestAnInferenceServiceCreateWhoseResultWasNotSavedIsAdoptedWithTheSameBytes(t *testing.T) {
	clean := newIsvcFixture(t)
	clean.run(t, clean.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	want := clean.run(t, clean.cmd(t, siteprotocol.OpStart, nil), false)

	f := newIsvcFixture(t)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	start := f.cmd(t, siteprotocol.OpStart, nil)
	f.fp.name, f.fp.n = application.FailAfterNativeCall, 1
	func() {
		defer func() {
			if _, ok := recover().(killed); !ok {
				t.Fatal("not killed after the InferenceService create")
			}
		}()
		f.run(t, start, false)
	}()
	f.fp.name = ""
	f.restart(t)
	got := f.run(t, start, true)
	if got.Digest != want.Digest {
		t.Fatalf("recovered %s\nclean     %s", mustJSON(got), mustJSON(want))
	}
	if len(f.native.creates) != 2 { // claim, InferenceService
		t.Fatalf("%d creates", len(f.native.creates))
	}
}

// A saved legacy record (deployment mode RawDeployment, as history wrote
// it) is created and compared as saved: the mode is never rewritten.
func TestALegacyRawDeploymentRecordIsStartedAndComparedAsSaved(t *testing.T) {
	f := newIsvcFixture(t)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	rec := f.record(domain.KindInferenceService)
	s := f.savedSpec(t)
	s.DeploymentMode = application.DeploymentModeRawDeployment
	rec.Spec, _ = json.Marshal(s)
	_ = f.records.SaveRecord(context.Background(), rec)
	f.restart(t)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	live, _ := f.live(domain.KindInferenceService)
	if string(live.spec) != string(rec.Spec) || !strings.Contains(string(f.record(domain.KindInferenceService).Spec), application.DeploymentModeRawDeployment) {
		t.Fatalf("the legacy record was not created as saved: %s", live.spec)
	}
}

// Recovery finds an InferenceService of the name that is not the saved
// specification: the worker stops (ErrUnexplained) and nothing is deleted.
func TestRecoveryOfAnInferenceStartStopsOnAnotherInferenceServiceAndDeletesNothing(t *testing.T) {
	f := newIsvcFixture(t)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	f.native.objects[key(domain.KindInferenceService, namespace, domain.AttemptObjectName(attempt, ""))] = fakeObject{uid: "someone-else", spec: []byte(`{}`)}
	_, err := f.reg.Recover(context.Background(), f.cmd(t, siteprotocol.OpStart, nil))
	if !errors.Is(err, application.ErrUnexplained) {
		t.Fatalf("want ErrUnexplained, got %v", err)
	}
	if len(f.native.deletes) != 0 {
		t.Fatal("recovery deleted something")
	}
}

// A cancel whose InferenceService is not gone within the deletion wait (a
// finalizer KServe cannot remove) answers failed / deletion-pending with
// the state it is in; nothing else is done to it.
func TestAnInferenceServiceThatHangsInDeletionIsDeletionPending(t *testing.T) {
	f := newIsvcFixture(t)
	f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	f.run(t, f.cmd(t, siteprotocol.OpStart, nil), false)
	f.native.neverGone = true
	f.native.observation = application.Observation{State: siteprotocol.StateHealthy}
	r := f.run(t, f.cmd(t, siteprotocol.OpCancel, nil), false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeletionPending)
	var d siteprotocol.CancelDetail
	_ = json.Unmarshal(r.Detail, &d)
	if d.State != siteprotocol.StateHealthy || len(f.native.deletes) != 1 {
		t.Fatalf("detail %s, deletes %+v", r.Detail, f.native.deletes)
	}
}

// The families stay apart: an inference prepare of an Attempt prepared as
// an application service is attempt-conflict, and changes nothing.
func TestAnInferencePrepareOfAnApplicationAttemptIsAttemptConflict(t *testing.T) {
	f := newIsvcFixture(t)
	app := f.appFixture
	app.restart(t, 600*time.Second)
	expect(t, app.run(t, app.cmd(t, siteprotocol.OpPrepare, preparePayload(8080)), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	rows := len(f.records.rows)
	f.restart(t)
	r := f.run(t, f.cmd(t, siteprotocol.OpPrepare, inferencePayload("")), false)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if len(f.records.rows) != rows {
		t.Fatal("a refused prepare changed the records")
	}
}

// The Runtime's own checks of an inference prepare payload.
func TestInferenceSpecOfRefusesWhatTheRuntimeCannotRender(t *testing.T) {
	good := siteprotocol.PreparePayload{ServiceKind: "inference", Model: &siteprotocol.ModelSpec{Format: "huggingface", Args: modelArgs}, Port: 8080,
		Demand: map[string]int64{"cpu": 1, "memory": 1}}
	runtimes := map[string]string{"huggingface": servingRuntime, "sklearn": "sklearn-runtime"}
	if s, err := application.InferenceSpecOf(good, runtimes); err != nil || s.Runtime != servingRuntime {
		t.Fatal(s.Runtime, err)
	}
	sk := good
	sk.Model = &siteprotocol.ModelSpec{Format: "sklearn", Runtime: "sklearn-runtime", Args: []string{"--model_dir=/workspace/m"}}
	if s, err := application.InferenceSpecOf(sk, runtimes); err != nil || s.Runtime != "sklearn-runtime" || s.ModelFormat != "sklearn" {
		t.Fatal(s.Runtime, err)
	}
	for field, edit := range map[string]func(p *siteprotocol.PreparePayload){
		"service_kind": func(p *siteprotocol.PreparePayload) { p.ServiceKind = "application" },
		"model.format": func(p *siteprotocol.PreparePayload) { p.Model = &siteprotocol.ModelSpec{Args: modelArgs} },
		"model.format: \"onnx\" is not a model format this Site serves (it serves huggingface, sklearn)": func(p *siteprotocol.PreparePayload) {
			p.Model = &siteprotocol.ModelSpec{Format: "onnx", Args: modelArgs}
		},
		"model.runtime: \"" + servingRuntime + "\" is not the serving runtime this Site pins for format \"sklearn\"": func(p *siteprotocol.PreparePayload) {
			p.Model = &siteprotocol.ModelSpec{Format: "sklearn", Runtime: servingRuntime, Args: modelArgs}
		},
		"model.runtime": func(p *siteprotocol.PreparePayload) {
			p.Model = &siteprotocol.ModelSpec{Format: "huggingface", Runtime: "other", Args: modelArgs}
		},
		"model.args": func(p *siteprotocol.PreparePayload) {
			p.Model = &siteprotocol.ModelSpec{Format: "huggingface", Args: []string{"--a", ""}}
		},
		"demand": func(p *siteprotocol.PreparePayload) { p.Demand = map[string]int64{"cpu": 1} },
	} {
		p := good
		edit(&p)
		if _, err := application.InferenceSpecOf(p, runtimes); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}
