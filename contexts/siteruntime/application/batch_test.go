package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// memRecords is an in-memory BatchRecords.
type memRecords struct {
	mu   sync.Mutex
	rows map[string]domain.NativeRecord
}

func (m *memRecords) SaveRecord(_ context.Context, r domain.NativeRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[r.AttemptID+"/"+r.Kind+"/"+r.Name] = r
	return nil
}

func (m *memRecords) Records(_ context.Context, attempt string) ([]domain.NativeRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []domain.NativeRecord
	for _, r := range m.rows {
		if r.AttemptID == attempt {
			out = append(out, r)
		}
	}
	return out, nil
}

// fakeNative stands in for the Kubernetes API server (outside the
// application layer): objects by kind/namespace/name, with failures and
// hooks a test sets.
type fakeNative struct {
	mu          sync.Mutex
	project     string
	objects     map[string]fakeObject
	uids        int
	creates     []domain.StartIdentity
	deletes     []siteprotocol.NativeRef
	createErr   error // returned by the next Create (after creating, when createLost)
	createLost  bool  // the create happens but its answer is lost
	neverGone   bool  // WaitGone blocks until its context ends
	nsRead      int
	observation application.Observation
	accounts    map[string]string // namespace/account → the live account's UID ("": the account is gone)
	// onCreate sees every object created; createdKinds lists their kinds.
	onCreate     func(application.NativeObject)
	createdKinds []string
}

type fakeObject struct {
	uid      string
	spec     []byte
	deleting bool
}

func newFakeNative() *fakeNative {
	return &fakeNative{project: project, objects: map[string]fakeObject{}}
}

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// MemberAccountUID answers from f.accounts (namespace/account → UID); an
// account not listed exists with no UID known to the fake.
func (f *fakeNative) MemberAccountUID(_ context.Context, namespace, account string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	uid, ok := f.accounts[namespace+"/"+account]
	if !ok {
		return "", true, nil
	}
	return uid, uid != "", nil
}

func (f *fakeNative) NamespaceProject(context.Context, string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nsRead++
	return f.project, f.project != "", nil
}

func (f *fakeNative) Create(_ context.Context, as domain.StartIdentity, obj application.NativeObject) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := key(obj.Kind, obj.Namespace, obj.Name)
	if _, ok := f.objects[k]; ok {
		return "", fmt.Errorf("%w: %s", application.ErrNativeExists, k)
	}
	if f.createErr != nil && !f.createLost {
		err := f.createErr
		f.createErr = nil
		return "", err
	}
	f.uids++
	uid := fmt.Sprintf("uid-%d", f.uids)
	f.objects[k] = fakeObject{uid: uid, spec: obj.Spec}
	f.creates = append(f.creates, as)
	f.createdKinds = append(f.createdKinds, obj.Kind)
	if f.onCreate != nil {
		f.onCreate(obj)
	}
	if f.createLost {
		f.createLost = false
		err := f.createErr
		f.createErr = nil
		return "", err
	}
	return uid, nil
}

func (f *fakeNative) Lookup(_ context.Context, obj application.NativeObject) (application.LiveObject, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key(obj.Kind, obj.Namespace, obj.Name)]
	if !ok {
		return application.LiveObject{}, false, nil
	}
	live := application.LiveObject{UID: o.uid, Deleting: o.deleting}
	if string(o.spec) != string(obj.Spec) {
		live.Mismatch = "spec differs"
	}
	return live, true, nil
}

func (f *fakeNative) Delete(_ context.Context, ref siteprotocol.NativeRef) (application.DeleteOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, ref)
	k := key(ref.Kind, ref.Namespace, ref.Name)
	o, ok := f.objects[k]
	switch {
	case !ok:
		return application.DeleteOutcome{Gone: true}, nil
	case o.uid != ref.UID:
		foreign := ref
		foreign.UID = o.uid
		return application.DeleteOutcome{Gone: true, Foreign: &foreign}, nil
	case f.neverGone:
		o.deleting = true
		f.objects[k] = o
		return application.DeleteOutcome{}, nil
	}
	delete(f.objects, k)
	return application.DeleteOutcome{Gone: true}, nil
}

func (f *fakeNative) WaitGone(ctx context.Context, ref siteprotocol.NativeRef) (application.DeleteOutcome, error) {
	f.mu.Lock()
	never := f.neverGone
	f.mu.Unlock()
	if never {
		<-ctx.Done()
		return application.DeleteOutcome{}, ctx.Err()
	}
	return application.DeleteOutcome{Gone: true}, nil
}

func (f *fakeNative) ObserveJob(_ context.Context, ref siteprotocol.NativeRef) (application.Observation, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key(ref.Kind, ref.Namespace, ref.Name)]
	if !ok || o.uid != ref.UID {
		return application.Observation{}, false, nil
	}
	return f.observation, true, nil
}

// jsonSpecs renders objects as the JSON of their input (deterministic).
type jsonSpecs struct{}

func (jsonSpecs) RenderWorkspace(s application.WorkspaceSpec) (application.NativeObject, error) {
	b, _ := json.Marshal(s)
	return application.NativeObject{Kind: domain.KindWorkspace, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixWorkspace), Spec: b}, nil
}

func (jsonSpecs) Identity(spec []byte) (application.ObjectIdentity, error) {
	var s application.WorkspaceSpec
	err := json.Unmarshal(spec, &s)
	return s.Identity, err
}

func (jsonSpecs) RenderJob(s application.BatchJobSpec) (application.NativeObject, error) {
	if s.Demand["gpu.amd"] > 0 {
		return application.NativeObject{}, fmt.Errorf("%w: gpu.amd", application.ErrUnsupportedDemand)
	}
	b, _ := json.Marshal(s)
	return application.NativeObject{Kind: domain.KindJob, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, ""), Spec: b}, nil
}

type pinned struct{}

func (pinned) BatchImage() string { return "registry.example/batch@sha256:" + fmt.Sprintf("%064d", 0) }

// fakePermissions stands in for the permission provider (outside this
// project).
type fakePermissions struct {
	mu      sync.Mutex
	answer  domain.Permission
	err     error
	queries []domain.PermissionQuery
}

func (p *fakePermissions) Check(_ context.Context, q domain.PermissionQuery) (domain.Permission, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queries = append(p.queries, q)
	return p.answer, p.err
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var now = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

const (
	bindingID = "e41f0000-0000-4000-8000-000000000001"
	attempt   = "7d1f0000-0000-4000-8000-000000000001"
	namespace = "project-a"
)

type batchFixture struct {
	native   *fakeNative
	perms    *fakePermissions
	records  *memRecords
	bindings *memBindings
	reg      *application.Registry
	n        int
}

func newBatchFixture(t *testing.T, wait time.Duration) *batchFixture {
	t.Helper()
	f := &batchFixture{
		native:   newFakeNative(),
		perms:    &fakePermissions{answer: domain.Permission{Allowed: true, EvidenceID: "ev-1", ValidUntil: now.Add(time.Minute)}},
		records:  &memRecords{rows: map[string]domain.NativeRecord{}},
		bindings: &memBindings{rows: map[string]map[int64]domain.MemberBinding{}},
	}
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	exec := batch.NewExecutor(access, f.native, jsonSpecs{}, pinned{}, f.records, nil, application.ExecutorConfig{DeletionWait: wait})
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	f.run(t, bindCmd(t, 900, bindingID, 1, 1, namespace), false)
	return f
}

// cmd builds a batch command of the fixture's Attempt.
func (f *batchFixture) cmd(t *testing.T, op siteprotocol.Operation, payload any) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": "batch", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": bindingID, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	b, _ := json.Marshal(c)
	return pending(t, b)
}

func (f *batchFixture) run(t *testing.T, p *domain.Pending, recovering bool) siteprotocol.Result {
	t.Helper()
	return f.runIn(t, context.Background(), p, recovering)
}

// runIn is run with ctx (application.WithCommandStart: as the worker
// passes the command's saved start).
func (f *batchFixture) runIn(t *testing.T, ctx context.Context, p *domain.Pending, recovering bool) siteprotocol.Result {
	t.Helper()
	var a domain.Answer
	var err error
	if recovering {
		a, err = f.reg.Recover(ctx, p)
	} else {
		a, err = f.reg.Execute(ctx, p)
	}
	if err != nil {
		t.Fatalf("%s: %v", p.Command.Operation, err)
	}
	r, _, err := siteprotocol.NewResult(p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var startBody = map[string]any{"demand": map[string]int64{"cpu": 1000, "memory": 1 << 30}, "time_limit_seconds": 60, "argv": []string{"true"}}

func (f *batchFixture) prepared(t *testing.T) {
	t.Helper()
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20}), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
}

func expect(t *testing.T, r siteprotocol.Result, o siteprotocol.Outcome, reason siteprotocol.Reason) {
	t.Helper()
	if r.Outcome != o || r.Reason != reason {
		t.Fatalf("want %s/%s, got %s/%s: %s", o, reason, r.Outcome, r.Reason, r.Message)
	}
}

func TestAStartWhoseCreateAnswerWasLostIsAdoptedWithTheSameResultBytes(t *testing.T) {
	// Reference: a clean create of the same command.
	ref := newBatchFixture(t, time.Second)
	ref.prepared(t)
	clean := ref.run(t, ref.cmd(t, siteprotocol.OpStart, startBody), false)

	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	p := f.cmd(t, siteprotocol.OpStart, startBody)
	f.native.createLost, f.native.createErr = true, errors.New("connection reset")
	if _, err := f.reg.Execute(context.Background(), p); err == nil {
		t.Fatal("a lost create answer must leave the effect uncertain (an error)")
	}
	recovered := f.run(t, p, true)
	if recovered.Digest != clean.Digest {
		t.Fatalf("recovered %s\nclean     %s", mustJSON(recovered), mustJSON(clean))
	}
	if len(f.native.creates) != 2 { // the claim and the Job
		t.Fatalf("%d Job creates; recovery must adopt, not create again", len(f.native.creates)-1)
	}
	if again := f.run(t, p, true); again.Digest != clean.Digest {
		t.Fatal("a second recovery answered other bytes")
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestRecoveryStopsOnAnObjectUnderTheNameThatDiffersAndDeletesNothing(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	p := f.cmd(t, siteprotocol.OpStart, startBody)
	obj, _ := jsonSpecs{}.RenderJob(application.BatchJobSpec{Identity: application.IdentityOf(p.Command), Namespace: namespace})
	f.native.objects[key(obj.Kind, obj.Namespace, obj.Name)] = fakeObject{uid: "someone-else", spec: []byte(`{"other":true}`)}
	_, err := f.reg.Recover(context.Background(), p)
	if !errors.Is(err, application.ErrUnexplained) {
		t.Fatalf("want ErrUnexplained, got %v", err)
	}
	if len(f.native.deletes) != 0 || len(f.native.creates) != 1 { // the claim only
		t.Fatalf("recovery touched native state: %d deletes, %d Job creates", len(f.native.deletes), len(f.native.creates)-1)
	}
	// The same on a fresh Execute that finds the name taken.
	if _, err := f.reg.Execute(context.Background(), p); !errors.Is(err, application.ErrUnexplained) {
		t.Fatalf("execute over a foreign object: want ErrUnexplained, got %v", err)
	}
}

func TestARefusedCreateIsNativeRequestDeniedWithNoReferenceAndMayBeTriedAgain(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	f.native.createErr = fmt.Errorf("%w: exceeded quota: count/jobs.batch", application.ErrNativeRequestDenied)
	r := f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
	if len(r.NativeRefs) != 0 {
		t.Fatalf("refusal names %v", r.NativeRefs)
	}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotStarted)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
}

func TestAccessRefusalsComeInOrderAndCreateNothing(t *testing.T) {
	cases := []struct {
		name   string
		change func(f *batchFixture)
		reason siteprotocol.Reason
		nsRead bool
		asked  bool
	}{
		{"retired binding", func(f *batchFixture) {
			f.run(t, retireCmd(t, 950, bindingID, 1), false)
		}, siteprotocol.ReasonBindingRetired, false, false},
		{"namespace of another Project", func(f *batchFixture) { f.native.project = uuidN(77) }, siteprotocol.ReasonProjectMismatch, true, false},
		// The account recreated under the same name: another UID than the
		// binding's (docs/site-protocol.md#the-accounts-uid-in-a-binding).
		{"account recreated", func(f *batchFixture) { f.accountUIDs("uid-applied", "uid-recreated") }, siteprotocol.ReasonBindingConflict, true, false},
		{"account gone", func(f *batchFixture) { f.accountUIDs("uid-applied", "") }, siteprotocol.ReasonBindingConflict, true, false},
		{"unlabelled namespace", func(f *batchFixture) { f.native.project = "" }, siteprotocol.ReasonProjectMismatch, true, false},
		{"denied", func(f *batchFixture) { f.perms.answer.Allowed = false }, siteprotocol.ReasonPermissionDenied, true, true},
		{"expired answer", func(f *batchFixture) { f.perms.answer.ValidUntil = now }, siteprotocol.ReasonPermissionUnavailable, true, true},
		{"provider unavailable", func(f *batchFixture) {
			f.perms.err = fmt.Errorf("%w: timeout", application.ErrPermissionUnavailable)
		}, siteprotocol.ReasonPermissionUnavailable, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newBatchFixture(t, time.Second)
			f.prepared(t)
			reads, asks := f.native.nsRead, len(f.perms.queries)
			c.change(f)
			expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeRefused, c.reason)
			if len(f.native.creates) != 1 { // the prepare's claim only
				t.Fatalf("%d creates; a refused start creates nothing", len(f.native.creates)-1)
			}
			if (f.native.nsRead > reads) != c.nsRead || (len(f.perms.queries) > asks) != c.asked {
				t.Fatalf("namespace read %v, provider asked %v; want %v, %v", f.native.nsRead > reads, len(f.perms.queries) > asks, c.nsRead, c.asked)
			}
		})
	}
}

func TestAStartWithoutAWorkspaceIsNotPreparedAndAnUnknownGPUIsInvalid(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotPrepared)
	f.prepared(t)
	gpu := map[string]any{"demand": map[string]int64{"cpu": 1000, "memory": 1 << 30, "gpu.amd": 1}, "time_limit_seconds": 60, "argv": []string{"true"}}
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, gpu), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload)
}

func TestASecondStartOfAnAttemptIsAnAttemptConflict(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
}

func TestAStartNamingAnotherRunThanItsPrepareCannotUseTheWorkspace(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	other := f.cmd(t, siteprotocol.OpStart, startBody)
	var c map[string]any
	if err := json.Unmarshal(other.Raw, &c); err != nil {
		t.Fatal(err)
	}
	delete(c, "sequence")
	delete(c, "digest")
	c["run_id"] = uuidN(501)
	b, _ := json.Marshal(c)
	creates := len(f.native.creates)
	expect(t, f.run(t, pending(t, b), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
	if n := len(f.native.creates) - creates; n != 0 {
		t.Fatalf("%d objects created", n)
	}
}

func TestCancelListsAForeignObjectAndARecoveredCancelAnswersTheSame(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	start := f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false)
	job := start.NativeRefs[0]
	f.native.objects[key(job.Kind, job.Namespace, job.Name)] = fakeObject{uid: "recreated"}
	p := f.cmd(t, siteprotocol.OpCancel, nil)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	var d siteprotocol.CancelDetail
	_ = json.Unmarshal(r.Detail, &d)
	if len(d.ForeignObjects) != 1 || d.ForeignObjects[0].UID != "recreated" {
		t.Fatalf("foreign objects %+v", d.ForeignObjects)
	}
	if _, still := f.native.objects[key(job.Kind, job.Namespace, job.Name)]; !still {
		t.Fatal("the foreign object was deleted")
	}
	// Recovering the cancel (its record says removed) answers the removed Job again.
	if again := f.run(t, p, true); len(again.NativeRefs) != 1 || again.NativeRefs[0].UID != job.UID {
		t.Fatalf("recovered cancel %s", mustJSON(again))
	}
}

func TestCancelOfAnObjectThatIsNeverGoneIsDeletionPendingAfterTheBound(t *testing.T) {
	f := newBatchFixture(t, 50*time.Millisecond)
	f.prepared(t)
	f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false)
	f.native.neverGone = true
	f.native.observation = application.Observation{State: siteprotocol.StateRunning}
	r := f.run(t, f.cmd(t, siteprotocol.OpCancel, nil), false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeletionPending)
	f.native.neverGone = false
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpCleanup, nil), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
}

func TestObserveReportsTheNativeStateAndNativeMissingOnceGone(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	start := f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false)
	code := int32(143)
	f.native.observation = application.Observation{State: siteprotocol.StateFailed, Reason: "DeadlineExceeded", ExitCode: &code}
	r := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	if d, _ := siteprotocol.DecodeDetail[siteprotocol.ObserveDetail](r); d.State != siteprotocol.StateFailed || d.Reason != "DeadlineExceeded" ||
		d.ExitCode == nil || *d.ExitCode != 143 || !strings.Contains(string(r.Detail), `"exit_code":143`) {
		t.Fatalf("observe detail %s", r.Detail)
	}
	// Running: nothing terminated, no exit code in the detail.
	f.native.observation = application.Observation{State: siteprotocol.StateRunning}
	if running := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false); strings.Contains(string(running.Detail), "exit_code") {
		t.Fatalf("a running Attempt reports an exit code: %s", running.Detail)
	}
	job := start.NativeRefs[0]
	delete(f.native.objects, key(job.Kind, job.Namespace, job.Name))
	gone := f.run(t, f.cmd(t, siteprotocol.OpObserve, nil), false)
	expect(t, gone, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
}

// A cancel of a Job removed out of band (a TTL, a policy, an operator)
// cannot tell who removed it: Execute and Recover answer the same bytes,
// deleted with state missing, and the message says the Job is gone — the
// same message as a cancel whose own delete removed it — never that the
// Runtime deleted it (docs/site-runtime.md#cancel-and-cleanup).
func TestACancelOfAJobRemovedOutOfBandSaysItIsGoneWhoeverRemovedIt(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	job := f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false).NativeRefs[0]
	delete(f.native.objects, key(job.Kind, job.Namespace, job.Name))
	p := f.cmd(t, siteprotocol.OpCancel, nil)
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	wantMsg := fmt.Sprintf("Job %s/%s (uid %s) is gone", job.Namespace, job.Name, job.UID)
	if r.Message != wantMsg {
		t.Fatalf("cancel of a Job removed out of band says %q; want %q", r.Message, wantMsg)
	}
	if again := f.run(t, p, true); mustJSON(again) != mustJSON(r) {
		t.Fatalf("recovered cancel %s; executed %s", mustJSON(again), mustJSON(r))
	}

	// The same message when the cancel's own delete removed the Job.
	g := newBatchFixture(t, time.Second)
	g.prepared(t)
	own := g.run(t, g.cmd(t, siteprotocol.OpStart, startBody), false).NativeRefs[0]
	if r := g.run(t, g.cmd(t, siteprotocol.OpCancel, nil), false); r.Message != fmt.Sprintf("Job %s/%s (uid %s) is gone", own.Namespace, own.Name, own.UID) {
		t.Fatalf("cancel that deleted the Job says %q", r.Message)
	}
	if len(g.native.deletes) != 1 {
		t.Fatalf("%d deletes", len(g.native.deletes))
	}
}

// accountUIDs gives the fixture's stored binding the account UID applied
// and its live account the UID live ("": the account is gone).
func (f *batchFixture) accountUIDs(applied, live string) {
	mb := f.bindings
	for id, gens := range mb.rows {
		for g, b := range gens {
			b.AccountUID = applied
			mb.rows[id][g] = b
			if f.native.accounts == nil {
				f.native.accounts = map[string]string{}
			}
			f.native.accounts[b.Namespace+"/"+b.Account] = live
		}
	}
}

// The workspace claim is created as the member too, so prepare checks the
// live account's UID as start does: another UID is binding-conflict and
// nothing is created (docs/site-protocol.md#the-accounts-uid-in-a-binding).
func TestAPrepareForARecreatedAccountIsBindingConflictAndCreatesNothing(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.accountUIDs("uid-applied", "uid-recreated")
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20}), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingConflict)
	if len(f.native.creates) != 0 {
		t.Fatalf("%d creates after a refused prepare", len(f.native.creates))
	}
	f.accountUIDs("uid-recreated", "uid-recreated")
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpPrepare, map[string]any{"workspace_size_bytes": 1 << 20}), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
}

// A start under a binding applied without an account UID is checked by
// name only: its result's message and its log line's note (Answer.Note)
// say so; under a binding applied with the live account's UID neither does
// (docs/site-protocol.md#the-accounts-uid-in-a-binding).
func TestAStartCheckedByNameOnlySaysSoInItsMessageAndItsLogNote(t *testing.T) {
	f := newBatchFixture(t, time.Second)
	f.prepared(t)
	f.accountUIDs("", "uid-live")
	a, err := f.reg.Execute(context.Background(), f.cmd(t, siteprotocol.OpStart, startBody))
	if err != nil || a.Reason != siteprotocol.ReasonCreated || !strings.Contains(a.Message, "checked by name only") ||
		!strings.Contains(a.Note, "checked by name only: binding "+bindingID) {
		t.Fatalf("start by name only: %+v, %v", a, err)
	}

	g := newBatchFixture(t, time.Second)
	g.prepared(t)
	g.accountUIDs("uid-live", "uid-live")
	a, err = g.reg.Execute(context.Background(), g.cmd(t, siteprotocol.OpStart, startBody))
	if err != nil || a.Reason != siteprotocol.ReasonCreated || strings.Contains(a.Message, "by name only") || a.Note != "" {
		t.Fatalf("start checked by UID: %+v, %v", a, err)
	}
}
