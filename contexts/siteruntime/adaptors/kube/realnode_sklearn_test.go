package kube_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/gittest"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/githost"
	"github.com/pharos-metallo/metallo/standins/grantprovider"
	"github.com/pharos-metallo/metallo/standins/irismodel"
)

// sklearnServerRuntime is the local cluster's ClusterServingRuntime of the
// sklearn format on the real node (the sklearnserver image,
// deploy/localcluster/README.md#the-real-nodes-model-server).
const sklearnServerRuntime = "metallo-sklearnserver"

// The member's own model from the member's repository, on the real node:
// the repository holds the iris classifier as an LFS object at the exact
// commit and not at the branch head (the model removed). An inference
// Attempt at the exact commit checks it out into its workspace, KServe's
// controller runs the sklearn runtime's model server on it, and proxy's
// predict answers the real classes [0,1,2] for the first sample of each
// class. An Attempt at the head, whose checkout lacks the model, is
// observed failed / ModelLoadFailed with the model server's real exit
// code 3 and its message, read from the predictor's Pod before KServe's
// controller reconciles again. Real: everything but the grant provider (a
// double minting real tokens at Gitea): Gitea with LFS, the workspace
// helper, the kubelet, containerd, KServe's controller, the model server.
func TestTheMembersModelFromItsWorkspacePredictsAndAMissingModelFailsToLoadOnTheRealNode(t *testing.T) {
	t.Parallel()
	lazy := &lazyGrants{}
	members := map[string]githost.User{}
	var host *githost.Host
	s := newIsvcSite(t, isvcOptions{servingRuntimes: map[string]string{irismodel.Format: sklearnServerRuntime},
		siteOptions: siteOptions{grants: lazy, checkoutCA: "repository-ca", realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
			node := e.RealNode()
			host = gittest.StartReachableAt(t, node.HostIP)
			provider := grantprovider.New(t, host, members)
			lazy.g = grants.NewHTTP(grants.HTTPConfig{BaseURL: provider.URL, Bound: 20 * time.Second}, systemClock{})
			return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
		}}})
	owner := host.CreateUser("lab")
	repo := host.CreateRepo(owner, "iris")
	reader := host.CreateUser("reader")
	host.AddReader(repo, reader)
	members[s.member] = reader
	wt := host.NewWorkTree()
	wt.TrackLFS("*.joblib")
	wt.Write(irismodel.Path, irismodel.Model())
	withModel := wt.Commit("the iris model")
	wt.Git("rm", "-q", irismodel.Path)
	wt.Write("README.md", []byte("the model was removed\n"))
	withoutModel := wt.Commit("remove the model")
	wt.Push(repo, true)
	ctx := testContext(t)
	ca, err := os.ReadFile(host.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "repository-ca"}, Data: map[string]string{kube.CAKey: string(ca)}}
	if _, err := s.e.Client.CoreV1().ConfigMaps(s.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	prepare := func(commit string) map[string]any {
		return map[string]any{"workspace_size_bytes": 64 << 20, "service_kind": "inference", "port": 8080,
			"repository": map[string]any{"url": repo.URL, "commit": commit, "lfs": true},
			"model":      map[string]any{"format": irismodel.Format, "args": []string{"--model_dir=/workspace/repo/" + irismodel.Dir}},
			"demand":     map[string]int64{"cpu": 200, "memory": 256 << 20}}
	}

	good := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, good, prepare(withModel))), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.simple(siteprotocol.OpStart, good)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(good, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	body, _ := json.Marshal(map[string]any{"instances": irismodel.Samples()})
	pd := detail[siteprotocol.ProxyDetail](t, s.proxy(good, map[string]any{"method": "POST", "path": "/v1/models/" + start.NativeRefs[0].Name + ":predict",
		"body_base64": base64.StdEncoding.EncodeToString(body), "headers": map[string][]string{"Content-Type": {"application/json"}}}))
	answer, _ := base64.StdEncoding.DecodeString(pd.BodyBase64)
	var got struct {
		Predictions []int `json:"predictions"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || pd.Status != 200 || !slices.Equal(got.Predictions, irismodel.Classes()) {
		t.Fatalf("predict: status %d, body %q (%v); want the classes %v", pd.Status, answer, err, irismodel.Classes())
	}
	t.Logf("the member's model predicted %v", got.Predictions)

	bad := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, bad, prepare(withoutModel))), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, bad), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	failed := s.observeUntil(bad, "failed", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateFailed })
	od := detail[siteprotocol.ObserveDetail](t, failed)
	if od.Reason != "ModelLoadFailed" || od.ExitCode == nil || *od.ExitCode != 3 || od.FinishedAt == "" {
		t.Fatalf("observe of the Attempt without its model: %s", failed.Detail)
	}
	t.Logf("without its model: %s %s", failed.Message, failed.Detail)
	for _, a := range []string{good, bad} {
		want(t, s.simple(siteprotocol.OpCleanup, a), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	}
}
