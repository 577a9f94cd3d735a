package sitehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/sitehttp"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// pullAnswer returns a valid pull answer of exactly size bytes: the
// envelope padded with JSON whitespace.
func pullAnswer(t *testing.T, size int) string {
	t.Helper()
	env := `{"commands":[],"head_sequence":4,"acknowledged_sequence":3}`
	if size < len(env) {
		t.Fatalf("size %d below the envelope", size)
	}
	return env[:len(env)-1] + strings.Repeat(" ", size-len(env)) + "}"
}

// serveBody answers every request 200 with body; chunked leaves out
// Content-Length (the server streams it), otherwise it is announced.
func serveBody(body string, chunked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.WriteHeader(http.StatusOK)
		if chunked {
			// Two writes with a flush between: net/http cannot announce a
			// length and falls back to chunked encoding.
			half := len(body) / 2
			_, _ = io.WriteString(w, body[:half])
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, body[half:])
			return
		}
		_, _ = io.WriteString(w, body)
	}
}

func client(t *testing.T, authority string) *sitehttp.Client {
	t.Helper()
	c, err := sitehttp.New(sitehttp.Config{Authority: authority, Environment: "alpha-k8s", InstallationID: "inst-1", TokenFile: tokenFile(t, "k")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A pull answer may take siteprotocol.MaxPullAnswerBytes (the server's
// budget plus one command alone past it plus the envelope); one byte more
// is refused by name, unparsed, whether the length is announced or not.
func TestAPullAnswerIsReadUpToTheProtocolBoundAndALongerOneIsRefusedByName(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			fits := httptest.NewServer(serveBody(pullAnswer(t, siteprotocol.MaxPullAnswerBytes), chunked))
			defer fits.Close()
			p, err := client(t, fits.URL).Pull(context.Background(), 3, 100, 0)
			if err != nil {
				t.Fatalf("an answer of exactly MaxPullAnswerBytes: %v", err)
			}
			if p.HeadSequence != 4 || p.AcknowledgedSequence != 3 {
				t.Fatalf("parsed %+v", p)
			}

			over := httptest.NewServer(serveBody(pullAnswer(t, siteprotocol.MaxPullAnswerBytes+1), chunked))
			defer over.Close()
			_, err = client(t, over.URL).Pull(context.Background(), 3, 100, 0)
			if !errors.Is(err, application.ErrOversizedAnswer) {
				t.Fatalf("an answer one byte over the bound: want ErrOversizedAnswer, got %v", err)
			}
			if errors.Is(err, application.ErrTransient) {
				t.Fatalf("an oversized answer must not be transient: %v", err)
			}
			if !strings.Contains(err.Error(), strconv.Itoa(siteprotocol.MaxPullAnswerBytes)) {
				t.Fatalf("the error does not name the bound: %v", err)
			}
		})
	}
}

// Answers other than a pull's (stream state, acknowledgement) are bounded
// at siteprotocol.MaxCommandBytes, and the read-only pull at the pull bound.
func TestOtherAnswersHaveTheirOwnBound(t *testing.T) {
	state := `{"environment":"alpha-k8s","authority":"x","acknowledged_sequence":0,"head_sequence":0}`
	big := state[:len(state)-1] + strings.Repeat(" ", siteprotocol.MaxCommandBytes+1-len(state)) + "}"
	srv := httptest.NewServer(serveBody(big, false))
	defer srv.Close()
	if _, err := client(t, srv.URL).StreamState(context.Background()); !errors.Is(err, application.ErrOversizedAnswer) {
		t.Fatalf("a stream state over MaxCommandBytes: %v", err)
	}
	over := httptest.NewServer(serveBody(pullAnswer(t, siteprotocol.MaxPullAnswerBytes+1), true))
	defer over.Close()
	if _, err := client(t, over.URL).Peek(context.Background(), 0, 1); !errors.Is(err, application.ErrOversizedAnswer) {
		t.Fatalf("a read-only pull over the bound: %v", err)
	}
}

// A body cut short by the connection is transient, not oversized and not
// a protocol violation.
func TestAnAnswerCutShortIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"commands":[`)
		// The handler returns: the server closes the connection short.
	}))
	defer srv.Close()
	_, err := client(t, srv.URL).Pull(context.Background(), 0, 1, 0)
	if !errors.Is(err, application.ErrTransient) || errors.Is(err, application.ErrOversizedAnswer) {
		t.Fatalf("want transient, got %v", err)
	}
}

// `runtime check` pulls read-only: wait=0 and bind=false, so the server
// never binds an unbound stream to the checking installation; the worker's
// pull leaves bind at its default (true).
func TestPeekPullsWithBindFalseAndPullLeavesBindAtItsDefault(t *testing.T) {
	s := &seen{}
	srv := httptest.NewServer(recorder(s, 200, `{"commands":[],"head_sequence":0,"acknowledged_sequence":0}`))
	defer srv.Close()
	c := client(t, srv.URL)
	if _, err := c.Peek(context.Background(), 5, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(context.Background(), 5, 1, 0); err != nil {
		t.Fatal(err)
	}
	if want := "/site/v1/streams/alpha-k8s/commands?after=5&bind=false&limit=1&wait=0"; s.paths[0] != want {
		t.Fatalf("peek asked %s, want %s", s.paths[0], want)
	}
	if strings.Contains(s.paths[1], "bind=") {
		t.Fatalf("the worker's pull names bind: %s", s.paths[1])
	}
	if s.install[0] != "inst-1" {
		t.Fatalf("peek without the installation header: %q", s.install[0])
	}
}

func TestAuthoritiesWithoutAHostOrWithCredentialsAreRefused(t *testing.T) {
	for _, a := range []string{"https://:8443", "https://user:pw@site.example", "https://site.example?x=1", "https://site.example#f", "/site", ""} {
		if _, err := sitehttp.ParseAuthority(a); err == nil {
			t.Errorf("%q accepted", a)
		}
	}
	for _, a := range []string{"https://site.example", "https://site.example:8443/base/", "http://127.0.0.1:8080", "http://[::1]:1"} {
		if _, err := sitehttp.ParseAuthority(a); err != nil {
			t.Errorf("%q: %v", a, err)
		}
	}
}
