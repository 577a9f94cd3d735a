package kube_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// httpServiceRuntime is the local cluster's ClusterServingRuntime of the
// real node: the httpservice image by digest speaking the KServe v1
// protocol of the model its --model_name= names
// (deploy/localcluster/README.md#the-real-nodes-model-server), installed
// by make cluster-up with the real node.
const httpServiceRuntime = "metallo-httpservice"

// An inference service on the real node, pinned to the httpservice
// ServingRuntime and made Ready by KServe's controller and the kubelet's
// readiness probe: read-logs of its predictor Pod — found by Pod →
// ReplicaSet → the predictor Deployment → the recorded InferenceService,
// its kserve-container's arguments under the private argument rule —
// answers the model server's real log, not truncated. proxy, through the
// API server's service proxy to KServe's predictor Service: a KServe v1
// predict (POST /v1/models/<name>:predict) answers the model's 200 with
// its JSON and the instances echoed as predictions; a POST to /echo shows
// the headers filtered both ways (the member's Authorization and Cookie
// never reach the server, its Set-Cookie never comes back, multi-valued
// headers kept in order); the model's own 400 for a body that is not a
// predict request is its answer. Real: containerd, the kubelet, KServe's
// controller, the Deployment and ReplicaSet controllers, the API server's
// service proxy, the Pod's network.
func TestInferenceReadsOnTheRealNodeReadThePredictorsLogAndAskTheModel(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{servingRuntimes: map[string]string{"huggingface": httpServiceRuntime}, siteOptions: siteOptions{realNode: func(e *kubetest.Env) (string, kube.Scheduling) {
		node := e.RealNode()
		return node.Image(t, kubetest.ImagePlatform), kube.Scheduling{NodeSelector: node.NodeSelector(), Tolerations: node.Tolerations()}
	}}})
	attempt := uuid.NewString()
	p := isvcPrepare()
	p["demand"] = map[string]int64{"cpu": 100, "memory": 64 << 20}
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, p)), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.simple(siteprotocol.OpStart, attempt)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	name := start.NativeRefs[0].Name

	got, d := s.readLogsBytes(attempt, 4096)
	if d.Truncated || d.Container != kubeinference.PredictorContainer || !strings.HasPrefix(string(got), "httpservice listening on :8080 as "+name+kubeinference.PredictorSuffix) ||
		!strings.Contains(string(got), "serving model "+name) {
		t.Fatalf("the predictor's log: %q (container %s, truncated %v)", got, d.Container, d.Truncated)
	}

	predict := `{"instances": [[1.0, 2.0], {"text": "ready?"}]}`
	pr := s.proxy(attempt, map[string]any{"method": "POST", "path": "/v1/models/" + name + ":predict",
		"body_base64": base64.StdEncoding.EncodeToString([]byte(predict)),
		"headers":     map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer member-secret"}}})
	pd := detail[siteprotocol.ProxyDetail](t, pr)
	body, _ := base64.StdEncoding.DecodeString(pd.BodyBase64)
	var answer struct {
		Predictions []any `json:"predictions"`
	}
	var sentInstances struct {
		Instances []any `json:"instances"`
	}
	_ = json.Unmarshal([]byte(predict), &sentInstances)
	if err := json.Unmarshal(body, &answer); err != nil || pd.Status != 200 || pd.Truncated ||
		!slices.Equal(pd.Headers["Content-Type"], []string{"application/json"}) || len(answer.Predictions) != len(sentInstances.Instances) {
		t.Fatalf("predict: status %d, headers %v, body %q (%v)", pd.Status, pd.Headers, body, err)
	}
	if len(pr.NativeRefs) != 2 || pr.NativeRefs[0].Name != name+kubeinference.PredictorSuffix || pr.NativeRefs[0].UID == "" {
		t.Fatalf("refs %+v: want KServe's predictor Service and the Pod", pr.NativeRefs)
	}

	echo := detail[siteprotocol.ProxyDetail](t, s.proxy(attempt, map[string]any{"method": "POST", "path": "/echo",
		"body_base64": base64.StdEncoding.EncodeToString([]byte("x")),
		"headers": map[string][]string{"X-Req": {"one", "two"}, "Authorization": {"Bearer member-secret"}, "Cookie": {"a=b"},
			"Connection": {"X-Hop"}, "X-Hop": {"dropped"}}}))
	var seen struct {
		Host    string              `json:"host"`
		Headers map[string][]string `json:"headers"`
	}
	eb, _ := base64.StdEncoding.DecodeString(echo.BodyBase64)
	if err := json.Unmarshal(eb, &seen); err != nil {
		t.Fatalf("the echo: %q: %v", eb, err)
	}
	switch {
	case echo.Status != 201 || !slices.Equal(echo.Headers["X-Multi"], []string{"a", "b"}) || echo.Headers["Set-Cookie"] != nil:
		t.Fatalf("echo: status %d headers %v", echo.Status, echo.Headers)
	case !slices.Equal(seen.Headers["X-Req"], []string{"one", "two"}) || seen.Headers["Authorization"] != nil || seen.Headers["Cookie"] != nil || seen.Headers["X-Hop"] != nil:
		t.Fatalf("the model server got headers %v", seen.Headers)
	case !strings.HasPrefix(seen.Host, name+kubeinference.PredictorSuffix):
		t.Fatalf("answered by %q, not the Attempt's predictor Pod", seen.Host)
	}

	bad := detail[siteprotocol.ProxyDetail](t, s.proxy(attempt, map[string]any{"method": "POST", "path": "/v1/models/" + name + ":predict",
		"body_base64": base64.StdEncoding.EncodeToString([]byte(`{"inputs": 1}`))}))
	if bad.Status != 400 {
		t.Fatalf("the model's 400 came back as %d", bad.Status)
	}
	want(t, s.simple(siteprotocol.OpCleanup, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
}
