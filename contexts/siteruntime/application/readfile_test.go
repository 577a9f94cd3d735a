package application_test

import (
	"context"
	"encoding/base64"
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

// readerSpecs renders the workspace reader as the JSON of its input
// (deterministic), like jsonSpecs.
type readerSpecs struct{}

func (readerSpecs) RenderReader(s application.ReaderSpec) (application.NativeObject, error) {
	b, _ := json.Marshal(s)
	return application.NativeObject{Kind: domain.KindPod, Namespace: s.Namespace, Name: domain.AttemptObjectName(s.Identity.AttemptID, domain.SuffixReader), Spec: b}, nil
}

// fakeKubelet stands in for the kubelet that runs the reader Pod and the
// API server's pods/log (outside the application layer): a reader the
// fake API server (fakeNative) holds has terminated, and its log is the
// line `metallo workspace-read` writes for the workspace files the test
// sets (or the raw log the test sets). It counts the logs read by the
// reader's UID.
type fakeKubelet struct {
	mu     sync.Mutex
	native *fakeNative
	files  map[string][]byte // path → content; a path absent is refused path-rejected
	raw    []byte            // when set, the log as is
	never  bool              // the reader never terminates
	exit   int32
	logs   map[string]int // reader UID → logs read
	// onLog runs after each log read (with no lock held).
	onLog func()
}

func (k *fakeKubelet) ReaderState(_ context.Context, ref siteprotocol.NativeRef) (application.HelperState, bool, error) {
	k.native.mu.Lock()
	o, ok := k.native.objects[key(ref.Kind, ref.Namespace, ref.Name)]
	k.native.mu.Unlock()
	if !ok || o.uid != ref.UID {
		return application.HelperState{}, false, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return application.HelperState{Done: !k.never, ExitCode: k.exit}, true, nil
}

func (k *fakeKubelet) ReaderLog(_ context.Context, ref siteprotocol.NativeRef, limit int64) ([]byte, error) {
	k.native.mu.Lock()
	o, ok := k.native.objects[key(ref.Kind, ref.Namespace, ref.Name)]
	k.native.mu.Unlock()
	if !ok || o.uid != ref.UID {
		return nil, fmt.Errorf("%w: pods %q not found", application.ErrLogUnavailable, ref.Name)
	}
	if k.onLog != nil {
		defer k.onLog()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.logs[ref.UID]++
	if k.raw != nil {
		return k.raw, nil
	}
	var s application.ReaderSpec
	if err := json.Unmarshal(o.spec, &s); err != nil {
		return nil, err
	}
	content, ok := k.files[s.Path]
	if !ok {
		return domain.FileReadRefused("%s leaves the workspace", s.Path).Encode(), nil
	}
	r := domain.FileRead{Outcome: siteprotocol.OutcomeSucceeded}
	if int64(len(content)) > s.MaxBytes {
		content, r.Truncated = content[:s.MaxBytes], true
	}
	r.ContentBase64, r.Bytes = base64.StdEncoding.EncodeToString(content), int64(len(content))
	return r.Encode(), nil
}

func (k *fakeKubelet) logsRead() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, c := range k.logs {
		n += c
	}
	return n
}

// nodePods is fakePods whose workload Pod is bound to node.
type nodePods struct {
	*fakePods
	node string
}

func (p nodePods) WorkloadPod(ctx context.Context, root siteprotocol.NativeRef, spec []byte, id application.ObjectIdentity) (application.WorkloadPod, error) {
	wp, err := p.fakePods.WorkloadPod(ctx, root, spec, id)
	wp.Node = p.node
	return wp, err
}

// recordLog is memRecords that also lists every save of a Pod record as
// "<name> <phase>".
type recordLog struct {
	*memRecords
	mu    sync.Mutex
	saves []string
}

func (r *recordLog) SaveRecord(ctx context.Context, rec domain.NativeRecord) error {
	if rec.Kind == domain.KindPod {
		r.mu.Lock()
		r.saves = append(r.saves, rec.Name+" "+rec.Phase)
		r.mu.Unlock()
	}
	return r.memRecords.SaveRecord(ctx, rec)
}

// armedCrash is a Failpoints that panics (crash: the process dies there)
// at the n-th hit counted from when it is armed, and lists the hits.
type armedCrash struct {
	mu    sync.Mutex
	armed bool
	n     int
	hits  []string
}

func (c *armedCrash) Hit(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return
	}
	c.hits = append(c.hits, name)
	if len(c.hits) == c.n {
		panic(crash{})
	}
}

func (c *armedCrash) arm(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.n, c.hits = true, n, nil
}

type readFileFixture struct {
	*batchFixture
	kubelet *fakeKubelet
	pods    *fakePods
	log     *recordLog
	fp      *armedCrash
}

var readerName = domain.AttemptObjectName(attempt, domain.SuffixReader)

// newReadFileFixture is the batch fixture with private reads and
// read-file (the reader's wait wait), its Attempt prepared and started,
// its workload Pod bound to node-7.
func newReadFileFixture(t *testing.T, wait time.Duration) *readFileFixture {
	t.Helper()
	mem := &memRecords{rows: map[string]domain.NativeRecord{}}
	f := &readFileFixture{
		batchFixture: &batchFixture{
			native:   newFakeNative(),
			perms:    &fakePermissions{answer: domain.Permission{Allowed: true, EvidenceID: "ev-1", ValidUntil: now.Add(time.Minute)}},
			records:  mem,
			bindings: &memBindings{rows: map[string]map[int64]domain.MemberBinding{}},
		},
		pods: &fakePods{},
		log:  &recordLog{memRecords: mem},
		fp:   &armedCrash{},
	}
	f.kubelet = &fakeKubelet{native: f.native, files: map[string][]byte{}, logs: map[string]int{}}
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	exec := batch.NewExecutor(access, f.native, jsonSpecs{}, pinned{}, f.log, f.fp, application.ExecutorConfig{DeletionWait: time.Second}).
		WithReads(nodePods{fakePods: f.pods, node: "node-7"}).
		WithFileReads(readerSpecs{}, f.kubelet, application.FileReadConfig{Image: pinned{}.BatchImage(), Timeout: 30 * time.Second, Wait: wait, DeletionWait: 200 * time.Millisecond})
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	f.run(t, bindCmd(t, 900, bindingID, 1, 1, namespace), false)
	f.prepared(t)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpStart, startBody), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	return f
}

func readFile(path string, maxBytes int64) map[string]any {
	return map[string]any{"path": path, "max_bytes": maxBytes}
}

// readerCreates counts the reader Pods created.
func (f *readFileFixture) readerCreates() int { return f.native.podCreates() }

// readerLive reports whether the reader Pod exists.
func (f *readFileFixture) readerLive() bool { return f.native.podLive(readerName) }

// podCreates counts the Pods created through f.
func (f *fakeNative) podCreates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, k := range f.createdKinds {
		if k == domain.KindPod {
			n++
		}
	}
	return n
}

// podLive reports whether the Pod name exists in the test namespace.
func (f *fakeNative) podLive(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.objects[key(domain.KindPod, namespace, name)]
	return ok
}

func content(t *testing.T, r siteprotocol.Result) ([]byte, bool) {
	t.Helper()
	d, err := siteprotocol.DecodeDetail[siteprotocol.ReadFileDetail](r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(d.ContentBase64)
	if err != nil {
		t.Fatal(err)
	}
	return b, d.Truncated
}

// read-file by the Attempt's own member, after a fresh execution.read:
// the reader Pod is recorded creating before its create and created with
// its UID after it, created as the member with the payload's path and
// max_bytes, the workload Pod's node and the claim; its line gives the
// exact bytes (truncated when the file is longer), and it is deleted by
// its UID (recorded deleting, then removed) before the answer. Recover
// runs the read again with a new reader and answers the same bytes.
func TestReadFileAnswersTheExactBytesThroughARecordedReaderDeletedByUID(t *testing.T) {
	f := newReadFileFixture(t, 5*time.Second)
	data := []byte("metrics\x00\xff\xfe\x1b[31m\n")
	f.kubelet.files["out/metrics.bin"] = data
	p := f.cmd(t, siteprotocol.OpReadFile, readFile("out/metrics.bin", 1024))
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	if got, truncated := content(t, r); string(got) != string(data) || truncated {
		t.Fatalf("read %q truncated %v", got, truncated)
	}
	if got := strings.Join(f.log.saves, ", "); got != readerName+" creating, "+readerName+" created, "+readerName+" deleting, "+readerName+" removed" {
		t.Fatalf("reader records: %s", got)
	}
	last := f.perms.queries[len(f.perms.queries)-1]
	if last.Action != domain.ActionRead || len(f.perms.queries) != 3 { // prepare, start, one read
		t.Fatalf("permission queries %+v: want one execution.read for the read", f.perms.queries)
	}
	f.native.mu.Lock()
	as := f.native.creates[len(f.native.creates)-1]
	deleted := f.native.deletes[len(f.native.deletes)-1]
	f.native.mu.Unlock()
	if as.Account != siteprotocol.MemberAccount(member) || as.Namespace != namespace {
		t.Fatalf("the reader was created as %+v, not as the member", as)
	}
	if rec := domain.FindNamedRecord(mustRecords(t, f.records), domain.KindPod, readerName); deleted.Name != readerName || deleted.UID == "" || rec == nil || deleted.UID != rec.UID || rec.Phase != domain.PhaseRemoved {
		t.Fatalf("deleted %+v; want the reader by its recorded UID (%+v)", deleted, rec)
	}
	rec := domain.FindNamedRecord(mustRecords(t, f.records), domain.KindPod, readerName)
	var spec application.ReaderSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Node != "node-7" || spec.Path != "out/metrics.bin" || spec.MaxBytes != 1024 || spec.WorkspaceClaim != domain.AttemptObjectName(attempt, domain.SuffixWorkspace) ||
		spec.ServiceAccount != siteprotocol.MemberAccount(member) || spec.Timeout != 30*time.Second || spec.Identity.CommandID != p.Command.ID {
		t.Fatalf("reader rendered from %+v", spec)
	}
	if len(r.NativeRefs) != 2 || r.NativeRefs[0].Kind != domain.KindJob || r.NativeRefs[1].Kind != domain.KindWorkspace {
		t.Fatalf("native refs %+v: want the Job and the claim (the reader is gone)", r.NativeRefs)
	}
	if f.readerLive() {
		t.Fatal("the reader is left")
	}
	if again := f.run(t, p, true); again.Digest != r.Digest {
		t.Fatalf("Recover answered other bytes: %s", again.Message)
	}
	if n := f.readerCreates(); n != 2 {
		t.Fatalf("%d readers created; Recover runs one new reader", n)
	}

	// A longer file: exactly its first max_bytes bytes, truncated.
	f.kubelet.files["big"] = []byte(strings.Repeat("0123456789", 100))
	r = f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("big", 15)), false)
	if got, truncated := content(t, r); string(got) != "012345678901234" || !truncated {
		t.Fatalf("read %q truncated %v", got, truncated)
	}
	// The reader's own refusal (a link leaving the workspace) is
	// path-rejected, and its reader is removed all the same.
	r = f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("etc/passwd", 15)), false)
	expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonPathRejected)
	if f.readerLive() || len(r.Detail) > 2 {
		t.Fatalf("refusal left the reader (%v) or carries %s", f.readerLive(), r.Detail)
	}
}

func mustRecords(t *testing.T, r *memRecords) []domain.NativeRecord {
	t.Helper()
	records, err := r.Records(context.Background(), attempt)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// otherMemberRead is read-file of the fixture's Attempt sent by member
// other under its own binding.
func (f *batchFixture) otherMemberRead(t *testing.T, other, otherBinding string, payload any) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": siteprotocol.OpReadFile, "issued_at": "2026-11-29T10:00:00Z", "member_id": other, "project_id": project,
		"family": "batch", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": otherBinding, "generation": 1},
		"payload": payload}
	b, _ := json.Marshal(c)
	return pending(t, b)
}

// Every refusal comes before anything is created: another member of the
// Project, a permission withdrawn, a retired binding, a broken identity
// chain, a path that is not a clean relative path (absolute, ..: refused
// path-rejected although the server refuses them on append), max_bytes
// out of range — no reader Pod is created or recorded, no log is read.
func TestReadFileRefusesBeforeAnythingIsCreated(t *testing.T) {
	other, otherBinding := uuidN(4242), uuidN(4243)
	cases := []struct {
		name    string
		arrange func(t *testing.T, f *readFileFixture) *domain.Pending
		outcome siteprotocol.Outcome
		reason  siteprotocol.Reason
	}{
		{"another member of the same Project", func(t *testing.T, f *readFileFixture) *domain.Pending {
			f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
			return f.otherMemberRead(t, other, otherBinding, readFile("out.txt", 10))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict},
		{"permission withdrawn", func(t *testing.T, f *readFileFixture) *domain.Pending {
			f.perms.answer = domain.Permission{Allowed: false, Reason: "grant removed", EvidenceID: "ev-2", ValidUntil: now.Add(time.Minute)}
			return f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonPermissionDenied},
		{"binding retired", func(t *testing.T, f *readFileFixture) *domain.Pending {
			f.run(t, retireCmd(t, 901, bindingID, 1), false)
			return f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingRetired},
		{"identity chain broken", func(t *testing.T, f *readFileFixture) *domain.Pending {
			f.pods.chainErr = fmt.Errorf("%w: Pod p leads to another Job", application.ErrNativeIdentityMismatch)
			return f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeIdentityMismatch},
		{"claim replaced under its name", func(t *testing.T, f *readFileFixture) *domain.Pending {
			k := key(domain.KindWorkspace, namespace, domain.AttemptObjectName(attempt, domain.SuffixWorkspace))
			o := f.native.objects[k]
			o.uid = "another-claim"
			f.native.objects[k] = o
			return f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeIdentityMismatch},
		{"absolute path", func(t *testing.T, f *readFileFixture) *domain.Pending {
			return pendingUnchecked(t, f.rawCmd(t, siteprotocol.OpReadFile, readFile("/etc/passwd", 10)))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonPathRejected},
		{"dot-dot", func(t *testing.T, f *readFileFixture) *domain.Pending {
			return pendingUnchecked(t, f.rawCmd(t, siteprotocol.OpReadFile, readFile("../x", 10)))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonPathRejected},
		{"max_bytes out of range", func(t *testing.T, f *readFileFixture) *domain.Pending {
			return pendingUnchecked(t, f.rawCmd(t, siteprotocol.OpReadFile, readFile("out.txt", siteprotocol.MaxReadBytes+1)))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newReadFileFixture(t, 5*time.Second)
			f.kubelet.files["out.txt"] = []byte("private")
			r := f.run(t, c.arrange(t, f), false)
			expect(t, r, c.outcome, c.reason)
			if f.readerCreates() != 0 || len(f.log.saves) != 0 || f.kubelet.logsRead() != 0 {
				t.Fatalf("a refused read created %d readers, saved %v, read %d logs", f.readerCreates(), f.log.saves, f.kubelet.logsRead())
			}
			if len(r.Detail) > 2 {
				t.Fatalf("a refusal carries %s", r.Detail)
			}
		})
	}
}

// A reader that does not terminate within the wait is failed /
// deadline-exceeded (the read's bound, docs/site-runtime.md#command-bounds);
// one that ends with another exit code or whose log is not workspace-read's
// one line is failed / native-error; each is deleted by UID all the same. A reader the
// API server refuses is native-request-denied. A reader still there after
// its deletion allowance is deletion-pending, nothing of the file
// answered; the next cleanup removes it with the Attempt's other objects.
func TestReadFileFailuresRemoveTheReader(t *testing.T) {
	f := newReadFileFixture(t, 300*time.Millisecond)
	f.kubelet.files["out.txt"] = []byte("private")
	f.kubelet.never = true
	r := f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if !strings.Contains(r.Message, "has not terminated") || f.readerLive() || f.kubelet.logsRead() != 0 {
		t.Fatalf("%s (reader left %v, logs %d)", r.Message, f.readerLive(), f.kubelet.logsRead())
	}
	f.kubelet.never, f.kubelet.exit = false, 137
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	f.kubelet.exit = 0
	for _, raw := range []string{"metallo: unknown flag --x\n", string(domain.FileRead{Outcome: siteprotocol.OutcomeSucceeded, ContentBase64: "aGk=", Bytes: 2}.Encode()) + "more\n"} {
		f.kubelet.raw = []byte(raw)
		r = f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false)
		expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
		if f.readerLive() || len(r.Detail) > 2 {
			t.Fatalf("%q: reader left %v, detail %s", raw, f.readerLive(), r.Detail)
		}
	}
	f.kubelet.raw = nil
	// The claim replaced while the reader ran: its bytes are not answered.
	claimKey := key(domain.KindWorkspace, namespace, domain.AttemptObjectName(attempt, domain.SuffixWorkspace))
	f.kubelet.onLog = func() {
		f.native.mu.Lock()
		o := f.native.objects[claimKey]
		o.uid = "claim-made-again"
		f.native.objects[claimKey] = o
		f.native.mu.Unlock()
	}
	r = f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if !strings.Contains(r.Message, "could not be confirmed") || len(r.Detail) > 2 || f.readerLive() {
		t.Fatalf("a claim replaced during the read: %s %s (reader left %v)", r.Message, r.Detail, f.readerLive())
	}
	f.kubelet.onLog = nil
	f.native.mu.Lock()
	o := f.native.objects[claimKey]
	o.uid = r.NativeRefs[1].UID
	f.native.objects[claimKey] = o
	f.native.mu.Unlock()

	f.native.createErr = fmt.Errorf("%w: metallo-workspace-readers denied the request", application.ErrNativeRequestDenied)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)

	f.native.neverGone = true
	r = f.run(t, f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeletionPending)
	if len(r.Detail) > 2 || strings.Contains(r.Message, "private") {
		t.Fatalf("deletion-pending answered content: %s %s", r.Message, r.Detail)
	}
	f.native.neverGone = false
	f.native.mu.Lock()
	for k, o := range f.native.objects { // the delete went through after all
		o.deleting = false
		f.native.objects[k] = o
	}
	f.native.mu.Unlock()
	r = f.run(t, f.cmd(t, siteprotocol.OpCleanup, nil), false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if f.readerLive() || !strings.Contains(string(r.Detail), readerName) {
		t.Fatalf("cleanup left the reader (%v): %s", f.readerLive(), r.Detail)
	}
}

// A crash at every durable step of a read-file — after the reader's
// record creating, after its create, after its record created, after its
// record deleting, after its delete, after its record removed — leaves
// what Recover finds. The command's own reader, while it exists and was
// not yet being removed (created, recorded creating or created), is
// adopted — its UID recorded when only creating was — and its line is
// read: no second reader is created (docs/site-runtime.md#the-workspace-reader).
// A reader being removed is deleted by its UID, never read, and the read
// runs again with a new reader. Either way the answer is exactly the bytes
// of a read that was never interrupted, and no reader is left.
func TestRecoverOfAnInterruptedReadFileAdoptsItsLiveReaderOrReadsAgain(t *testing.T) {
	clean := newReadFileFixture(t, 5*time.Second)
	clean.kubelet.files["out.txt"] = []byte("the output\n")
	p := clean.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 100))
	clean.fp.arm(1 << 30)
	want := clean.run(t, p, false)
	expect(t, want, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	steps := append([]string(nil), clean.fp.hits...)
	if len(steps) != 6 {
		t.Fatalf("a read-file hits %v; want six failpoints", steps)
	}
	for n := 1; n <= len(steps); n++ {
		t.Run(fmt.Sprintf("%d-%s", n, steps[n-1]), func(t *testing.T) {
			f := newReadFileFixture(t, 5*time.Second)
			f.kubelet.files["out.txt"] = []byte("the output\n")
			p := f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 100))
			f.fp.arm(n)
			func() {
				defer func() {
					if _, ok := recover().(crash); !ok {
						t.Fatal("no crash at the armed failpoint")
					}
				}()
				_, _ = f.reg.Execute(context.Background(), p)
			}()
			f.fp.arm(1 << 30)
			logsBefore := map[string]int{}
			f.kubelet.mu.Lock()
			for uid, c := range f.kubelet.logs {
				logsBefore[uid] = c
			}
			f.kubelet.mu.Unlock()
			var orphan string
			rec := domain.FindNamedRecord(mustRecords(t, f.records), domain.KindPod, readerName)
			if rec != nil {
				f.native.mu.Lock()
				if o, ok := f.native.objects[key(domain.KindPod, namespace, readerName)]; ok {
					orphan = o.uid
				}
				f.native.mu.Unlock()
			}
			adopt := orphan != "" && (rec.Phase == domain.PhaseCreating || rec.Phase == domain.PhaseCreated)
			creates := f.readerCreates()
			got := f.run(t, p, true)
			if got.Digest != want.Digest {
				t.Fatalf("recovered %s / %s: %s; want the clean read", got.Outcome, got.Reason, got.Message)
			}
			if f.readerLive() {
				t.Fatal("a reader is left after the recovery")
			}
			if again := f.readerCreates() - creates; (adopt && again != 0) || (!adopt && again != 1) {
				t.Fatalf("the recovery created %d readers (a live reader of the command to adopt: %v)", again, adopt)
			}
			f.kubelet.mu.Lock()
			read := f.kubelet.logs[orphan] - logsBefore[orphan]
			f.kubelet.mu.Unlock()
			switch {
			case adopt && read != 1:
				t.Fatalf("the adopted reader %s's log was read %d times", orphan, read)
			case !adopt && orphan != "" && read != 0:
				t.Fatalf("Recover read the log of the reader %s being removed", orphan)
			}
			if orphan != "" {
				f.native.mu.Lock()
				defer f.native.mu.Unlock()
				deleted := false
				for _, d := range f.native.deletes {
					deleted = deleted || (d.Name == readerName && d.UID == orphan)
				}
				if !deleted {
					t.Fatalf("the reader %s was not deleted by its UID: %+v", orphan, f.native.deletes)
				}
			}
		})
	}
}

// A Recover of a read-file begun longer ago than its bound creates no
// reader: it answers failed / deadline-exceeded at once (the bound is an
// hour here: a wait begun again would not end). A reader of the command
// still live is adopted and, not terminated, removed by its UID unread,
// with the same answer (docs/site-runtime.md#command-bounds).
func TestARecoveredReadFilePastItsBoundCreatesNoReader(t *testing.T) {
	f := newReadFileFixture(t, time.Hour)
	f.kubelet.files["out.txt"] = []byte("the output\n")
	p := f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 100))
	begun := application.WithCommandStart(context.Background(), time.Now().Add(-2*time.Hour))
	creates := f.readerCreates()
	r := f.runIn(t, begun, p, true)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if f.readerCreates() != creates || f.kubelet.logsRead() != 0 {
		t.Fatalf("a recovery past the bound created %d readers and read %d logs", f.readerCreates()-creates, f.kubelet.logsRead())
	}

	// Its reader from before the restart, still running.
	f.kubelet.never = true
	f.fp.arm(3) // after the record created
	func() {
		defer func() { _ = recover() }()
		_, _ = f.reg.Execute(context.Background(), p)
	}()
	f.fp.arm(1 << 30)
	if !f.readerLive() {
		t.Fatal("no reader was left by the crash")
	}
	creates = f.readerCreates()
	r = f.runIn(t, begun, p, true)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if f.readerCreates() != creates || f.readerLive() || f.kubelet.logsRead() != 0 {
		t.Fatalf("created %d readers, reader left %v, logs read %d", f.readerCreates()-creates, f.readerLive(), f.kubelet.logsRead())
	}
}

// A reader left under the name that is not the one rendered (recorded
// only as creating) is unexplained: the worker stops and nothing is
// deleted. A family without WithFileReads answers read-file
// unsupported-operation.
func TestALeftReaderThatIsNotTheRenderedOneIsUnexplained(t *testing.T) {
	f := newReadFileFixture(t, 5*time.Second)
	p := f.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 100))
	f.fp.arm(1) // after the record creating
	func() {
		defer func() { _ = recover() }()
		_, _ = f.reg.Execute(context.Background(), p)
	}()
	f.fp.arm(1 << 30)
	f.native.objects[key(domain.KindPod, namespace, readerName)] = fakeObject{uid: "someone-else", spec: []byte(`{"other":true}`)}
	if _, err := f.reg.Recover(context.Background(), p); !errors.Is(err, application.ErrUnexplained) {
		t.Fatalf("want ErrUnexplained, got %v", err)
	}
	for _, d := range f.native.deletes {
		if d.Name == readerName {
			t.Fatal("an unexplained reader was deleted")
		}
	}

	without := newReadFixture(t, &fakePods{})
	expect(t, without.run(t, without.cmd(t, siteprotocol.OpReadFile, readFile("out.txt", 10)), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
}
