package application_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// fakePods stands in for the Kubernetes API server's Pods and the
// kubelet's logs (outside the application layer): the identity chain's
// answer and the log a test sets; it counts what was read.
type fakePods struct {
	mu       sync.Mutex
	chainErr error
	log      []byte
	logErr   error
	finds    int
	logReads int
	asked    []string // containers whose log was read
	roots    []siteprotocol.NativeRef
	saved    [][]byte // the saved specifications the chain was checked against
	// unstarted: the Pod's containers never started (an unscheduled Pod).
	unstarted bool
	// holdLog: PodLog answers nothing until its context ends (a kubelet
	// that trickles or never answers), then the context's error.
	holdLog bool
}

func (p *fakePods) WorkloadPod(_ context.Context, root siteprotocol.NativeRef, saved []byte, id application.ObjectIdentity) (application.WorkloadPod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finds++
	p.roots, p.saved = append(p.roots, root), append(p.saved, saved)
	if p.chainErr != nil {
		return application.WorkloadPod{}, p.chainErr
	}
	wp := application.WorkloadPod{Namespace: root.Namespace, Name: root.Name + "-x2k9q", UID: "pod-uid-1", Containers: []string{"main", "sidecar"}, Main: "main"}
	if !p.unstarted {
		wp.Started, wp.Node = wp.Containers, "node-1"
	}
	return wp, nil
}

func (p *fakePods) PodLog(ctx context.Context, _ application.WorkloadPod, container string, tail int64) (application.LogTail, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logReads++
	p.asked = append(p.asked, container)
	if p.holdLog {
		<-ctx.Done()
		return application.LogTail{}, fmt.Errorf("read the log: %w", ctx.Err())
	}
	if p.logErr != nil {
		return application.LogTail{}, p.logErr
	}
	if int64(len(p.log)) > tail {
		return application.LogTail{Bytes: p.log[int64(len(p.log))-tail:], Truncated: true}, nil
	}
	return application.LogTail{Bytes: p.log}, nil
}

func (p *fakePods) reads() (finds, logs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finds, p.logReads
}

// newReadFixture is the batch fixture with private reads over pods, its
// Attempt prepared and started.
func newReadFixture(t *testing.T, pods *fakePods) *batchFixture {
	t.Helper()
	return newReadFixtureWith(t, pods, application.ReadConfig{})
}

// newReadFixtureWith is newReadFixture with the reads bounded by cfg.
func newReadFixtureWith(t *testing.T, pods *fakePods, cfg application.ReadConfig) *batchFixture {
	t.Helper()
	f := &batchFixture{
		native:   newFakeNative(),
		perms:    &fakePermissions{answer: domain.Permission{Allowed: true, EvidenceID: "ev-1", ValidUntil: now.Add(time.Minute)}},
		records:  &memRecords{rows: map[string]domain.NativeRecord{}},
		bindings: &memBindings{rows: map[string]map[int64]domain.MemberBinding{}},
	}
	access := application.NewAccess(f.bindings, f.native, f.perms, fixedClock{now})
	exec := batch.NewExecutor(access, f.native, jsonSpecs{}, pinned{}, f.records, nil, application.ExecutorConfig{DeletionWait: time.Second, Reads: cfg})
	if pods != nil {
		exec.WithReads(pods)
	}
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

func readLogs(tail int64, container string) map[string]any {
	p := map[string]any{"tail_bytes": tail}
	if container != "" {
		p["container"] = container
	}
	return p
}

// read-logs by the Attempt's own member, with a fresh execution.read
// answer: the log's last tail_bytes bytes exactly (escape sequences,
// invalid UTF-8 and NUL included, base64 in the detail), truncated when
// the log is longer, of the workload's main container unless the payload
// names another; Recover answers the same bytes. The native side is
// doubled (fakePods: the Kubernetes API server and kubelet).
func TestReadLogsAnswersTheExactLastBytesAfterAFreshReadPermission(t *testing.T) {
	pods := &fakePods{log: []byte("\x1b[31mstep 1\x1b[0m\n\xff\xfe\x00 binary \xc3\x28\nlast line\n")}
	f := newReadFixture(t, pods)
	p := f.cmd(t, siteprotocol.OpReadLogs, readLogs(12, ""))
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead)
	d, err := siteprotocol.DecodeDetail[siteprotocol.ReadLogsDetail](r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := base64.StdEncoding.DecodeString(d.ContentBase64)
	if err != nil || string(got) != string(pods.log[len(pods.log)-12:]) || !d.Truncated || d.Container != "main" {
		t.Fatalf("detail %+v (%q, %v)", d, got, err)
	}
	last := f.perms.queries[len(f.perms.queries)-1]
	if last.Action != domain.ActionRead || last.AttemptID != attempt || last.MemberID != member {
		t.Fatalf("permission asked %+v, want execution.read for the Attempt's member", last)
	}
	if again := f.run(t, p, true); again.Digest != r.Digest {
		t.Fatal("Recover of a read answered other bytes")
	}

	whole := f.run(t, f.cmd(t, siteprotocol.OpReadLogs, readLogs(1<<20, "sidecar")), false)
	d, _ = siteprotocol.DecodeDetail[siteprotocol.ReadLogsDetail](whole)
	got, _ = base64.StdEncoding.DecodeString(d.ContentBase64)
	if string(got) != string(pods.log) || d.Truncated || d.Container != "sidecar" || pods.asked[len(pods.asked)-1] != "sidecar" {
		t.Fatalf("whole log: %+v", d)
	}
	if len(whole.NativeRefs) != 2 || whole.NativeRefs[0].Kind != domain.KindJob || whole.NativeRefs[1].Kind != domain.KindPod {
		t.Fatalf("native refs %+v, want the Job and the Pod read", whole.NativeRefs)
	}
}

// Every check comes before anything is read from the cluster: another
// member of the same Project (with its own current binding and
// permission), a permission just withdrawn or expired, a retired binding,
// an Attempt without a workload — each is refused with its reason and the
// Pods are never looked at. A broken identity chain is refused
// native-identity-mismatch and no log is read; a container the Pod lacks
// is invalid-payload; a workload without a Pod fails native-missing; a log
// the kubelet cannot give fails native-error.
func TestReadLogsRefusesWithNothingReadBeforeEveryCheckPasses(t *testing.T) {
	other := uuidN(4242)
	otherBinding := uuidN(4243)
	cases := []struct {
		name    string
		arrange func(t *testing.T, f *batchFixture, pods *fakePods) *domain.Pending
		outcome siteprotocol.Outcome
		reason  siteprotocol.Reason
		// finds, logs: the reads the port may see.
		finds, logs int
	}{
		{"another member of the same Project", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
			return f.otherMemberCmd(t, other, otherBinding, readLogs(100, ""))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict, 0, 0},
		{"permission just withdrawn", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			f.perms.answer = domain.Permission{Allowed: false, Reason: "grant removed", EvidenceID: "ev-2", ValidUntil: now.Add(time.Minute)}
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonPermissionDenied, 0, 0},
		{"permission answer expired", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			f.perms.answer.ValidUntil = now
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonPermissionUnavailable, 0, 0},
		{"permission provider unavailable", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			f.perms.err = fmt.Errorf("%w: no answer", application.ErrPermissionUnavailable)
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonPermissionUnavailable, 0, 0},
		{"binding retired", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			f.run(t, retireCmd(t, 901, bindingID, 1), false)
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingRetired, 0, 0},
		{"member account recreated", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			f.run(t, pending(t, bindWithUID(t, 902, "acct-uid-1")), false)
			f.native.accounts = map[string]string{namespace + "/" + siteprotocol.MemberAccount(member): "acct-uid-2"}
			p := f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
			return p
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingConflict, 0, 0},
		{"identity chain broken", func(t *testing.T, f *batchFixture, pods *fakePods) *domain.Pending {
			pods.chainErr = fmt.Errorf("%w: Pod p leads to Job attempt-x (uid other), not to the recorded Job", application.ErrNativeIdentityMismatch)
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeIdentityMismatch, 1, 0},
		{"container the Pod lacks", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, "debug"))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload, 1, 0},
		{"no Pod", func(t *testing.T, f *batchFixture, pods *fakePods) *domain.Pending {
			pods.chainErr = fmt.Errorf("%w: Job has no Pod", application.ErrNoWorkloadPod)
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing, 1, 0},
		{"container never started", func(t *testing.T, f *batchFixture, pods *fakePods) *domain.Pending {
			// The API server answers an unscheduled Pod's log with nothing:
			// the read must not answer that as an empty log.
			pods.unstarted = true
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError, 1, 0},
		{"log not available", func(t *testing.T, f *batchFixture, pods *fakePods) *domain.Pending {
			pods.logErr = fmt.Errorf("%w: container main is waiting to start", application.ErrLogUnavailable)
			return f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
		}, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError, 1, 1},
		{"tail_bytes out of range", func(t *testing.T, f *batchFixture, _ *fakePods) *domain.Pending {
			return pendingUnchecked(t, f.rawCmd(t, siteprotocol.OpReadLogs, readLogs(siteprotocol.MaxReadBytes+1, "")))
		}, siteprotocol.OutcomeRefused, siteprotocol.ReasonInvalidPayload, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pods := &fakePods{log: []byte("secret output\n")}
			f := newReadFixture(t, pods)
			p := c.arrange(t, f, pods)
			r := f.run(t, p, false)
			expect(t, r, c.outcome, c.reason)
			if r.Outcome != siteprotocol.OutcomeSucceeded && len(r.Detail) > 0 && string(r.Detail) != "{}" && string(r.Detail) != "null" {
				t.Fatalf("a %s read carries a detail: %s", r.Outcome, r.Detail)
			}
			if finds, logs := pods.reads(); finds != c.finds || logs != c.logs {
				t.Fatalf("the port saw %d chain reads and %d log reads; want %d and %d", finds, logs, c.finds, c.logs)
			}
		})
	}
}

// An Attempt that was never started, or whose Job was removed by cleanup,
// has nothing to read: not-started, native-missing; the Pods are not
// looked at. A family without private reads answers read-logs
// unsupported-operation.
func TestReadLogsOfNothingStartedOrRemovedReadsNothing(t *testing.T) {
	pods := &fakePods{log: []byte("x\n")}
	f := newReadFixture(t, pods)
	f.run(t, f.cmd(t, siteprotocol.OpCleanup, nil), false)
	expect(t, f.run(t, f.cmd(t, siteprotocol.OpReadLogs, readLogs(10, "")), false), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
	if finds, logs := pods.reads(); finds != 0 || logs != 0 {
		t.Fatalf("read after cleanup looked at the cluster: %d, %d", finds, logs)
	}

	fresh := &batchFixture{
		native:   newFakeNative(),
		perms:    &fakePermissions{answer: domain.Permission{Allowed: true, EvidenceID: "ev-1", ValidUntil: now.Add(time.Minute)}},
		records:  &memRecords{rows: map[string]domain.NativeRecord{}},
		bindings: &memBindings{rows: map[string]map[int64]domain.MemberBinding{}},
	}
	access := application.NewAccess(fresh.bindings, fresh.native, fresh.perms, fixedClock{now})
	exec := batch.NewExecutor(access, fresh.native, jsonSpecs{}, pinned{}, fresh.records, nil, application.ExecutorConfig{}).WithReads(pods)
	reg, err := application.NewRegistry(append(application.NewMemberExecutor(fresh.bindings, nil).Registrations(), exec.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	fresh.reg = reg
	fresh.run(t, bindCmd(t, 900, bindingID, 1, 1, namespace), false)
	expect(t, fresh.run(t, fresh.cmd(t, siteprotocol.OpReadLogs, readLogs(10, "")), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonNotStarted)

	without := newReadFixture(t, nil)
	expect(t, without.run(t, without.cmd(t, siteprotocol.OpReadLogs, readLogs(10, "")), false), siteprotocol.OutcomeRefused, siteprotocol.ReasonUnsupportedOperation)
	if finds, _ := pods.reads(); finds != 0 {
		t.Fatal("the Pods were looked at")
	}
}

// otherBind binds member other (binding otherBinding) in the same
// namespace and Project.
func otherBind(t *testing.T, other, otherBinding string) []byte {
	b, err := json.Marshal(map[string]any{"id": uuidN(950), "operation": siteprotocol.OpBindMember, "issued_at": "2026-11-29T10:00:00Z",
		"member_id": other, "project_id": project, "payload": map[string]any{
			"party_id": other, "namespace": namespace, "account": siteprotocol.MemberAccount(other),
			"binding_id": otherBinding, "revision": 1, "generation": 1,
		}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bindWithUID applies a new revision of the fixture's binding with the
// account's UID.
func bindWithUID(t *testing.T, n int, uid string) []byte {
	return command(t, n, siteprotocol.OpBindMember, "", map[string]any{
		"party_id": member, "namespace": namespace, "account": siteprotocol.MemberAccount(member),
		"binding_id": bindingID, "revision": 2, "generation": 1, "account_uid": uid,
	})
}

// otherMemberCmd is a command of the fixture's Attempt and Run sent by
// member other under its own binding.
func (f *batchFixture) otherMemberCmd(t *testing.T, other, otherBinding string, payload any) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": siteprotocol.OpReadLogs, "issued_at": "2026-11-29T10:00:00Z", "member_id": other, "project_id": project,
		"family": "batch", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": otherBinding, "generation": 1},
		"payload": payload}
	b, _ := json.Marshal(c)
	return pending(t, b)
}

// rawCmd is f.cmd's JSON, unchecked.
func (f *batchFixture) rawCmd(t *testing.T, op siteprotocol.Operation, payload any) []byte {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": "batch", "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": bindingID, "generation": 1},
		"payload": payload}
	b, _ := json.Marshal(c)
	return b
}

// A log that does not come (a kubelet that trickles or never answers) is
// read at most until the read's bound from the command's start: the read
// answers failed / deadline-exceeded and the worker moves on. A Recover
// after a restart counts the time already spent: with the command begun
// longer ago than the bound, it answers deadline-exceeded without a new
// wait (the bound here is an hour: a wait begun again would not end).
// docs/site-runtime.md#command-bounds.
func TestReadLogsAtItsBoundAnswersDeadlineExceededAndARestartDoesNotWaitAgain(t *testing.T) {
	pods := &fakePods{holdLog: true}
	f := newReadFixtureWith(t, pods, application.ReadConfig{LogsTimeout: 50 * time.Millisecond})
	p := f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
	r := f.run(t, p, false)
	expect(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)

	pods = &fakePods{holdLog: true}
	f = newReadFixtureWith(t, pods, application.ReadConfig{LogsTimeout: time.Hour})
	p = f.cmd(t, siteprotocol.OpReadLogs, readLogs(100, ""))
	begun := application.WithCommandStart(context.Background(), time.Now().Add(-2*time.Hour))
	expect(t, f.runIn(t, begun, p, true), siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
}
