package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeCluster is a state directory whose components are one live process of this directory
// (a sleep whose command line names it) and whose API server and KServe health probe are an
// HTTP server answering /readyz with "ok" from the readyAfter-th call on (0: never), with one
// Ready Node n0 whose Lease is lease() (nil: none) and KServe's /kserve/readyz always ok. It
// returns the directory and the count of /readyz calls the API server had.
func fakeCluster(t *testing.T, readyAfter int64, lease func() *coordinationv1.Lease) (string, *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			if n := calls.Add(1); readyAfter == 0 || n < readyAfter {
				http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
		case "/kserve/readyz":
			fmt.Fprint(w, "ok")
		case "/api/v1/nodes/n0":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n0"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
		case "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n0":
			l := lease()
			if l == nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"leases.coordination.k8s.io \"n0\" not found"}`)
				return
			}
			l.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(l)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n", srv.URL)
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(State{Server: srv.URL, Kubeconfig: filepath.Join(dir, "kubeconfig"), Nodes: []string{"n0"}, KServeHealth: srv.URL + "/kserve"})
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	proc := exec.Command("sh", "-c", "sleep 600", filepath.Join(dir, "component"))
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range components {
		if err := os.WriteFile(pidFile(dir, c), []byte(strconv.Itoa(proc.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100 && !running(dir); i++ {
		time.Sleep(20 * time.Millisecond) // until the kernel shows the sleep's command line
	}
	if !running(dir) {
		t.Fatal("the fake cluster's components are not taken for running")
	}
	return dir, &calls
}

// A running cluster that fails its health checks for a while (the API server's /readyz under
// load) is checked again until it passes, not restarted: up reuses it, and the test binaries
// using its API server keep it. Real: the health checks over HTTP; the cluster is an HTTP server.
func TestARunningClusterThatFailsAHealthCheckIsCheckedAgainNotRestarted(t *testing.T) {
	dir, calls := fakeCluster(t, 3, freshLease)
	if _, err := healthyOrWait(dir, time.Minute); err != nil {
		t.Fatalf("a running cluster healthy at the third check: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("/readyz was called %d times; want 3 (two failures, then ok)", n)
	}
}

// A running cluster that stays unhealthy through the grace period is reported unhealthy with the
// last check's error, after more than one check (up then restarts it).
func TestARunningClusterThatStaysUnhealthyIsReportedAfterTheGrace(t *testing.T) {
	dir, calls := fakeCluster(t, 0, freshLease)
	_, err := healthyOrWait(dir, 2500*time.Millisecond)
	if err == nil {
		t.Fatal("an API server that never answers ok was taken for healthy")
	}
	if n := calls.Load(); n < 2 {
		t.Fatalf("/readyz was called %d times; want it checked again within the grace", n)
	}
}

// A cluster whose component has exited is reported at once, without a second check: there is
// nothing to wait for.
func TestAClusterWithAnExitedComponentIsReportedAtOnce(t *testing.T) {
	dir, calls := fakeCluster(t, 0, freshLease)
	if err := os.WriteFile(pidFile(dir, "apiserver"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := healthyOrWait(dir, time.Minute); err == nil {
		t.Fatal("a cluster without its API server was taken for healthy")
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("/readyz was called %d times; want none (a component is not running)", n)
	}
}

// leaseRenewed is a Lease of n0 held by KWOK, last renewed at renewed, of duration 40 s.
func leaseRenewed(renewed time.Time) *coordinationv1.Lease {
	holder, secs := "kwok-controller", int32(40)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n0", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
			RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

// freshLease is n0's Lease renewed a second before the request.
func freshLease() *coordinationv1.Lease { return leaseRenewed(time.Now().Add(-time.Second)) }

// The health check (make cluster-status, and up's check of a running cluster) fails, naming the
// Node, when a fake Node has no Lease or its Lease was last renewed longer ago than its duration:
// nothing renews the Node's heartbeat, and the node lifecycle controller will take it for
// unreachable. A fresh Lease passes. Real: the health check over HTTP; the API server is an HTTP
// server answering the Node and its Lease.
func TestTheHealthCheckFailsNamingAFakeNodeWhoseLeaseIsMissingOrStale(t *testing.T) {
	stale := time.Now().Add(-2 * time.Minute)
	cases := map[string]struct {
		lease func() *coordinationv1.Lease
		want  []string
	}{
		"missing": {func() *coordinationv1.Lease { return nil }, []string{"node n0 has no Lease kube-node-lease/n0"}},
		"stale": {func() *coordinationv1.Lease { return leaseRenewed(stale) },
			[]string{"node n0's Lease kube-node-lease/n0 was last renewed by kwok-controller at " + stale.UTC().Format(time.RFC3339), "longer than its duration 40s"}},
		"no renewTime": {func() *coordinationv1.Lease { l := freshLease(); l.Spec.RenewTime = nil; return l },
			[]string{"node n0's Lease kube-node-lease/n0 has no renewTime"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := fakeCluster(t, 1, c.lease)
			_, err := healthy(context.Background(), dir)
			if err == nil {
				t.Fatal("taken for healthy")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%q does not say %q", err, w)
				}
			}
		})
	}
	dir, _ := fakeCluster(t, 1, freshLease)
	if _, err := healthy(context.Background(), dir); err != nil {
		t.Fatalf("a cluster whose Node's Lease is fresh: %v", err)
	}
}
