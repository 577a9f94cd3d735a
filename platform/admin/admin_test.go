package admin

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
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
