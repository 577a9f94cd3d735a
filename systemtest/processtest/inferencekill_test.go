package processtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func inferencePreparePayload() map[string]any {
	return map[string]any{"workspace_size_bytes": 1 << 20, "service_kind": "inference", "port": 8080,
		"model": map[string]any{"format": "huggingface", "args": []string{
			"--model_id=hf-internal-testing/tiny-random-BertForSequenceClassification", "--task=sequence_classification"}},
		"demand": map[string]int64{"cpu": 100, "memory": 64 << 20}}
}

// TestKilledAfterEachInferenceServiceCreateEveryAttemptHasExactlyOneAndItsResultNamesIt is the
// inference services' kill test on the local cluster: the real metallo runtime binary and
// execution role as subprocesses; 20 inference Attempts are prepared, then their starts
// appended; the Runtime is SIGKILLed by its after-native-call failpoint right after each
// InferenceService create returned, before the start's result was saved — 20 times — and
// restarted each time. At the end each Attempt has exactly one InferenceService (by its attempt
// label), created by the member, the acknowledged result of its start names its UID, and every
// result sent for a sequence is byte-identical to the recorded one. Real: the API server, RBAC,
// impersonation, admission policies, KServe's controller and webhooks. Simulated by KWOK: the
// Nodes.
func TestKilledAfterEachInferenceServiceCreateEveryAttemptHasExactlyOneAndItsResultNamesIt(t *testing.T) {
	a := newAppRuntime(t)
	e, site, rt, ctx := a.e, a.site, a.rt, a.ctx
	workload := func(op siteprotocol.Operation, attempt string, payload any) string {
		return a.command(siteprotocol.FamilyInference, op, attempt, payload)
	}
	const attempts = 20
	ids := make([]string, attempts)
	var lastPrepare string
	for i := range ids {
		ids[i] = uuid.NewString()
		lastPrepare = workload(siteprotocol.OpPrepare, ids[i], inferencePreparePayload())
	}
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
		starts[i] = workload(siteprotocol.OpStart, attempt, nil)
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
		t.Fatalf("%d kills; want one after each of the %d InferenceService creates", kills, attempts)
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
		list, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).List(ctx,
			metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			t.Fatalf("attempt %d (%s) has %d InferenceServices; want exactly one", i, attempt, len(list.Items))
		}
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonCreated || len(r.NativeRefs) != 1 ||
			r.NativeRefs[0].UID != string(list.Items[0].GetUID()) {
			t.Fatalf("attempt %d: the acknowledged result %s does not name its InferenceService %s", i, rec.Result, list.Items[0].GetUID())
		}
		if who := e.WhoCreated("inferenceservices", e.Namespace, domain.AttemptObjectName(attempt, "")); who.Actor() != a.account {
			t.Fatalf("attempt %d: the InferenceService was created by %s", i, who.Actor())
		}
	}
	for _, put := range site.Proxy.Puts() {
		if want, ok := recorded[put.Sequence]; ok && !bytes.Equal(put.Body, want) {
			t.Fatalf("sequence %d: a sent result differs from the recorded one:\n%s\n%s", put.Sequence, put.Body, want)
		}
	}
	t.Logf("%d kills after an InferenceService create, %d Attempts with exactly one each", kills, attempts)
}
