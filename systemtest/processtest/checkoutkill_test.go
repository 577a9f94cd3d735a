package processtest

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/gittest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/githost"
	"github.com/pharos-metallo/metallo/standins/grantprovider"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// TestKilledAtEveryRecordedStepOfACheckoutPrepareLeavesNoGrantSecretOrHelper
// is the kill test of a prepare with a repository: the metallo binary's
// runtime role, with the grant provider double minting real tokens at the
// Git host (Gitea), prepares six Attempts from a repository and is
// SIGKILLed by its own failpoints — after-native-record and
// after-native-call in turn, each at its second hit in the new process, so
// every run dies at least one recorded step further — until every prepare
// is acknowledged. Afterwards each Attempt has no Secret and no helper left
// (and had at most one of each), no grant token is left at the Git host,
// and each acknowledged result names the live claim's UID. Real: the
// runtime and execution processes, the API server, admission, the Git
// host's tokens. Simulated by KWOK: the helper "runs" a second and
// terminates with the outcome line of its annotation (no container runs:
// the real-node lane runs workspace-init itself).
func TestKilledAtEveryRecordedStepOfACheckoutPrepareLeavesNoGrantSecretOrHelper(t *testing.T) {
	const attempts = 6
	s := harness.NewSetup(t, harness.WithProject(), harness.WithMember(), harness.WithPlatformImage(), harness.WithGrants(domain.ActionStart), harness.Bound())
	e, ctx, site := s.Env, s.Ctx, s.Site
	host := gittest.Start(t)
	repo := host.CreateRepo(host.CreateUser("lab"), "model")
	reader := host.CreateUser("member-" + s.Member[:8])
	host.AddReader(repo, reader)
	provider := grantprovider.New(t, host, map[string]githost.User{s.Member: reader})
	commit := strings.Repeat("a", 40)
	outcome := domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Message: "checked out", Commit: commit, Bytes: 4096, Fetch: "shallow"}
	var annotations bytes.Buffer
	w := csv.NewWriter(&annotations)
	_ = w.Write([]string{"localcluster.metallo.dev/run-seconds=1", "localcluster.metallo.dev/termination-message=" + string(bytes.TrimSpace(outcome.Encode()))})
	w.Flush()
	flags := []string{"--repository-grants", "http:" + provider.URL, "--repository-grants-bound", "20s",
		"--batch-pod-annotations", strings.TrimSpace(annotations.String()), "--checkout-timeout", "1m"}

	ids, prepares := make([]string, attempts), make([]string, attempts)
	for i := range ids {
		ids[i] = uuid.NewString()
		prepares[i] = s.Command(siteprotocol.FamilyBatch, siteprotocol.OpPrepare, ids[i],
			map[string]any{"workspace_size_bytes": 1 << 20, "repository": map[string]any{"url": repo.URL, "commit": commit}})
	}

	// Every helper and Secret the API server ever held, by UID.
	seen := map[string]map[string]bool{} // attempt → kind/uid
	look := func() {
		for _, list := range []func() ([]metav1.Object, error){
			func() ([]metav1.Object, error) {
				l, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
				var out []metav1.Object
				for i := range l.Items {
					out = append(out, &l.Items[i])
				}
				return out, err
			},
			func() ([]metav1.Object, error) {
				l, err := e.Client.CoreV1().Secrets(e.Namespace).List(ctx, metav1.ListOptions{})
				var out []metav1.Object
				for i := range l.Items {
					if l.Items[i].Type == corev1.SecretTypeOpaque {
						out = append(out, &l.Items[i])
					}
				}
				return out, err
			},
		} {
			objs, err := list()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				a := o.GetLabels()[kube.LabelAttempt]
				if a == "" {
					continue
				}
				if seen[a] == nil {
					seen[a] = map[string]bool{}
				}
				seen[a][o.GetName()+"/"+string(o.GetUID())] = true
			}
		}
	}

	fps := []string{application.FailAfterNativeRecord, application.FailAfterNativeCall}
	kills := 0
	for run := 0; ; run++ {
		if run > 200 {
			t.Fatalf("%d runs without completing (%d kills)", run, kills)
		}
		// The second hit: a recovery may repeat its first step (a record
		// saved again, a delete sent again), never two.
		fp := fps[run%2] + "@2"
		p := s.Start(fp, flags...)
		done := false
		deadline := time.Now().Add(3 * time.Minute)
		for !p.Exited() && !done {
			if time.Now().After(deadline) {
				t.Fatalf("run %d neither died nor finished within 3 minutes:\n%s", run, p.Output())
			}
			select {
			case <-p.Done():
			case <-time.After(100 * time.Millisecond):
				look()
				rec, err := site.Command(prepares[attempts-1])
				done = err == nil && len(rec.Result) > 0
			}
		}
		look()
		if !p.Exited() {
			if err := p.Stop(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			break
		}
		m := killLine.FindStringSubmatch(p.Output())
		if !p.Killed() || m == nil {
			t.Fatalf("run %d exited (%v) without being killed at %s:\n%s", run, p.ExitErr(), fp, p.Output())
		}
		kills++
	}
	for i, attempt := range ids {
		rec, err := site.Command(prepares[i])
		if err != nil {
			t.Fatal(err)
		}
		r, err := siteprotocol.ParseResult(rec.Result)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != siteprotocol.OutcomeSucceeded || r.Reason != siteprotocol.ReasonPrepared || len(r.NativeRefs) != 1 {
			t.Fatalf("attempt %d: result %s", i, rec.Result)
		}
		claim, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixWorkspace), metav1.GetOptions{})
		if err != nil || string(claim.UID) != r.NativeRefs[0].UID {
			t.Fatalf("attempt %d: the result names claim %s; live: %v %v", i, r.NativeRefs[0].UID, claim.UID, err)
		}
		helpers, secrets := 0, 0
		for k := range seen[attempt] {
			switch {
			case strings.HasPrefix(k, domain.AttemptObjectName(attempt, domain.SuffixHelper)+"/"):
				helpers++
			case strings.HasPrefix(k, domain.AttemptObjectName(attempt, domain.SuffixCredential)+"/"):
				secrets++
			}
		}
		if helpers > 1 || secrets > 1 {
			t.Errorf("attempt %d had %d helpers and %d Secrets", i, helpers, secrets)
		}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixHelper), metav1.GetOptions{}); err == nil {
			t.Errorf("attempt %d's helper still exists", i)
		}
		if _, err := e.Client.CoreV1().Secrets(e.Namespace).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixCredential), metav1.GetOptions{}); err == nil {
			t.Errorf("attempt %d's credential Secret still exists", i)
		}
	}
	tokens, err := host.Tokens(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 0 || len(provider.Grants()) != attempts {
		t.Fatalf("the Git host holds %d tokens of the member (%+v); the provider issued %d grants", len(tokens), tokens, len(provider.Grants()))
	}
	if kills < 20 {
		t.Fatalf("only %d kills; want at least 20", kills)
	}
	t.Logf("%d kills over %d checkout prepares; no grant, Secret or helper left", kills, attempts)
}
