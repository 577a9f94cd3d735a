// Package processtest proves the batch executors on real processes: the
// metallo binary's runtime role (its production composition: worker,
// journals, Site client, Kubernetes adaptor, policy-file permissions) and
// the execution role as separate subprocesses on loopback (through the
// systemtest harness's recording proxy), against the local cluster.
package processtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

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
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithGrants(domain.ActionStart), harness.Bound())
	killAfterEachJobCreate(t, s, killTest{attempts: 20, argv: func(i int) []string { return []string{"python", "train.py", fmt.Sprint(i)} }})
}

// TestKilledAfterEachJobCreateOnTheRealNodeEveryAttemptRunsOnceInItsOneJobAndPod
// is the kill test of batch starts on the real node: the Runtime renders
// every Pod onto it (its Site scheduling flags) in the platform image, and
// is SIGKILLed right after each of 10 Job creates, before the result is
// saved. Besides one Job per Attempt named by its result, each Attempt's
// Job has one Pod, which ran once (no restart, one success, no failure):
// the container appended one line to its workspace and its log shows it
// once. Real: the API server, RBAC, impersonation, admission policies, the
// Job controller, the scheduler, the kubelet, containerd and runc; KWOK is
// not involved.
func TestKilledAfterEachJobCreateOnTheRealNodeEveryAttemptRunsOnceInItsOneJobAndPod(t *testing.T) {
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithGrants(domain.ActionStart), harness.OnTheRealNode(), harness.Bound())
	e, node := s.Env, s.Node
	killAfterEachJobCreate(t, s, killTest{
		attempts: 10,
		argv: func(int) []string {
			return []string{"sh", "-c", `echo "run of $MARK" >> /workspace/runs; cat /workspace/runs`}
		},
		env: func(_ int, attempt string) map[string]string { return map[string]string{"MARK": attempt} },
		check: func(ctx context.Context, ids []string, jobs []batchv1.Job) {
			for i, job := range jobs {
				done := e.WaitForJob(job.Name, 3*time.Minute, "Complete", func(j *batchv1.Job) bool {
					_, ok := kubetest.JobCondition(j, batchv1.JobComplete)
					_, failed := kubetest.JobCondition(j, batchv1.JobFailed)
					if failed {
						t.Fatalf("attempt %d: Job %s failed", i, j.Name)
					}
					return ok
				})
				if done.Status.Succeeded != 1 || done.Status.Failed != 0 {
					t.Fatalf("attempt %d: Job %s succeeded %d, failed %d; want one run", i, done.Name, done.Status.Succeeded, done.Status.Failed)
				}
				pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
				if err != nil {
					t.Fatal(err)
				}
				if len(pods.Items) != 1 {
					t.Fatalf("attempt %d: Job %s has %d Pods; want one", i, job.Name, len(pods.Items))
				}
				pod := pods.Items[0]
				if pod.Spec.NodeName != node.Name || len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].RestartCount != 0 {
					t.Fatalf("attempt %d: Pod %s on %q, container statuses %+v", i, pod.Name, pod.Spec.NodeName, pod.Status.ContainerStatuses)
				}
				line := "run of " + ids[i]
				if log := e.PodLogs(e.Namespace, pod.Name, kube.ContainerName); strings.Count(log, line) != 1 || strings.Count(log, "run of ") != 1 {
					t.Fatalf("attempt %d: the workspace says the command ran other than once:\n%s", i, log)
				}
				runs, err := os.ReadFile(filepath.Join(workspaceDir(ctx, t, e, ids[i]), "runs"))
				if err != nil || string(runs) != line+"\n" {
					t.Fatalf("attempt %d: the workspace's runs file %q (%v); want one line", i, runs, err)
				}
			}
			t.Logf("%d Attempts on %s: one Job, one Pod, one run each", len(jobs), node.Name)
		},
	})
}

// workspaceDir is the host directory of the Attempt's workspace claim (the
// local cluster's hostPath volume, on this machine like the real node).
func workspaceDir(ctx context.Context, t *testing.T, e *kubetest.Env, attempt string) string {
	t.Helper()
	pvc, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixWorkspace), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		t.Fatalf("the volume of claim %s: %v", pvc.Name, err)
	}
	return pv.Spec.HostPath.Path
}

// killTest shapes one run of killAfterEachJobCreate.
type killTest struct {
	attempts int
	// argv is Attempt i's command; env its environment.
	argv func(i int) []string
	env  func(i int, attempt string) map[string]string
	// check runs after the kills, with each Attempt's ID and its one Job.
	check func(ctx context.Context, ids []string, jobs []batchv1.Job)
}

// killAfterEachJobCreate prepares k.attempts Attempts, appends their
// starts, SIGKILLs the Runtime after each Job create before its result is
// saved (restarting it each time), and checks one Job per Attempt whose UID
// the acknowledged result names, created by the member, and results sent
// byte-identical to the recorded ones; then k.check.
func killAfterEachJobCreate(t *testing.T, s *harness.Setup, k killTest) {
	attempts := k.attempts
	ids := make([]string, attempts)
	var lastPrepare string
	for i := range ids {
		ids[i] = uuid.NewString()
		lastPrepare = s.Command(siteprotocol.FamilyBatch, siteprotocol.OpPrepare, ids[i], map[string]any{"workspace_size_bytes": 1 << 20})
	}
	// Bind and prepare without failpoints.
	s.RunUntilAcknowledged(lastPrepare)

	starts := make([]string, attempts)
	for i, attempt := range ids {
		payload := map[string]any{"demand": map[string]int64{"cpu": 100, "memory": 64 << 20}, "time_limit_seconds": 600, "argv": k.argv(i)}
		if k.env != nil {
			payload["env"] = k.env(i, attempt)
		}
		starts[i] = s.Command(siteprotocol.FamilyBatch, siteprotocol.OpStart, attempt, payload)
	}
	kills := s.KillUntilAcknowledged(application.FailAfterNativeCall, starts[attempts-1], attempts+5)
	if kills != attempts {
		_, first := s.Result(starts[0])
		t.Fatalf("%d kills; want one after each of the %d Job creates (the first start's result: %s)", kills, attempts, first)
	}

	e := s.Env
	recorded := map[int64][]byte{}
	var all []batchv1.Job
	for i, attempt := range ids {
		r, raw := s.Result(starts[i])
		recorded[r.Sequence] = raw
		jobs, err := e.Client.BatchV1().Jobs(e.Namespace).List(s.Ctx, metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 1 {
			t.Fatalf("attempt %d (%s) has %d Jobs; want exactly one", i, attempt, len(jobs.Items))
		}
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonCreated || len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(jobs.Items[0].UID) {
			t.Fatalf("attempt %d: the acknowledged result %s does not name its Job %s", i, raw, jobs.Items[0].UID)
		}
		if who := e.WhoCreated("jobs", e.Namespace, jobs.Items[0].Name); who.Actor() != s.Account {
			t.Fatalf("attempt %d: Job created by %s", i, who.Actor())
		}
		all = append(all, jobs.Items[0])
	}
	s.CheckSentResultsAreRecorded(recorded)
	t.Logf("%d kills after a Job create, %d Attempts with one Job each", kills, attempts)
	if k.check != nil {
		k.check(s.Ctx, ids, all)
	}
}
