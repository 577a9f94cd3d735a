package processtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/journaltest"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

var discardWarning = regexp.MustCompile(`"level":"warn".*"msg":"journal delivery\.sqlite-wal: a damaged last commit is discarded`)

// TestADamagedLastCommitWithoutItsIndexIsRedoneWithOneJobPerAttempt is the
// kill-and-damage test of the batch family on the local cluster
// (docs/site-runtime.md#a-discarded-last-commit): the real metallo runtime
// binary and execution role as subprocesses; the Runtime is SIGKILLed by a
// failpoint, delivery.sqlite's -shm is removed and one byte is flipped in
// the frame that ends the write-ahead log's last commit, and the Runtime is
// started again. SQLite discards that commit; the Runtime logs a warning
// naming delivery.sqlite-wal and redoes what the commit held:
//   - the start's result (commit #2): the start is recovered, and the
//     recovered result is byte-identical to the lost one;
//   - the start itself (commit #1), killed right after its Job create: the
//     start is pulled and executed again and adopts its own Job;
//   - the folded clear of the previous start and the next start's commit
//     #1, killed after that Job create: the previous start's saved result
//     is sent again (an exact replay), the next start is executed again and
//     adopts its Job;
//   - an observe's result the server already recorded, the Job deleted
//     since: the recovered observe differs and the worker stops
//     (result-conflict).
//
// Each Attempt has exactly one Job, created by the member, and the
// acknowledged result names it. Real: the API server, RBAC, impersonation,
// admission policies, the Job controller. Simulated by KWOK: the Nodes.
func TestADamagedLastCommitWithoutItsIndexIsRedoneWithOneJobPerAttempt(t *testing.T) {
	l := newDiscardLane(t)

	t.Run("the start's result: recovered byte for byte", func(t *testing.T) {
		attempt := l.prepared(t)
		start := l.start(t, attempt)
		l.crash(t, application.FailAfterPersistResult+"@1")
		lost := l.savedResult(t)
		l.damage(t, "created in namespace")
		p := l.restart(t)
		mustLog(t, p, `"msg":"runtime worker started".*"pending_result_saved":false`)
		waitAcknowledged(t, l.site, p, start)
		mustLog(t, p, `"msg":"result delivered".*"path":"recovered"`)
		l.stop(t, p)
		rec, _ := l.oneJobNamedByItsStart(t, attempt, start)
		if !bytes.Equal(rec.Result, lost) {
			t.Fatalf("the recovered result differs from the lost one:\n%s\n%s", rec.Result, lost)
		}
	})

	t.Run("the start's commit #1: executed again, adopting its Job", func(t *testing.T) {
		attempt := l.prepared(t)
		start := l.start(t, attempt)
		l.crash(t, application.FailAfterNativeCall+"@1", "--pull-limit", "1")
		l.damage(t, start)
		p := l.restart(t)
		if started := mustLog(t, p, `"msg":"runtime worker started"`); strings.Contains(started, `"pending"`) {
			t.Fatalf("the start is still pending after its commit was discarded: %s", started)
		}
		waitAcknowledged(t, l.site, p, start)
		l.stop(t, p)
		l.oneJobNamedByItsStart(t, attempt, start)
	})

	t.Run("the folded clear and the next start's commit #1: replayed, then executed again adopting its Job", func(t *testing.T) {
		first, second := l.prepared(t), l.prepared(t)
		startFirst, startSecond := l.start(t, first), l.start(t, second)
		l.crash(t, application.FailAfterNativeCall+"@2", "--pull-limit", "100", "--fold-acknowledgement=true")
		if rec, err := l.site.Command(startFirst); err != nil || len(rec.Result) == 0 {
			t.Fatalf("the first start was not acknowledged before the kill (%v)", err)
		}
		l.damage(t, startSecond)
		p := l.restart(t)
		mustLog(t, p, `"msg":"runtime worker started".*"pending_result_saved":true`)
		waitAcknowledged(t, l.site, p, startSecond)
		mustLog(t, p, `"msg":"result delivered".*"path":"replayed"`)
		l.stop(t, p)
		l.oneJobNamedByItsStart(t, first, startFirst)
		l.oneJobNamedByItsStart(t, second, startSecond)
	})

	t.Run("an observe the server recorded differently: the worker stops", func(t *testing.T) {
		attempt := l.prepared(t)
		start := l.start(t, attempt)
		p := l.run(t, start)
		l.stop(t, p)
		_, job := l.oneJobNamedByItsStart(t, attempt, start)
		observe := l.workload(t, siteprotocol.OpObserve, attempt, nil)
		l.crash(t, application.FailAfterSend+"@1", "--pull-limit", "1")
		recorded, err := l.site.Command(observe)
		if err != nil || len(recorded.Result) == 0 {
			t.Fatalf("the observe's result was not recorded before the kill (%v)", err)
		}
		// The Job moves on: deleted out of band.
		l.deleteJob(t, job)
		l.damage(t, "")
		p = l.restart(t)
		waitMetric(t, p, `metallo_runtime_stopped{reason="`+string(domain.StopResultConflict)+`"}`, 1)
		mustLog(t, p, `"msg":"runtime worker stopped.*"reason":"`+string(domain.StopResultConflict)+`"`)
		l.stop(t, p)
		after, err := l.site.Command(observe)
		if err != nil || !bytes.Equal(after.Result, recorded.Result) {
			t.Fatalf("the server's recorded observe changed (%v):\n%s\n%s", err, after.Result, recorded.Result)
		}
	})
}

// discardLane is one Runtime installation on the local cluster against a
// real execution role, its member bound and allowed to start.
type discardLane struct {
	e                        *kubetest.Env
	site                     *harness.Site
	rt                       *harness.Runtime
	member, project, binding string
	runs                     map[string]string
}

func newDiscardLane(t *testing.T) *discardLane {
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithGrants(domain.ActionStart), harness.Installed())
	e := s.Env
	l := &discardLane{e: e, site: s.Site, rt: s.Runtime, project: s.Project, member: s.Member, binding: s.Binding, runs: map[string]string{}}
	bind := l.envelope(siteprotocol.OpBindMember)
	bind["payload"] = map[string]any{"party_id": l.member, "namespace": e.Namespace, "account": siteprotocol.MemberAccount(l.member),
		"binding_id": l.binding, "revision": 1, "generation": 1}
	l.stop(t, l.run(t, l.appendCmd(t, bind)))
	return l
}

func (l *discardLane) envelope(op siteprotocol.Operation) map[string]any {
	return map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": l.member, "project_id": l.project}
}

func (l *discardLane) appendCmd(t *testing.T, c map[string]any) string {
	t.Helper()
	raw, _ := json.Marshal(c)
	if _, err := l.site.Append(raw); err != nil {
		t.Fatal(err)
	}
	return c["id"].(string)
}

// workload appends a batch command of attempt (its run fixed by its first
// command).
func (l *discardLane) workload(t *testing.T, op siteprotocol.Operation, attempt string, payload any) string {
	if l.runs[attempt] == "" {
		l.runs[attempt] = uuid.NewString()
	}
	c := l.envelope(op)
	c["family"], c["run_id"], c["attempt_id"] = "batch", l.runs[attempt], attempt
	c["account_ref"] = map[string]any{"binding_id": l.binding, "generation": 1}
	if payload != nil {
		c["payload"] = payload
	}
	return l.appendCmd(t, c)
}

// prepared returns a new Attempt whose workspace is prepared and
// acknowledged (no Runtime left running).
func (l *discardLane) prepared(t *testing.T) string {
	attempt := uuid.NewString()
	l.stop(t, l.run(t, l.workload(t, siteprotocol.OpPrepare, attempt, map[string]any{"workspace_size_bytes": 1 << 20})))
	return attempt
}

// start appends attempt's start.
func (l *discardLane) start(t *testing.T, attempt string) string {
	return l.workload(t, siteprotocol.OpStart, attempt, map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20},
		"time_limit_seconds": 600, "argv": []string{"python", "train.py", attempt}})
}

// run starts the Runtime without failpoints and waits until command id, the
// only one not yet acknowledged, is acknowledged by the server and cleared in
// the Runtime's journal. The server records the result before the Runtime
// clears it: a stop in between leaves it pending, and the next Runtime's first
// send would be its replay, which a FailAfterSend@1 armed for the next command
// would hit instead (seen once in CI).
func (l *discardLane) run(t *testing.T, id string) *harness.Process {
	t.Helper()
	p, err := l.rt.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	waitAcknowledged(t, l.site, p, id)
	waitMetric(t, p, "metallo_runtime_pending_sequence", 0)
	return p
}

func (l *discardLane) stop(t *testing.T, p *harness.Process) {
	t.Helper()
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// crash runs the Runtime with failpoint armed until it kills the process.
func (l *discardLane) crash(t *testing.T, failpoint string, flags ...string) {
	t.Helper()
	p, err := l.rt.Start(failpoint, flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.Wait(2 * time.Minute); err != nil {
		t.Fatalf("%v:\n%s", err, p.Output())
	}
	m := killLine.FindStringSubmatch(p.Output())
	if !p.Killed() || m == nil || m[1] != strings.Split(failpoint, "@")[0] {
		t.Fatalf("armed %s, exited (%v) without being killed there:\n%s", failpoint, p.ExitErr(), p.Output())
	}
}

// savedResult reads the pending command's saved result from a copy of the
// crash image (the image itself stays as the crash left it).
func (l *discardLane) savedResult(t *testing.T) []byte {
	t.Helper()
	image := filepath.Join(t.TempDir(), "journals")
	if err := os.Mkdir(image, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(l.rt.JournalDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(l.rt.JournalDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(image, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	j, err := journal.Open(context.Background(), image, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	cp, err := j.Restore(context.Background())
	if err != nil || cp.Pending == nil || !cp.Pending.HasResult() {
		t.Fatalf("the crash image holds no saved result (%v)", err)
	}
	return cp.Pending.Result
}

// damage removes delivery.sqlite's -shm and flips one byte of marker in
// the frame that ends its write-ahead log's last commit.
func (l *discardLane) damage(t *testing.T, marker string) {
	t.Helper()
	path := filepath.Join(l.rt.JournalDir, domain.DeliveryFile)
	if err := os.Remove(path + "-shm"); err != nil {
		t.Fatal(err)
	}
	if err := journaltest.FlipInLastFrame(path+"-wal", marker); err != nil {
		t.Fatal(err)
	}
}

// restart starts the Runtime without failpoints and waits for its warning
// that delivery.sqlite-wal's last commit is discarded.
func (l *discardLane) restart(t *testing.T) *harness.Process {
	t.Helper()
	p, err := l.rt.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if _, err := p.WaitForLog(discardWarning, time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

// oneJobNamedByItsStart checks that attempt has exactly one Job, created
// by the member, and that start's acknowledged result names it; it returns
// the start's record and the Job.
func (l *discardLane) oneJobNamedByItsStart(t *testing.T, attempt, start string) (siteprotocol.CommandRecord, batchv1.Job) {
	t.Helper()
	rec, err := l.site.Command(start)
	if err != nil {
		t.Fatal(err)
	}
	r, err := siteprotocol.ParseResult(rec.Result)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := l.e.Client.BatchV1().Jobs(l.e.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("attempt %s has %d Jobs; want exactly one", attempt, len(jobs.Items))
	}
	job := jobs.Items[0]
	if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonCreated || len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(job.UID) {
		t.Fatalf("the acknowledged result %s does not name attempt %s's Job %s", rec.Result, attempt, job.UID)
	}
	if who := l.e.WhoCreated("jobs", l.e.Namespace, job.Name); who.Actor() != "system:serviceaccount:"+l.e.Namespace+":"+siteprotocol.MemberAccount(l.member) {
		t.Fatalf("Job %s created by %s", job.Name, who.Actor())
	}
	return rec, job
}

func (l *discardLane) deleteJob(t *testing.T, job batchv1.Job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	if err := l.e.Client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := l.e.Client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("Job %s is not gone", job.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mustLog waits for p's first log line matching pattern and returns it.
func mustLog(t *testing.T, p *harness.Process, pattern string) string {
	t.Helper()
	line, err := p.WaitForLog(regexp.MustCompile(pattern), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func waitMetric(t *testing.T, p *harness.Process, series string, value float64) {
	t.Helper()
	addr, err := harness.AdminAddr(p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		v, found, err := harness.Metric(addr, series)
		if err == nil && found && v == value {
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("%s never became %v (last %v, found %v, %v):\n%s", series, value, v, found, err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
