package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/buildinfo"
)

// start serves the admin listener on a free loopback port with profiling
// as given and returns its address.
func start(t *testing.T, profiling bool) string {
	t.Helper()
	var s *Server
	app := fxtest.New(t, fx.Supply(zap.NewNop()), Module(Config{Listen: "127.0.0.1:0", Profiling: profiling}), fx.Populate(&s))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return s.Addr()
}

func status(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProfilesAreServedOnlyWhenEnabled(t *testing.T) {
	off := start(t, false)
	if code, _ := status(t, "http://"+off+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("profiling off: /debug/pprof/ answered %d, want 404", code)
	}
	if code, body := status(t, "http://"+off+"/metrics"); code != http.StatusOK || body == "" {
		t.Errorf("/metrics answered %d", code)
	}
	on := start(t, true)
	if code, body := status(t, "http://"+on+"/debug/pprof/"); code != http.StatusOK || len(body) == 0 {
		t.Errorf("profiling on: /debug/pprof/ answered %d", code)
	}
	if code, body := status(t, "http://"+on+"/debug/pprof/heap?debug=1"); code != http.StatusOK || len(body) == 0 {
		t.Errorf("profiling on: the heap profile answered %d", code)
	}
	// The command line can hold a database URL's credentials.
	if code, body := status(t, "http://"+on+"/debug/pprof/cmdline"); code == http.StatusOK || strings.Contains(body, "admin.test") {
		t.Errorf("profiling on: /debug/pprof/cmdline answered %d: %q", code, body)
	}
}

// Every registry the module provides carries the binary's build, so every
// role's /metrics does (docs/operations.md#versions).
func TestMetricsCarryTheBinarysBuild(t *testing.T) {
	addr := start(t, false)
	b := buildinfo.Read()
	want := fmt.Sprintf("%s{go_version=%q,revision=%q,version=%q} 1\n", BuildInfoMetric, b.GoVersion, b.Revision, b.Version)
	if code, body := status(t, "http://"+addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("/metrics (%d) does not carry %s", code, want)
	}
	stamped := buildinfo.Info{Version: "v1.4.0", Revision: "0f41f17e8bbd0b6015f85fdd717b54e23982f464", GoVersion: "go1.26.8"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfo(stamped))
	families, err := reg.Gather()
	if err != nil || len(families) != 1 || len(families[0].GetMetric()) != 1 {
		t.Fatalf("gather: %v, %v", families, err)
	}
	m := families[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if families[0].GetName() != BuildInfoMetric || m.GetGauge().GetValue() != 1 ||
		fmt.Sprint(labels) != fmt.Sprint(map[string]string{"go_version": "go1.26.8", "revision": stamped.Revision, "version": "v1.4.0"}) {
		t.Errorf("%s: %v", families[0].GetName(), m)
	}
}
