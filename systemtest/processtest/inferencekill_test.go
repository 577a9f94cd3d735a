package processtest

import (
	"testing"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
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
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithGrants(domain.ActionStart), harness.Bound())
	const attempts = 20
	ids := make([]string, attempts)
	var lastPrepare string
	for i := range ids {
		ids[i] = uuid.NewString()
		lastPrepare = s.Command(siteprotocol.FamilyInference, siteprotocol.OpPrepare, ids[i], inferencePreparePayload())
	}
	s.RunUntilAcknowledged(lastPrepare)

	starts := make([]string, attempts)
	for i, attempt := range ids {
		starts[i] = s.Command(siteprotocol.FamilyInference, siteprotocol.OpStart, attempt, nil)
	}
	kills := s.KillUntilAcknowledged(application.FailAfterNativeCall, starts[attempts-1], attempts+5)
	if kills != attempts {
		t.Fatalf("%d kills; want one after each of the %d InferenceService creates", kills, attempts)
	}
	e := s.Env
	recorded := map[int64][]byte{}
	for i, attempt := range ids {
		r, raw := s.Result(starts[i])
		recorded[r.Sequence] = raw
		list, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).List(s.Ctx,
			metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			t.Fatalf("attempt %d (%s) has %d InferenceServices; want exactly one", i, attempt, len(list.Items))
		}
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonCreated || len(r.NativeRefs) != 1 ||
			r.NativeRefs[0].UID != string(list.Items[0].GetUID()) {
			t.Fatalf("attempt %d: the acknowledged result %s does not name its InferenceService %s", i, raw, list.Items[0].GetUID())
		}
		if who := e.WhoCreated("inferenceservices", e.Namespace, domain.AttemptObjectName(attempt, "")); who.Actor() != s.Account {
			t.Fatalf("attempt %d: the InferenceService was created by %s", i, who.Actor())
		}
	}
	s.CheckSentResultsAreRecorded(recorded)
	t.Logf("%d kills after an InferenceService create, %d Attempts with exactly one each", kills, attempts)
}
