package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// fakeCluster is a state directory whose components are one live process of this directory
// (a sleep whose command line names it) and whose API server and KServe health probe are an
// HTTP server answering /readyz with "ok" from the readyAfter-th call on (0: never), with one
// Ready Node n0 and KServe's /kserve/readyz always ok. It returns the directory and the count of /readyz calls the API server had.
func fakeCluster(t *testing.T, readyAfter int64) (string, *atomic.Int64) {
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
	dir, calls := fakeCluster(t, 3)
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
	dir, calls := fakeCluster(t, 0)
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
	dir, calls := fakeCluster(t, 0)
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
