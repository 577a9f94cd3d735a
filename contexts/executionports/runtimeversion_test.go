package executionports_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// pullWithVersion is a binding pull of env's stream carrying the header
// Metallo-Runtime-Version set to version exactly as given: the request is
// written by hand on the connection, so values a Go client refuses to
// send (a control character) reach the server too.
func (s *server) pullWithVersion(t *testing.T, env, key, installation, version string) reply {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.Base, "http://"))
	must(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /site/v1/streams/%s/commands?after=0&limit=10&wait=0 HTTP/1.1\r\nHost: metallo\r\nAuthorization: Bearer %s\r\n%s: %s\r\n%s: %s\r\nConnection: close\r\n\r\n",
		env, key, siteprotocol.InstallationHeader, installation, siteprotocol.RuntimeVersionHeader, version)
	must(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return reply{Status: resp.StatusCode, Body: b}
}

// The Runtime's Metallo-Runtime-Version is recorded per environment with
// the installation and the pull's time; a value the header's rule refuses
// is 422 validation-failed naming the header, and that pull binds nothing
// and records nothing (docs/site-protocol.md#the-runtimes-version).
func TestAPullRecordsTheRuntimesVersionAndARefusedVersionChangesNothing(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	h, err := database.Open(context.Background(), database.Target{Engine: database.SQLite, Path: filepath.Join(s.dir, "execution.sqlite")}, database.Options{})
	must(t, err)
	t.Cleanup(h.Close)
	store := sqlitestore.New(h.DB)
	recorded := func() (application.RuntimeVersion, bool) {
		t.Helper()
		v, ok, err := store.RuntimeVersion(context.Background(), "alpha-k8s")
		must(t, err)
		return v, ok
	}

	for _, bad := range []string{strings.Repeat("v", siteprotocol.MaxRuntimeVersionBytes+1), "v1 beta", "v1\tbeta", "vé", "v1\xff"} {
		r := s.pullWithVersion(t, "alpha-k8s", s.alphaKey, installA, bad)
		wantStatus(t, r, http.StatusUnprocessableEntity, "validation-failed")
		if !strings.Contains(string(r.Body), "header."+siteprotocol.RuntimeVersionHeader) {
			t.Errorf("refused version %q: the problem does not name the header: %s", bad, r)
		}
	}
	// A control character other than a tab is refused by the HTTP server
	// itself, before any route runs.
	for _, bad := range []string{"v1\x7f", "v1\x01"} {
		if r := s.pullWithVersion(t, "alpha-k8s", s.alphaKey, installA, bad); r.Status != http.StatusBadRequest {
			t.Errorf("version %q: got %s, want 400", bad, r)
		}
	}
	if v, ok := recorded(); ok {
		t.Fatalf("a refused pull recorded %+v", v)
	}
	if st := decode[siteprotocol.StreamState](t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installA, nil)); st.InstallationID != "" {
		t.Fatalf("a refused pull bound the stream: %+v", st)
	}

	version := "v0.0.0-20261207192130-0f41f17e8bbd+dirty"
	page := decode[siteprotocol.Pull](t, s.pullWithVersion(t, "alpha-k8s", s.alphaKey, installA, version))
	if len(page.Commands) != 1 {
		t.Fatalf("pull: %+v", page)
	}
	if v, ok := recorded(); !ok || v.Version != version || v.InstallationID != installA || !v.PulledAt.Equal(s.clock.Now()) {
		t.Fatalf("recorded %+v (%v); want %s from %s at %s", v, ok, version, installA, s.clock.Now())
	}
	// A pull without the header is served the same and records an empty
	// version (a Runtime older than the header), once the refresh is due.
	s.clock.Advance(application.RuntimeVersionRefresh)
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusOK, "")
	if v, ok := recorded(); !ok || v.Version != "" || !v.PulledAt.Equal(s.clock.Now()) {
		t.Fatalf("after a pull without the header: %+v (%v)", v, ok)
	}
	// Another environment's stream keeps its own.
	if v, ok, err := store.RuntimeVersion(context.Background(), "beta-k8s"); err != nil || ok {
		t.Fatalf("beta-k8s: %+v (%v), %v", v, ok, err)
	}
}
