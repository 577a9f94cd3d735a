// Package processtest proves the batch executors on real processes: the
// metallo binary's runtime role (its production composition: worker,
// journals, Site client, Kubernetes adaptor, policy-file permissions) and
// the execution role as separate subprocesses on loopback (through the
// systemtest harness's recording proxy), against the local cluster.
package processtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/siteagent"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/systemtest/harness"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

const attempts = 20

var killLine = regexp.MustCompile(`failpoint ([a-z-]+): hit \d+, killing the process with SIGKILL`)

// TestKilledAfterEachJobCreateEveryAttemptHasExactlyOneJobAndItsResultNamesThatJob
// is the kill test on the local cluster: the real metallo runtime binary
// and execution role as subprocesses; 20 Attempts are prepared, then their
// 20 starts appended; the Runtime is SIGKILLed by its after-native-call
// failpoint right after each Job create returned and before its result was
// saved — 20 times, once per Attempt — and restarted each time. At the end
// each Attempt has exactly one Job (by its attempt label), the
// acknowledged result of its start names that Job's UID, and every result
// sent for a sequence is byte-identical to the recorded one. Real: the
// API server, RBAC, impersonation, admission policies, the Job controller.
// Simulated by KWOK: the Nodes (the Jobs' Pods "run" for a second).
func TestKilledAfterEachJobCreateEveryAttemptHasExactlyOneJobAndItsResultNamesThatJob(t *testing.T) {
	e := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	project, member, binding := uuid.NewString(), uuid.NewString(), uuid.NewString()
	if err := siteagent.Project(ctx, e.Client, e.Namespace, project, true); err != nil {
		t.Fatal(err)
	}
	if err := siteagent.Member(ctx, e.Client, e.Namespace, member); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	bin := buildMetallo(t, dir)
	site, err := harness.NewSite(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	if err := site.StartServer("execution.sqlite", ""); err != nil {
		t.Fatal(err)
	}
	rt, err := harness.NewRuntime(bin, site, filepath.Join(dir, "runtime"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := siteagent.RuntimeToken(ctx, e.Client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := siteagent.WriteKubeconfig(rt.Kubeconfig, e.Config, token); err != nil {
		t.Fatal(err)
	}
	grants, _ := json.Marshal([]permissions.Grant{{Member: member, Project: project, Actions: []domain.PermissionAction{domain.ActionStart}}})
	if err := os.WriteFile(rt.Policy, grants, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := rt.Install(); err != nil {
		t.Fatal(out, err)
	}

	envelope := func(op siteprotocol.Operation) map[string]any {
		return map[string]any{"id": uuid.NewString(), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project}
	}
	appendCmd := func(c map[string]any) string {
		raw, _ := json.Marshal(c)
		if _, err := site.Append(raw); err != nil {
			t.Fatal(err)
		}
		return c["id"].(string)
	}
	runs := map[string]string{} // attempt → its run: a start must name the run its workspace was prepared for
	workload := func(op siteprotocol.Operation, attempt string, payload any) string {
		if runs[attempt] == "" {
			runs[attempt] = uuid.NewString()
		}
		c := envelope(op)
		c["family"], c["run_id"], c["attempt_id"] = "batch", runs[attempt], attempt
		c["account_ref"] = map[string]any{"binding_id": binding, "generation": 1}
		c["payload"] = payload
		return appendCmd(c)
	}
	bind := envelope(siteprotocol.OpBindMember)
	bind["payload"] = map[string]any{"party_id": member, "namespace": e.Namespace, "account": siteprotocol.MemberAccount(member),
		"binding_id": binding, "revision": 1, "generation": 1}
	appendCmd(bind)
	ids := make([]string, attempts)
	var lastPrepare string
	for i := range ids {
		ids[i] = uuid.NewString()
		lastPrepare = workload(siteprotocol.OpPrepare, ids[i], map[string]any{"workspace_size_bytes": 1 << 20})
	}

	// Bind and prepare without failpoints.
	p, err := rt.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	waitAcknowledged(t, site, p, lastPrepare)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	starts := make([]string, attempts)
	for i, attempt := range ids {
		starts[i] = workload(siteprotocol.OpStart, attempt, map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20},
			"time_limit_seconds": 600, "argv": []string{"python", "train.py", fmt.Sprint(i)}})
	}
	kills := 0
	for run := 1; ; run++ {
		if run > attempts+5 {
			t.Fatalf("%d runs without completing (%d kills)", run, kills)
		}
		p, err := rt.Start(application.FailAfterNativeCall + "@1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		done := false
		deadline := time.Now().Add(2 * time.Minute)
		for !p.Exited() && !done {
			if time.Now().After(deadline) {
				t.Fatalf("run %d neither died nor finished within 2 minutes:\n%s", run, p.Output())
			}
			select {
			case <-p.Done():
			case <-time.After(50 * time.Millisecond):
				rec, err := site.Command(starts[attempts-1])
				done = err == nil && len(rec.Result) > 0
			}
		}
		if !p.Exited() {
			if err := p.Stop(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			break
		}
		m := killLine.FindStringSubmatch(p.Output())
		if !p.Killed() || m == nil || m[1] != application.FailAfterNativeCall {
			t.Fatalf("run %d exited (%v) without being killed at %s:\n%s", run, p.ExitErr(), application.FailAfterNativeCall, p.Output())
		}
		kills++
	}
	if kills != attempts {
		first, _ := site.Command(starts[0])
		t.Fatalf("%d kills; want one after each of the %d Job creates (the first start's result: %s)", kills, attempts, first.Result)
	}

	recorded := map[int64][]byte{}
	for i, attempt := range ids {
		rec, err := site.Command(starts[i])
		if err != nil {
			t.Fatal(err)
		}
		r, err := siteprotocol.ParseResult(rec.Result)
		if err != nil {
			t.Fatal(err)
		}
		recorded[r.Sequence] = rec.Result
		jobs, err := e.Client.BatchV1().Jobs(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 1 {
			t.Fatalf("attempt %d (%s) has %d Jobs; want exactly one", i, attempt, len(jobs.Items))
		}
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonCreated || len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(jobs.Items[0].UID) {
			t.Fatalf("attempt %d: the acknowledged result %s does not name its Job %s", i, rec.Result, jobs.Items[0].UID)
		}
		if who := e.WhoCreated("jobs", e.Namespace, jobs.Items[0].Name); who.Actor() != "system:serviceaccount:"+e.Namespace+":"+siteprotocol.MemberAccount(member) {
			t.Fatalf("attempt %d: Job created by %s", i, who.Actor())
		}
	}
	for _, put := range site.Proxy.Puts() {
		if want, ok := recorded[put.Sequence]; ok && !bytes.Equal(put.Body, want) {
			t.Fatalf("sequence %d: a sent result differs from the recorded one:\n%s\n%s", put.Sequence, put.Body, want)
		}
	}
	t.Logf("%d kills after a Job create, %d Attempts with one Job each", kills, attempts)
}

func waitAcknowledged(t *testing.T, site *harness.Site, p *harness.Process, id string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rec, err := site.Command(id)
		if err == nil && len(rec.Result) > 0 {
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("command %s not acknowledged (%v):\n%s", id, err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildMetallo builds app/cmd/metallo into dir.
func buildMetallo(t *testing.T, dir string) string {
	t.Helper()
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "metallo")
	cmd := exec.Command("go", "build", "-o", bin, "./app/cmd/metallo")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
