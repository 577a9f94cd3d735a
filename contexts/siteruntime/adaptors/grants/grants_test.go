package grants_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
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
	repoURL = "https://git.example.org/lab/model.git"
)

var request = domain.GrantRequest{MemberID: member, ProjectID: project, RepositoryURL: repoURL,
	RunID: "5b0e0000-0000-4000-8000-000000000001", AttemptID: "7d1f0000-0000-4000-8000-000000000001",
	IdempotencyKey: "workspace:7d1f0000-0000-4000-8000-000000000001"}

// provider is a test double of the repository grant provider (outside this
// project): it keeps grants by idempotency key, as the contract asks, and
// answers each request through fault (nil: normally), which sees the
// request number (from 0) and may write another answer instead.
type provider struct {
	*httptest.Server
	mu      sync.Mutex
	byKey   map[string]string // key → grant ID
	expiry  map[string]string // grant ID → its expires_at, fixed when issued
	revoked map[string]bool
	issues  atomic.Int32
	revokes atomic.Int32
	conns   atomic.Int32 // connections accepted (newTLSProvider)
	fault   func(n int, w http.ResponseWriter) bool
}

func newProvider(t *testing.T) *provider {
	p := &provider{byKey: map[string]string{}, expiry: map[string]string{}, revoked: map[string]bool{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// newTLSProvider is newProvider over HTTPS with the httptest certificate
// (a CA of its own, as a provider with a private CA has), counting the
// connections it accepts in conns so that refused handshakes are seen.
func newTLSProvider(t *testing.T) *provider {
	p := &provider{byKey: map[string]string{}, expiry: map[string]string{}, revoked: map[string]bool{}}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.conns.Add(1)
		}
	}
	p.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	p.StartTLS()
	t.Cleanup(p.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/repository-grants":
		n := int(p.issues.Add(1)) - 1
		var body map[string]string
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		key := r.Header.Get(grants.IdempotencyKeyHeader)
		if dec.Decode(&body) != nil || key == "" || body["member_id"] != member || body["project_id"] != project ||
			body["repository_url"] != repoURL || body["run_id"] == "" || body["attempt_id"] == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		id, ok := p.byKey[key]
		if !ok {
			// One grant per key, its expiry fixed now: an answer repeated for
			// the key is the same grant (a fresh now+1h would differ across a
			// second's boundary).
			id = fmt.Sprintf("g-%d", len(p.byKey)+1)
			p.byKey[key] = id
			p.expiry[id] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		}
		expires := p.expiry[id]
		p.mu.Unlock()
		// The grant exists from here on, whatever the answer.
		if p.fault != nil && p.fault(n, w) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"grant_id": id, "username": "member-x", "token": "tok-" + id,
			"expires_at": expires})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/repository-grants/"):
		n := int(p.revokes.Add(1)) - 1
		if p.fault != nil && p.fault(n, w) {
			return
		}
		p.mu.Lock()
		p.revoked[strings.TrimPrefix(r.URL.Path, "/v1/repository-grants/")] = true
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func newHTTP(url string, bound time.Duration) *grants.HTTP {
	return grants.NewHTTP(grants.HTTPConfig{BaseURL: url, Bound: bound, BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}, systemClock{})
}

func TestHTTPIssuesOneGrantPerIdempotencyKeyAcrossLostAnswers(t *testing.T) {
	p := newProvider(t)
	// The first answer is lost after the provider issued the grant.
	p.fault = func(n int, w http.ResponseWriter) bool {
		if n == 0 {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		return false
	}
	h := newHTTP(p.URL, 10*time.Second)
	g, err := h.Issue(context.Background(), request)
	if err != nil || g.GrantID != "g-1" || g.Username != "member-x" || g.Token != "tok-g-1" || !g.ExpiresAt.After(time.Now()) {
		t.Fatalf("issue after a lost answer: %v %v", g, err)
	}
	again, err := h.Issue(context.Background(), request)
	if err != nil || again != g || len(p.byKey) != 1 {
		t.Fatalf("the same key again: %v %v (%d grants at the provider)", again, err, len(p.byKey))
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v %s", g, g, g, g), g.Token) {
		t.Fatal("a formatted grant shows its token")
	}
	other := request
	other.IdempotencyKey = "workspace:another"
	if g2, _ := h.Issue(context.Background(), other); g2.GrantID == g.GrantID {
		t.Fatal("another key answered the same grant")
	}
}

func TestHTTPRevokeIsIdempotentAndRetried(t *testing.T) {
	p := newProvider(t)
	p.fault = func(n int, w http.ResponseWriter) bool {
		if n == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	h := newHTTP(p.URL, 10*time.Second)
	for range 2 {
		if err := h.Revoke(context.Background(), "g-1"); err != nil {
			t.Fatal(err)
		}
	}
	if !p.revoked["g-1"] || p.revokes.Load() != 3 {
		t.Fatalf("revoked %v after %d requests", p.revoked, p.revokes.Load())
	}
	if err := h.Revoke(context.Background(), "bad id"); err == nil {
		t.Fatal("a grant ID with a space was sent")
	}
}

func TestHTTPDenialIsFinalAndNotRetried(t *testing.T) {
	p := newProvider(t)
	p.fault = func(_ int, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"reason":"member may not read lab/model"}`))
		return true
	}
	_, err := newHTTP(p.URL, 10*time.Second).Issue(context.Background(), request)
	if !errors.Is(err, application.ErrGrantDenied) || !strings.Contains(err.Error(), "lab/model") || p.issues.Load() != 1 {
		t.Fatalf("denied: %v after %d requests", err, p.issues.Load())
	}
}

func TestHTTPWithoutAUsableAnswerWithinTheBoundIsUnavailable(t *testing.T) {
	for name, answer := range map[string]func(w http.ResponseWriter){
		"5xx":           func(w http.ResponseWriter) { w.WriteHeader(502) },
		"404":           func(w http.ResponseWriter) { w.WriteHeader(404) },
		"403 no reason": func(w http.ResponseWriter) { w.WriteHeader(403) },
		"expired": func(w http.ResponseWriter) {
			body(w, `{"grant_id":"g","username":"u","token":"t","expires_at":"2000-01-01T00:00:00Z"}`)
		},
		"missing token": func(w http.ResponseWriter) {
			body(w, `{"grant_id":"g","username":"u","expires_at":"2999-01-01T00:00:00Z"}`)
		},
		"empty token": func(w http.ResponseWriter) {
			body(w, `{"grant_id":"g","username":"u","token":"","expires_at":"2999-01-01T00:00:00Z"}`)
		},
		"colon username": func(w http.ResponseWriter) {
			body(w, `{"grant_id":"g","username":"u:x","token":"t","expires_at":"2999-01-01T00:00:00Z"}`)
		},
		"unknown field": func(w http.ResponseWriter) {
			body(w, `{"grant_id":"g","username":"u","token":"t","expires_at":"2999-01-01T00:00:00Z","x":1}`)
		},
		"not JSON": func(w http.ResponseWriter) { body(w, `yes`) },
	} {
		t.Run(name, func(t *testing.T) {
			p := newProvider(t)
			p.fault = func(_ int, w http.ResponseWriter) bool { answer(w); return true }
			began := time.Now()
			_, err := newHTTP(p.URL, 300*time.Millisecond).Issue(context.Background(), request)
			if !errors.Is(err, application.ErrGrantUnavailable) {
				t.Fatalf("want unavailable, got %v", err)
			}
			if p.issues.Load() < 2 || time.Since(began) > 5*time.Second {
				t.Fatalf("%d tries in %s; want retries within the bound", p.issues.Load(), time.Since(began))
			}
			if err := newHTTP(p.URL, 200*time.Millisecond).Revoke(context.Background(), "g-1"); !errors.Is(err, application.ErrGrantUnavailable) {
				t.Fatalf("revoke: want unavailable, got %v", err)
			}
		})
	}
	if _, err := newHTTP("http://127.0.0.1:1", 100*time.Millisecond).Issue(context.Background(), request); !errors.Is(err, application.ErrGrantUnavailable) {
		t.Fatalf("unreachable provider: want unavailable, got %v", err)
	}
	bad := request
	bad.RepositoryURL = "https://user:secret@git.example.org/lab/model.git"
	if _, err := newHTTP("http://127.0.0.1:1", time.Second).Issue(context.Background(), bad); err == nil || errors.Is(err, application.ErrGrantUnavailable) {
		t.Fatalf("a URL with credentials: want a request error, got %v", err)
	}
}

// A provider whose certificate comes from a private CA (written as a PEM
// bundle) is reached through a client of that bundle (cabundle.Client, as
// --repository-grants-ca-file builds it); with the system roots every try
// fails verification, is retried, and the grant is unavailable once the
// bound has passed.
func TestHTTPProviderIsVerifiedAgainstItsCABundle(t *testing.T) {
	p := newTLSProvider(t)
	client, err := cabundle.Client(certauthority.ServerCAFile(t, p.Server), grants.RequestTimeout)
	if err != nil {
		t.Fatal(err)
	}
	cfg := grants.HTTPConfig{BaseURL: p.URL, Bound: time.Second, BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Client: client}
	if g, err := grants.NewHTTP(cfg, systemClock{}).Issue(context.Background(), request); err != nil || g.GrantID != "g-1" {
		t.Fatalf("with the provider's CA bundle: %v %v", g, err)
	}
	issues, conns := p.issues.Load(), p.conns.Load()
	other := request
	other.IdempotencyKey = "workspace:another"
	_, err = newHTTP(p.URL, 300*time.Millisecond).Issue(context.Background(), other)
	if !errors.Is(err, application.ErrGrantUnavailable) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("with the system roots: want unavailable after a certificate error, got %v", err)
	}
	if p.issues.Load() != issues || p.conns.Load()-conns < 3 {
		t.Fatalf("with the system roots: %d requests answered, %d connections; want none answered and the handshake retried", p.issues.Load()-issues, p.conns.Load()-conns)
	}
}

func body(w http.ResponseWriter, s string) {
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(s))
}

func TestFileIssuesTheSiteCredentialToTheMembersItNames(t *testing.T) {
	dir := t.TempDir()
	path, token := filepath.Join(dir, "grants.yaml"), filepath.Join(dir, "token")
	write := func(f, s string) {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(token, "s3cret\n")
	write(path, "- project: "+project+"\n  members: ["+member+"]\n  repository: https://git.example.org/lab/\n  username: reader\n  token_file: "+token+"\n  valid_for: 10m\n")
	f, err := grants.NewFile(path, systemClock{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.Issue(context.Background(), request)
	if err != nil || g.Username != "reader" || g.Token != "s3cret" || g.ExpiresAt.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("issued %v %v", g, err)
	}
	if again, _ := f.Issue(context.Background(), request); again != g {
		t.Fatalf("the same key: %v, want %v", again, g)
	}
	if err := f.Revoke(context.Background(), g.GrantID); err != nil || f.Revoke(context.Background(), g.GrantID) != nil {
		t.Fatal("revoke is not idempotent")
	}
	for name, change := range map[string]func(r *domain.GrantRequest){
		"another member":     func(r *domain.GrantRequest) { r.MemberID = "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e81" },
		"another Project":    func(r *domain.GrantRequest) { r.ProjectID = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f0" },
		"another repository": func(r *domain.GrantRequest) { r.RepositoryURL = "https://git.example.org/labx/model.git" },
	} {
		r := request
		change(&r)
		if _, err := f.Issue(context.Background(), r); !errors.Is(err, application.ErrGrantDenied) {
			t.Errorf("%s: want denied, got %v", name, err)
		}
	}
	write(token, "")
	if _, err := f.Issue(context.Background(), request); !errors.Is(err, application.ErrGrantUnavailable) {
		t.Fatalf("an empty token file: want unavailable, got %v", err)
	}
	write(path, "- project: nope\n")
	if _, err := f.Issue(context.Background(), request); !errors.Is(err, application.ErrGrantUnavailable) {
		t.Fatalf("a broken file: want unavailable (never the old entries), got %v", err)
	}
	if _, err := grants.NewFile(path, systemClock{}); err == nil {
		t.Fatal("start-up accepted a broken grants file")
	}
	write(path, "- project: "+project+"\n  repository: https://git.example.org/lab/\n  username: reader\n  token_file: "+filepath.Join(dir, "absent")+"\n")
	if _, err := grants.NewFile(path, systemClock{}); err == nil {
		t.Fatal("start-up accepted a missing token file")
	}
}
