package application_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// serviceReadFixture is a service Attempt (family application or
// inference) prepared and started, its executor with the private reads
// over a workload Pod bound to a node (none when node is empty) and
// read-file through the workspace reader, as the runtime role composes
// them (WithReads, then WithFileReads). The native side is doubled: the
// API server (fakeNative), the workload Pod's chain (fakePods, nodePods)
// and the kubelet that runs the reader (fakeKubelet).
type serviceReadFixture struct {
	*appFixture
	family  siteprotocol.Family
	root    string // the workload record read-file starts from
	kubelet *fakeKubelet
	pods    *fakePods
	log     *recordLog
}

func newServiceReadFixture(t *testing.T, family siteprotocol.Family, node string) *serviceReadFixture {
	t.Helper()
	a := newAppFixture(t, 600*time.Second)
	f := &serviceReadFixture{appFixture: a, family: family, pods: &fakePods{}, log: &recordLog{memRecords: a.records}}
	f.kubelet = &fakeKubelet{native: a.native, files: map[string][]byte{}, logs: map[string]int{}}
	f.restartWithFiles(t, node, true)
	prepare := preparePayload(8080)
	if family == siteprotocol.FamilyInference {
		prepare = inferencePayload("")
	}
	expect(t, f.run(t, f.as(t, member, bindingID, siteprotocol.OpPrepare, prepare, true), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	expect(t, f.run(t, f.as(t, member, bindingID, siteprotocol.OpStart, nil, true), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	f.log.saves = nil
	return f
}

// restartWithFiles builds the family's executor again over the same
// records and cluster, with read-file when files is set.
func (f *serviceReadFixture) restartWithFiles(t *testing.T, node string, files bool) {
	t.Helper()
	pods := nodePods{fakePods: f.pods, node: node}
	cfg := application.FileReadConfig{Image: pinned{}.BatchImage(), Timeout: 30 * time.Second, Wait: 5 * time.Second, DeletionWait: 200 * time.Millisecond}
	var regs []application.Registration
	switch f.family {
	case siteprotocol.FamilyApplication:
		f.root = domain.KindDeployment
		access := application.NewAccess(f.bindings, f.app, f.perms, fixedClock{now})
		exec := appservice.NewExecutor(access, f.app, jsonAppSpecs{}, f.log, f.fp, application.ExecutorConfig{DeletionWait: time.Second}, 0).WithReads(pods)
		if files {
			exec.WithFileReads(readerSpecs{}, f.kubelet, cfg)
		}
		regs = exec.Registrations()
	case siteprotocol.FamilyInference:
		f.root = domain.KindInferenceService
		isvc := &isvcNative{fakeNative: f.native}
		access := application.NewAccess(f.bindings, isvc, f.perms, fixedClock{now})
		exec, err := inference.NewExecutor(access, isvc, jsonIsvcSpecs{}, f.log, f.fp,
			application.ExecutorConfig{DeletionWait: time.Second}, inference.Config{ServingRuntimes: map[string]string{"huggingface": servingRuntime}})
		if err != nil {
			t.Fatal(err)
		}
		exec.WithReads(pods)
		if files {
			exec.WithFileReads(readerSpecs{}, f.kubelet, cfg)
		}
		regs = exec.Registrations()
	default:
		t.Fatalf("family %s", f.family)
	}
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(f.bindings, nil).Registrations(), regs...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
}

// as is a command of the fixture's Attempt and Run of its family, sent by
// member m under binding b; checked as the server checks an append unless
// checked is false (a payload the server refuses, which the Runtime
// refuses too).
func (f *serviceReadFixture) as(t *testing.T, m, b string, op siteprotocol.Operation, payload any, checked bool) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": m, "project_id": project,
		"family": f.family, "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": b, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if checked {
		return pending(t, raw)
	}
	return pendingUnchecked(t, raw)
}

func (f *serviceReadFixture) read(t *testing.T, path string, maxBytes int64) *domain.Pending {
	t.Helper()
	return f.as(t, member, bindingID, siteprotocol.OpReadFile, readFile(path, maxBytes), true)
}

func (f *serviceReadFixture) readerCreates() int { return f.native.podCreates() }

func (f *serviceReadFixture) readerLive() bool { return f.native.podLive(readerName) }

var serviceFamilies = []siteprotocol.Family{siteprotocol.FamilyApplication, siteprotocol.FamilyInference}

// read-file of an application service's and an inference service's
// workspace by the Attempt's own member, after a fresh execution.read, goes
// through the workspace reader, not unsupported-operation: the workload's
// Pod is found from the recorded Deployment (InferenceService: the
// predictor's Pod by its chain) checked against the saved specification,
// the reader is recorded in services.sqlite (the family's service kind)
// creating before its create and created with its UID after it, created
// as the member with the payload's path and max_bytes, the claim, and the
// node of that Pod; its line gives the exact bytes and it is deleted by
// its UID before the answer, which names the workload and the claim. The
// reader's own refusal is path-rejected, its reader removed all the same;
// Recover reads again with a new reader and answers the same bytes. A
// workload Pod not yet bound leaves the reader unpinned.
func TestServiceFamiliesReadFileThroughTheReaderPinnedToTheWorkloadPodsNode(t *testing.T) {
	for _, family := range serviceFamilies {
		t.Run(string(family), func(t *testing.T) {
			f := newServiceReadFixture(t, family, "node-predictor")
			data := []byte("served\x00\xff answers\n")
			f.kubelet.files["logs/requests.jsonl"] = data
			p := f.read(t, "logs/requests.jsonl", 4096)
			r := f.run(t, p, false)
			expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
			if got, truncated := content(t, r); string(got) != string(data) || truncated {
				t.Fatalf("read %q truncated %v", got, truncated)
			}
			if got := strings.Join(f.log.saves, ", "); got != readerName+" creating, "+readerName+" created, "+readerName+" deleting, "+readerName+" removed" {
				t.Fatalf("reader records: %s", got)
			}
			workload := f.record(f.root)
			if len(f.pods.roots) != 1 || f.pods.roots[0].Kind != f.root || f.pods.roots[0].UID != workload.UID || string(f.pods.saved[0]) != string(workload.Spec) {
				t.Fatalf("the Pod was found from %+v; want the recorded %s %s and its saved specification", f.pods.roots, f.root, workload.UID)
			}
			if q := f.perms.queries[len(f.perms.queries)-1]; q.Action != domain.ActionRead {
				t.Fatalf("permission asked for %s", q.Action)
			}
			f.native.mu.Lock()
			as := f.native.creates[len(f.native.creates)-1]
			deleted := f.native.deletes[len(f.native.deletes)-1]
			f.native.mu.Unlock()
			if as.Account != siteprotocol.MemberAccount(member) || as.Namespace != namespace {
				t.Fatalf("the reader was created as %+v, not as the member", as)
			}
			rec := domain.FindNamedRecord(mustRecords(t, f.records), domain.KindPod, readerName)
			if rec == nil || rec.Phase != domain.PhaseRemoved || rec.UID == "" || deleted.Name != readerName || deleted.UID != rec.UID {
				t.Fatalf("deleted %+v; want the reader by its recorded UID (%+v)", deleted, rec)
			}
			kind := map[siteprotocol.Family]siteprotocol.ServiceKind{siteprotocol.FamilyApplication: siteprotocol.ServiceApplication, siteprotocol.FamilyInference: siteprotocol.ServiceInference}[family]
			if rec.ServiceKind != string(kind) {
				t.Fatalf("the reader recorded with service kind %q, want %q", rec.ServiceKind, kind)
			}
			var spec application.ReaderSpec
			if err := json.Unmarshal(rec.Spec, &spec); err != nil {
				t.Fatal(err)
			}
			if spec.Node != "node-predictor" || spec.Path != "logs/requests.jsonl" || spec.MaxBytes != 4096 || spec.WorkspaceClaim != domain.AttemptObjectName(attempt, domain.SuffixWorkspace) ||
				spec.ServiceAccount != siteprotocol.MemberAccount(member) || spec.Image != (pinned{}).BatchImage() || spec.Identity.CommandID != p.Command.ID {
				t.Fatalf("reader rendered from %+v", spec)
			}
			if len(r.NativeRefs) != 2 || r.NativeRefs[0].Kind != f.root || r.NativeRefs[0].UID != workload.UID || r.NativeRefs[1].Kind != domain.KindWorkspace {
				t.Fatalf("native refs %+v: want the %s and the claim (the reader is gone)", r.NativeRefs, f.root)
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

			// The reader's own refusal (a link leaving the workspace).
			r = f.run(t, f.read(t, "etc/passwd", 15), false)
			expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonPathRejected)
			if f.readerLive() || len(r.Detail) > 2 {
				t.Fatalf("refusal left the reader (%v) or carries %s", f.readerLive(), r.Detail)
			}

			// A workload Pod not bound to a node yet: the reader is not pinned.
			f.restartWithFiles(t, "", true)
			f.kubelet.files["out.txt"] = []byte("x")
			expect(t, f.run(t, f.read(t, "out.txt", 10), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
			rec = domain.FindNamedRecord(mustRecords(t, f.records), domain.KindPod, readerName)
			if err := json.Unmarshal(rec.Spec, &spec); err != nil || spec.Node != "" {
				t.Fatalf("a reader without a bound workload Pod pinned to %q (%v)", spec.Node, err)
			}

			// Cleanup removes the Attempt's objects; a read after it is
			// native-missing, nothing created.
			expect(t, f.run(t, f.as(t, member, bindingID, siteprotocol.OpCleanup, nil, true), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
			before := f.readerCreates()
			expect(t, f.run(t, f.read(t, "out.txt", 10), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
			if f.readerCreates() != before {
				t.Fatal("a read after cleanup created a reader")
			}
		})
	}
}

// read-file of a service Attempt is refused before anything is created:
// another member of the same Project with its own current binding and
// execution.read is attempt-conflict; a path that is not a clean relative
// path (absolute, ..) is path-rejected; a broken Pod chain (for inference
// also the private argument rule) is native-identity-mismatch. No reader
// is created or recorded, no log read. An executor without WithFileReads
// answers unsupported-operation without looking at the cluster.
func TestServiceFamiliesRefuseReadFileBeforeAReaderIsCreated(t *testing.T) {
	other, otherBinding := uuidN(4242), uuidN(4243)
	cases := []struct {
		name    string
		arrange func(t *testing.T, f *serviceReadFixture) *domain.Pending
		reason  siteprotocol.Reason
	}{
		{"another member of the same Project", func(t *testing.T, f *serviceReadFixture) *domain.Pending {
			f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
			return f.as(t, other, otherBinding, siteprotocol.OpReadFile, readFile("out.txt", 10), true)
		}, siteprotocol.ReasonAttemptConflict},
		{"absolute path", func(t *testing.T, f *serviceReadFixture) *domain.Pending {
			return f.as(t, member, bindingID, siteprotocol.OpReadFile, readFile("/etc/passwd", 10), false)
		}, siteprotocol.ReasonPathRejected},
		{"dot-dot", func(t *testing.T, f *serviceReadFixture) *domain.Pending {
			return f.as(t, member, bindingID, siteprotocol.OpReadFile, readFile("data/../../x", 10), false)
		}, siteprotocol.ReasonPathRejected},
		{"chain broken", func(t *testing.T, f *serviceReadFixture) *domain.Pending {
			f.pods.chainErr = application.ErrNativeIdentityMismatch
			return f.read(t, "out.txt", 10)
		}, siteprotocol.ReasonNativeIdentityMismatch},
	}
	for _, family := range serviceFamilies {
		for _, c := range cases {
			t.Run(string(family)+"/"+c.name, func(t *testing.T) {
				f := newServiceReadFixture(t, family, "node-7")
				f.kubelet.files["out.txt"] = []byte("private")
				r := f.run(t, c.arrange(t, f), false)
				expect(t, r, siteprotocol.OutcomeRefused, c.reason)
				if f.readerCreates() != 0 || len(f.log.saves) != 0 || f.kubelet.logsRead() != 0 || len(r.Detail) > 2 {
					t.Fatalf("a refused read created %d readers, saved %v, read %d logs, answered %s", f.readerCreates(), f.log.saves, f.kubelet.logsRead(), r.Detail)
				}
			})
		}
		t.Run(string(family)+"/without WithFileReads", func(t *testing.T) {
			f := newServiceReadFixture(t, family, "node-7")
			f.restartWithFiles(t, "node-7", false)
			finds := len(f.pods.roots)
			expect(t, f.run(t, f.read(t, "out.txt", 10), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
			if f.readerCreates() != 0 || len(f.pods.roots) != finds {
				t.Fatal("an executor without read-file looked at the cluster")
			}
		})
	}
}
