package permissions_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

const (
	member  = "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80"
	project = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"
)

var query = domain.PermissionQuery{MemberID: member, ProjectID: project, Action: domain.ActionStart,
	RunID: "5b0e0000-0000-4000-8000-000000000001", AttemptID: "7d1f0000-0000-4000-8000-000000000001"}

// provider is a test double of the permission provider (outside this
// project), over plain HTTP on loopback: it answers each request with the
// next of answers (the last one repeats) and records what it was asked.
func provider(t *testing.T, answers ...func(w http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	return providerOn(t, httptest.NewServer, answers...)
}

// providerOn is provider served by start (httptest.NewServer, or
// httptest.NewTLSServer for a provider with a certificate of its own CA).
func providerOn(t *testing.T, start func(http.Handler) *httptest.Server, answers ...func(w http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		var body map[string]string
		if r.Method != http.MethodPost || r.URL.Path != "/v1/access-checks" || json.NewDecoder(r.Body).Decode(&body) != nil ||
			body["member_id"] != member || body["project_id"] != project || body["action"] != "execution.start" || body["attempt_id"] == "" || body["run_id"] == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		answers[min(n, len(answers)-1)](w)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func answer(allowed bool, validFor time.Duration) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		_ = json.NewEncoder(w).Encode(map[string]any{"allowed": allowed, "reason": "member of the Project", "evidence_id": "ev-42",
			"valid_until": time.Now().Add(validFor).UTC().Format(time.RFC3339)})
	}
}

func status(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

func newHTTP(url string, bound time.Duration) *permissions.HTTP {
	return permissions.NewHTTP(permissions.HTTPConfig{BaseURL: url, Bound: bound, BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}, systemClock{})
}

func TestHTTPProviderAnswersAreUsedAsGiven(t *testing.T) {
	srv, _ := provider(t, answer(true, time.Minute))
	p, err := newHTTP(srv.URL, time.Second).Check(context.Background(), query)
	if err != nil || !p.Allowed || p.EvidenceID != "ev-42" || !p.ValidUntil.After(time.Now()) {
		t.Fatalf("allowed answer: %+v %v", p, err)
	}
	srv, _ = provider(t, answer(false, time.Minute))
	if p, err := newHTTP(srv.URL, time.Second).Check(context.Background(), query); err != nil || p.Allowed || p.Reason == "" {
		t.Fatalf("denial: %+v %v", p, err)
	}
}

func TestHTTPProviderFailuresAreRetriedWithinTheBound(t *testing.T) {
	srv, calls := provider(t, status(503), status(500), answer(true, time.Minute))
	p, err := newHTTP(srv.URL, 10*time.Second).Check(context.Background(), query)
	if err != nil || !p.Allowed || calls.Load() != 3 {
		t.Fatalf("after two failures: %+v %v (%d calls)", p, err, calls.Load())
	}
}

func TestHTTPProviderWithoutAUsableAnswerWithinTheBoundIsUnavailable(t *testing.T) {
	for name, a := range map[string]func(http.ResponseWriter){
		"5xx":            status(502),
		"403":            status(403),
		"expired answer": answer(true, -time.Second),
		"missing fields": func(w http.ResponseWriter) { _, _ = w.Write([]byte(`{"allowed":true}`)) },
		"unknown field": func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"allowed":true,"reason":"","evidence_id":"e","valid_until":"2999-01-01T00:00:00Z","extra":1}`))
		},
		"not JSON": func(w http.ResponseWriter) { _, _ = w.Write([]byte(`yes`)) },
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := provider(t, a)
			began := time.Now()
			_, err := newHTTP(srv.URL, 300*time.Millisecond).Check(context.Background(), query)
			if !errors.Is(err, application.ErrPermissionUnavailable) {
				t.Fatalf("want unavailable, got %v", err)
			}
			if calls.Load() < 2 || time.Since(began) > 5*time.Second {
				t.Fatalf("%d tries in %s; want retries within the bound", calls.Load(), time.Since(began))
			}
		})
	}
	_, err := newHTTP("http://127.0.0.1:1", 100*time.Millisecond).Check(context.Background(), query)
	if !errors.Is(err, application.ErrPermissionUnavailable) {
		t.Fatalf("unreachable provider: want unavailable, got %v", err)
	}
}

// A provider whose certificate comes from a private CA (the double's
// httptest TLS certificate, written as a PEM bundle) is reached through a
// client of that bundle (cabundle.Client, as --permissions-ca-file builds
// it); with the system roots every try fails verification, is retried, and
// the check is unavailable once the bound has passed.
func TestHTTPProviderIsVerifiedAgainstItsCABundle(t *testing.T) {
	var handshakes atomic.Int32
	srv, calls := providerOn(t, func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				handshakes.Add(1)
			}
		}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		srv.StartTLS()
		return srv
	}, answer(true, time.Minute))
	client, err := cabundle.Client(certauthority.ServerCAFile(t, srv), permissions.RequestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	cfg := permissions.HTTPConfig{BaseURL: srv.URL, Bound: time.Second, BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Client: client}
	if p, err := permissions.NewHTTP(cfg, systemClock{}).Check(context.Background(), query); err != nil || !p.Allowed {
		t.Fatalf("with the provider's CA bundle: %+v %v", p, err)
	}
	before, conns := calls.Load(), handshakes.Load()
	_, err = newHTTP(srv.URL, 300*time.Millisecond).Check(context.Background(), query)
	if !errors.Is(err, application.ErrPermissionUnavailable) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("with the system roots: want unavailable after a certificate error, got %v", err)
	}
	if calls.Load() != before || handshakes.Load()-conns < 3 {
		t.Fatalf("with the system roots: %d requests answered, %d connections; want none answered and the handshake retried", calls.Load()-before, handshakes.Load()-conns)
	}
}

func TestPolicyFileIsReadAgainWhenItChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("- member: " + member + "\n  project: " + project + "\n  actions: [execution.start]\n")
	p, err := permissions.NewPolicy(path, systemClock{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := p.Check(context.Background(), query); err != nil || !a.Allowed || a.EvidenceID == "" || !a.ValidUntil.After(time.Now()) {
		t.Fatalf("granted: %+v %v", a, err)
	}
	read := query
	read.Action = domain.ActionRead
	if a, _ := p.Check(context.Background(), read); a.Allowed {
		t.Fatal("an action the file does not list was allowed")
	}
	write("[]\n")
	if a, err := p.Check(context.Background(), query); err != nil || a.Allowed {
		t.Fatalf("after the grant was withdrawn: %+v %v", a, err)
	}
	write("- member: nobody\n")
	if _, err := p.Check(context.Background(), query); !errors.Is(err, application.ErrPermissionUnavailable) {
		t.Fatalf("a broken file: want unavailable (never the old grants), got %v", err)
	}
	if _, err := permissions.NewPolicy(path, systemClock{}, 0); err == nil {
		t.Fatal("start-up accepted a broken policy file")
	}
}
