package processtest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// TestAPrepareOfTheOtherFamilyIsAttemptConflictAndTheStreamGoesOn runs
// the real metallo runtime binary (its Fx wiring of both families) on the
// local cluster: a batch prepare of Attempt X then an application prepare
// of X, an application prepare of Y then a batch prepare of Y, then an
// application prepare of a fresh Attempt. The second prepare of each
// Attempt is refused attempt-conflict (not unexplained-native-state: the
// worker goes on), each Attempt keeps exactly its one workspace claim, and
// the last command is answered (docs/site-runtime.md#one-lifecycle-for-every-family).
// Real: the API server, RBAC, impersonation, admission policies. Simulated
// by KWOK: the Nodes.
func TestAPrepareOfTheOtherFamilyIsAttemptConflictAndTheStreamGoesOn(t *testing.T) {
	a := newAppSetup(t)
	batchPrepare := map[string]any{"workspace_size_bytes": 1 << 20}
	x, y := uuid.NewString(), uuid.NewString()
	a.Command(siteprotocol.FamilyBatch, siteprotocol.OpPrepare, x, batchPrepare)
	crossX := appCommand(a, siteprotocol.OpPrepare, x, appPreparePayload())
	appCommand(a, siteprotocol.OpPrepare, y, appPreparePayload())
	crossY := a.Command(siteprotocol.FamilyBatch, siteprotocol.OpPrepare, y, batchPrepare)
	last := appCommand(a, siteprotocol.OpPrepare, uuid.NewString(), appPreparePayload())
	p, err := a.Runtime.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	waitAcknowledged(t, a.Site, p, last)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{crossX, crossY} {
		rec, err := a.Site.Command(id)
		if err != nil {
			t.Fatal(err)
		}
		r, err := siteprotocol.ParseResult(rec.Result)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != siteprotocol.OutcomeRefused || r.Reason != siteprotocol.ReasonAttemptConflict || len(r.NativeRefs) != 0 {
			t.Fatalf("the cross-family prepare's result %s", rec.Result)
		}
	}
	rec, _ := a.Site.Command(last)
	if r, err := siteprotocol.ParseResult(rec.Result); err != nil || r.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("the last prepare's result %s (%v)", rec.Result, err)
	}
	for _, attempt := range []string{x, y} {
		claims, err := a.Env.Client.CoreV1().PersistentVolumeClaims(a.Env.Namespace).List(a.Ctx, metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err != nil {
			t.Fatal(err)
		}
		if len(claims.Items) != 1 {
			t.Fatalf("attempt %s has %d workspace claims", attempt, len(claims.Items))
		}
	}
}
