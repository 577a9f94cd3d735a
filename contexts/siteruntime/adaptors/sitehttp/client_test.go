package sitehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/sitehttp"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

type seen struct {
	mu      sync.Mutex
	tokens  []string
	install []string
	// versions are the Metallo-Runtime-Version values, one per request
	// (nil for a request without the header).
	versions [][]string
	bodies   []string
	paths    []string
}

func recorder(s *seen, status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.tokens = append(s.tokens, r.Header.Get("Authorization"))
		s.install = append(s.install, r.Header.Get("Metallo-Installation"))
		s.versions = append(s.versions, r.Header.Values("Metallo-Runtime-Version"))
		s.bodies = append(s.bodies, string(b))
		s.paths = append(s.paths, r.URL.RequestURI())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTheTokenIsReReadFromItsFileForEveryRequestAndTheInstallationIsAlwaysSent(t *testing.T) {
	s := &seen{}
	srv := httptest.NewServer(recorder(s, 200, `{"acknowledged_sequence":7,"result_digest":"d"}`))
	defer srv.Close()
	tok := tokenFile(t, "first")
	c, err := sitehttp.New(sitehttp.Config{Authority: srv.URL, Environment: "alpha-k8s", InstallationID: "inst-1", TokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ack, err := c.SendResult(ctx, 7, []byte(`{"exact":"bytes"}`))
	if err != nil || ack.AcknowledgedSequence != 7 {
		t.Fatalf("ack %+v %v", ack, err)
	}
	if err := os.WriteFile(tok, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, 3, 10, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.tokens[0] != "Bearer first" || s.tokens[1] != "Bearer rotated" {
		t.Fatalf("tokens sent: %q", s.tokens)
	}
	if s.install[0] != "inst-1" || s.install[1] != "inst-1" {
		t.Fatalf("installation header: %q", s.install)
	}
	if s.bodies[0] != `{"exact":"bytes"}` || s.paths[0] != "/site/v1/streams/alpha-k8s/commands/7/result" {
		t.Fatalf("PUT %s %s", s.paths[0], s.bodies[0])
	}
	if s.paths[1] != "/site/v1/streams/alpha-k8s/commands?after=3&limit=10&wait=2" {
		t.Fatalf("pull %s", s.paths[1])
	}
}

// Every pull carries the Runtime's version, made to follow the header's
// rule (docs/site-protocol.md#the-runtimes-version); results and state
// reads do not carry it.
func TestEveryPullCarriesTheRuntimesVersionWithinTheHeadersRule(t *testing.T) {
	for version, sent := range map[string]string{
		"v0.0.0-20261207192130-0f41f17e8bbd+dirty": "v0.0.0-20261207192130-0f41f17e8bbd+dirty",
		"(devel)":        "(devel)",
		"":               "unknown",
		"v1 built by me": "v1_built_by_me",
	} {
		s := &seen{}
		srv := httptest.NewServer(recorder(s, 200, `{"commands":[],"head_sequence":0,"acknowledged_sequence":0}`))
		c, err := sitehttp.New(sitehttp.Config{Authority: srv.URL, Environment: "alpha-k8s", InstallationID: "inst-1", TokenFile: tokenFile(t, "k"), RuntimeVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.Pull(ctx, 0, 100, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Peek(ctx, 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StreamState(ctx); err != nil {
			t.Fatal(err)
		}
		_, _ = c.SendResult(ctx, 1, []byte(`{}`))
		srv.Close()
		for i, want := range [][]string{{sent}, {sent}, nil, nil} {
			if got := s.versions[i]; len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
				t.Errorf("version %q, request %s: Metallo-Runtime-Version %q, want %q", version, s.paths[i], got, want)
			}
		}
	}
}

func TestPlainHTTPIsAcceptedOnlyToLoopbackAddresses(t *testing.T) {
	tok := tokenFile(t, "k")
	for authority, ok := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://[::1]:8080": true, "http://localhost:8080": true,
		"http://10.0.0.1:8080": false, "http://metallo.example.org": false, "https://metallo.example.org": true,
		"ftp://metallo.example.org": false, "metallo.example.org": false,
	} {
		_, err := sitehttp.New(sitehttp.Config{Authority: authority, Environment: "e", InstallationID: "i", TokenFile: tok})
		if (err == nil) != ok {
			t.Errorf("%s: err %v", authority, err)
		}
		if !ok && authority == "http://10.0.0.1:8080" && !errors.Is(err, sitehttp.ErrPlainHTTP) {
			t.Errorf("%s: want ErrPlainHTTP, got %v", authority, err)
		}
	}
}

func TestTheServerIsVerifiedAgainstTheConfiguredCABundle(t *testing.T) {
	s := &seen{}
	srv := httptest.NewTLSServer(recorder(s, 200, `{"environment":"alpha-k8s","authority":"x","acknowledged_sequence":0,"head_sequence":0}`))
	defer srv.Close()
	tok := tokenFile(t, "k")
	ca := certauthority.ServerCAFile(t, srv)
	trusted, err := sitehttp.New(sitehttp.Config{Authority: srv.URL, Environment: "alpha-k8s", InstallationID: "i", TokenFile: tok, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := trusted.StreamState(context.Background()); err != nil || st.Environment != "alpha-k8s" {
		t.Fatalf("with the CA bundle: %+v %v", st, err)
	}
	untrusted, err := sitehttp.New(sitehttp.Config{Authority: srv.URL, Environment: "alpha-k8s", InstallationID: "i", TokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.StreamState(context.Background()); err == nil {
		t.Fatal("a server outside the trusted roots was accepted")
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	_ = os.WriteFile(empty, []byte("nothing"), 0o600)
	if _, err := sitehttp.New(sitehttp.Config{Authority: srv.URL, Environment: "e", InstallationID: "i", TokenFile: tok, CAFile: empty}); !errors.Is(err, cabundle.ErrNoCertificate) {
		t.Fatal("a CA bundle without certificates was accepted")
	}
}

func TestProblemAnswersCarryTheirReasonAndServerFailuresAreTransient(t *testing.T) {
	tok := tokenFile(t, "k")
	cases := []struct {
		status    int
		body      string
		reason    string
		transient bool
	}{
		{409, `{"title":"Conflict","status":409,"detail":"another result is recorded","reason":"result-conflict"}`, "result-conflict", false},
		{403, `{"title":"Forbidden","status":403,"reason":"forbidden"}`, "forbidden", false},
		{404, `not json`, "malformed-answer", false},
		{503, `{"reason":"unavailable"}`, "", true},
		{500, `boom`, "", true},
		{429, ``, "", true},
	}
	for _, c := range cases {
		srv := httptest.NewServer(recorder(&seen{}, c.status, c.body))
		cl, err := sitehttp.New(sitehttp.Config{Authority: srv.URL, Environment: "e", InstallationID: "i", TokenFile: tok})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.SendResult(context.Background(), 1, []byte(`{}`))
		srv.Close()
		var p *application.Problem
		switch {
		case c.transient && !errors.Is(err, application.ErrTransient):
			t.Errorf("%d: want transient, got %v", c.status, err)
		case !c.transient && (!errors.As(err, &p) || p.Reason != c.reason || p.Status != c.status):
			t.Errorf("%d: want problem %s, got %v", c.status, c.reason, err)
		}
	}
	// Nobody listening: transient.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	cl, _ := sitehttp.New(sitehttp.Config{Authority: url, Environment: "e", InstallationID: "i", TokenFile: tok})
	if _, err := cl.StreamState(context.Background()); !errors.Is(err, application.ErrTransient) {
		t.Fatalf("connection refused: want transient, got %v", err)
	}
}
