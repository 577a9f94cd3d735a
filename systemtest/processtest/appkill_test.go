package processtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// newAppSetup is the Setup of the application tests: a Site project
// namespace with one member granted start, the execution role and an
// installed Runtime (not started) with the member bound.
func newAppSetup(t *testing.T) *harness.Setup {
	return harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithGrants(domain.ActionStart), harness.Bound())
}

// appCommand appends an application command of the Attempt.
func appCommand(s *harness.Setup, op siteprotocol.Operation, attempt string, payload any) string {
	return s.Command(siteprotocol.FamilyApplication, op, attempt, payload)
}

func appPreparePayload() map[string]any {
	return map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "application",
		"image": "registry.example/app@sha256:" + string(bytes.Repeat([]byte("5"), 64)), "port": 8080,
		"readiness": map[string]any{"path": "/healthz"}, "demand": map[string]int64{"cpu": 100, "memory": 64 << 20}}
}

// TestKilledAfterEachDeploymentAndServiceCreateEveryAttemptHasOneOfEachAndItsResultNamesThem
// is the application services' kill test on the local cluster: the real
// metallo runtime binary and execution role as subprocesses; 10
// application Attempts are prepared, then their starts appended; the
// Runtime is SIGKILLed by its after-native-call failpoint right after each
// Deployment create and right after each Service create, before the
// start's result was saved — 20 times — and restarted each time. At the
// end each Attempt has exactly one Deployment and one Service (by its
// attempt label), created by the member, the acknowledged result of its
// start names both UIDs, and every result sent for a sequence is
// byte-identical to the recorded one. Real: the API server, RBAC,
// impersonation, admission policies, the Deployment and ReplicaSet
// controllers. Simulated by KWOK: the Nodes.
func TestKilledAfterEachDeploymentAndServiceCreateEveryAttemptHasOneOfEachAndItsResultNamesThem(t *testing.T) {
	a := newAppSetup(t)
	const attempts = 10
	ids := make([]string, attempts)
	var lastPrepare string
	for i := range ids {
		ids[i] = uuid.NewString()
		lastPrepare = appCommand(a, siteprotocol.OpPrepare, ids[i], appPreparePayload())
	}
	a.RunUntilAcknowledged(lastPrepare)

	starts := make([]string, attempts)
	for i, attempt := range ids {
		starts[i] = appCommand(a, siteprotocol.OpStart, attempt, nil)
	}
	kills := a.KillUntilAcknowledged(application.FailAfterNativeCall, starts[attempts-1], 2*attempts+5)
	if kills != 2*attempts {
		t.Fatalf("%d kills; want one after each of the %d Deployment and %d Service creates", kills, attempts, attempts)
	}
	e, ctx := a.Env, a.Ctx
	recorded := map[int64][]byte{}
	for i, attempt := range ids {
		r, raw := a.Result(starts[i])
		recorded[r.Sequence] = raw
		sel := metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt}
		deps, err := e.Client.AppsV1().Deployments(e.Namespace).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		svcs, err := e.Client.CoreV1().Services(e.Namespace).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(deps.Items) != 1 || len(svcs.Items) != 1 {
			t.Fatalf("attempt %d (%s) has %d Deployments and %d Services; want exactly one of each", i, attempt, len(deps.Items), len(svcs.Items))
		}
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonCreated || len(r.NativeRefs) != 2 ||
			r.NativeRefs[0].UID != string(deps.Items[0].UID) || r.NativeRefs[1].UID != string(svcs.Items[0].UID) {
			t.Fatalf("attempt %d: the acknowledged result %s does not name its Deployment %s and Service %s", i, raw, deps.Items[0].UID, svcs.Items[0].UID)
		}
		for _, kind := range []string{"deployments", "services"} {
			if who := e.WhoCreated(kind, e.Namespace, domain.AttemptObjectName(attempt, "")); who.Actor() != a.Account {
				t.Fatalf("attempt %d: %s created by %s", i, kind, who.Actor())
			}
		}
	}
	a.CheckSentResultsAreRecorded(recorded)
	t.Logf("%d kills after a Deployment or Service create, %d Attempts with one of each", kills, attempts)
}

// TestKilledAtTheCompensatingDeleteNothingOfTheAttemptIsLeftAndTheStartIsRefused:
// a count quota refuses the Service after the Deployment was created; the
// Runtime is SIGKILLed at its compensating delete (the Deployment recorded
// deleting, not yet deleted), restarted, and then nothing of the Attempt
// exists and the acknowledged result is refused / native-request-denied
// with no native reference. Real: ResourceQuota admission, the API server,
// the real binary and its journals.
func TestKilledAtTheCompensatingDeleteNothingOfTheAttemptIsLeftAndTheStartIsRefused(t *testing.T) {
	a := newAppSetup(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-services"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/services": resource.MustParse("0")}}}
	if _, err := a.Env.Client.CoreV1().ResourceQuotas(a.Env.Namespace).Create(a.Ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		q, err := a.Env.Client.CoreV1().ResourceQuotas(a.Env.Namespace).Get(a.Ctx, "no-services", metav1.GetOptions{})
		if err == nil && q.Status.Hard != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the quota's status is never recorded")
		}
		time.Sleep(100 * time.Millisecond)
	}
	attempt := uuid.NewString()
	appCommand(a, siteprotocol.OpPrepare, attempt, appPreparePayload())
	start := appCommand(a, siteprotocol.OpStart, attempt, nil)
	p, err := a.Runtime.Start(application.FailAtCompensatingDelete)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	select {
	case <-p.Done():
	case <-time.After(2 * time.Minute):
		t.Fatalf("not killed at %s:\n%s", application.FailAtCompensatingDelete, p.Output())
	}
	if m := killLine.FindStringSubmatch(p.Output()); !p.Killed() || m == nil || m[1] != application.FailAtCompensatingDelete {
		t.Fatalf("exited (%v) without being killed at %s:\n%s", p.ExitErr(), application.FailAtCompensatingDelete, p.Output())
	}
	sel := metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt}
	if deps, err := a.Env.Client.AppsV1().Deployments(a.Env.Namespace).List(a.Ctx, sel); err != nil || len(deps.Items) != 1 {
		t.Fatalf("before recovery the Deployment must still exist: %v", err)
	}
	p, err = a.Runtime.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	waitAcknowledged(t, a.Site, p, start)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	rec, err := a.Site.Command(start)
	if err != nil {
		t.Fatal(err)
	}
	r, err := siteprotocol.ParseResult(rec.Result)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != siteprotocol.OutcomeRefused || r.Reason != siteprotocol.ReasonNativeRequestDenied || len(r.NativeRefs) != 0 {
		t.Fatalf("the start's result %s", rec.Result)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		deps, err := a.Env.Client.AppsV1().Deployments(a.Env.Namespace).List(a.Ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		svcs, err := a.Env.Client.CoreV1().Services(a.Env.Namespace).List(a.Ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		rss, err := a.Env.Client.AppsV1().ReplicaSets(a.Env.Namespace).List(a.Ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(deps.Items)+len(svcs.Items)+len(rss.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after recovery %d Deployments, %d ReplicaSets, %d Services of the Attempt exist", len(deps.Items), len(rss.Items), len(svcs.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
