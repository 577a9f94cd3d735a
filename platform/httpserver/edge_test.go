package httpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/platform/auth"
)

type itemsIn struct {
	Cursor string `query:"cursor"`
}

// edgeServer is the real server (newServer on a loopback port) with
// BodyReadTimeout timeout, a POST /echo admitting site principals, a GET
// /items and the health routes; it returns the address and a site key
// and a service key.
func edgeServer(t *testing.T, timeout time.Duration) (addr, siteKey, serviceKey string) {
	t.Helper()
	siteKey, siteEntry, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	serviceKey, serviceEntry, _ := auth.NewKey(auth.Principal{Kind: auth.KindService, ID: "reader"})
	ks, err := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{siteEntry, serviceEntry}})
	if err != nil {
		t.Fatal(err)
	}
	lc := fxtest.NewLifecycle(t)
	reg := RegistrarFunc(func(api huma.API) {
		huma.Register(api, huma.Operation{OperationID: "echo", Method: http.MethodPost, Path: "/echo", Security: Bearer(),
			Metadata: AdmitMetadata(AdmitKinds(auth.KindSite))},
			func(context.Context, *echoIn) (*echoOut, error) { return &echoOut{}, nil })
		huma.Register(api, huma.Operation{OperationID: "items", Method: http.MethodGet, Path: "/items", Security: Bearer()},
			func(context.Context, *itemsIn) (*struct{}, error) { return &struct{}{}, nil })
	})
	s, err := newServer(Config{Listen: "127.0.0.1:0", Title: "test", BodyReadTimeout: timeout},
		serverParams{Lifecycle: lc, Log: zap.NewNop(), Authn: ks, Registrars: []Registrar{reg}})
	if err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	t.Cleanup(lc.RequireStop)
	return s.Addr(), siteKey, serviceKey
}

// withheld sends head (a request declaring a 100-byte body) and none of
// its body, and returns the answer read while the body is still withheld,
// and whether the server then closed the connection. The reads wait on
// the answer, bounded only by the test's own deadline: a server that
// waited for the body would fail the test there, not by a timer of ours.
func withheld(t *testing.T, addr, head string) (*http.Response, []byte, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if d, ok := t.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	if _, err := io.WriteString(conn, head+"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body is withheld: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	// Still withholding the body: the server closes the connection.
	_, err = br.ReadByte()
	return resp, raw, errors.Is(err, io.EOF)
}

// TestARefusedPrincipalIsAnsweredWhileTheBodyIsWithheld: with a body read
// deadline of an hour, a request whose credential is refused (a key of a
// principal the operation does not admit: 403; no key: 401) declares a
// 100-byte body and sends none of it. The answer arrives while the client
// still withholds the body, says Connection: close, and the server closes
// the connection: it neither reads nor waits for the body.
func TestARefusedPrincipalIsAnsweredWhileTheBodyIsWithheld(t *testing.T) {
	addr, _, serviceKey := edgeServer(t, time.Hour)
	for name, tc := range map[string]struct {
		auth   string
		status int
		reason string
	}{
		"a key the operation does not admit": {"Authorization: Bearer " + serviceKey + "\r\n", http.StatusForbidden, "forbidden"},
		"no key":                             {"", http.StatusUnauthorized, "unauthenticated"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, raw, closed := withheld(t, addr, "POST /echo HTTP/1.1\r\nHost: x\r\n"+tc.auth)
			var p Problem
			if resp.StatusCode != tc.status || json.Unmarshal(raw, &p) != nil || p.Reason != tc.reason {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode, raw, tc.status, tc.reason)
			}
			if !resp.Close || !closed {
				t.Fatalf("the connection stays open (Connection: close %v, closed %v)", resp.Close, closed)
			}
		})
	}
}

// TestEveryAnswerIsAProblemNeverARedirect: what the mux answers itself —
// an unknown route, another method, a path it would clean ("//", "/./",
// "/x/../") or complete with "/", the request target "*" — is a problem
// (application/problem+json) without Location; a query that cannot be
// decoded and a body on a route that takes none are 400 problems.
func TestEveryAnswerIsAProblemNeverARedirect(t *testing.T) {
	addr, siteKey, serviceKey := edgeServer(t, time.Hour)
	for _, tc := range []struct {
		request string
		status  int
		reason  string
	}{
		{"GET //items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + serviceKey + "\r\n\r\n", 404, "not-found"},
		{"GET /x/../items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + serviceKey + "\r\n\r\n", 404, "not-found"},
		{"GET /./items HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not-found"},
		{"POST //echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + siteKey + "\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"n\":1}", 404, "not-found"},
		{"GET /docs/assets HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not-found"},
		{"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not-found"},
		{"PUT /echo HTTP/1.1\r\nHost: x\r\n\r\n", 405, "method-not-allowed"},
		{"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid-request"},
		{"CONNECT x:1 HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not-found"},
		{"GET /items?cursor=%zz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + serviceKey + "\r\n\r\n", 400, "invalid-request"},
		{"GET /items?cursor=a;b=c HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + serviceKey + "\r\n\r\n", 400, "invalid-request"},
		{"GET /items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + serviceKey + "\r\nContent-Length: 2\r\n\r\n{}", 400, "invalid-request"},
		{"GET /items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + serviceKey + "\r\n\r\n", 204, ""},
	} {
		first := strings.SplitN(tc.request, "\r\n", 2)[0]
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := t.Deadline(); ok {
			_ = conn.SetDeadline(d)
		}
		if _, err := io.WriteString(conn, tc.request); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: strings.Fields(first)[0]})
		if err != nil {
			t.Fatalf("%s: %v", first, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = conn.Close()
		var p Problem
		ok := resp.StatusCode == tc.status && resp.Header.Get("Location") == ""
		if tc.reason != "" {
			ok = ok && resp.Header.Get("Content-Type") == "application/problem+json" && json.Unmarshal(raw, &p) == nil && p.Reason == tc.reason && p.Status == tc.status
		}
		if !ok {
			t.Errorf("%s: %d %q Location %q %s, want %d %s", first, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), raw, tc.status, tc.reason)
		}
	}
}

// TestReadyzFailingIsAProblem: /readyz's 503 is a problem (reason
// unavailable, Retry-After) naming the failed check only.
func TestReadyzFailingIsAProblem(t *testing.T) {
	srv := testServer(t, auth.Chain{})
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var p Problem
	if resp.StatusCode != 503 || json.Unmarshal(raw, &p) != nil || p.Reason != ReasonUnavailable || p.Detail != "not ready: db: not ready" ||
		resp.Header.Get("Retry-After") != fmt.Sprint(RetryAfterSeconds) {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header, raw)
	}
}

// TestEveryRequestCarriesItsIDInTheAnswerTheProblemAndTheLog: a
// well-formed X-Request-Id is kept, a malformed or missing one replaced by
// a new UUID; the answer's X-Request-Id, every problem's instance (the
// edge's, the authentication's, a parameter check's, a handler's) and the
// lines logged about the request name the same ID.
func TestEveryRequestCarriesItsIDInTheAnswerTheProblemAndTheLog(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	key, entry, _ := auth.NewKey(auth.Principal{Kind: auth.KindService, ID: "reader"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{entry}})
	lc := fxtest.NewLifecycle(t)
	reg := RegistrarFunc(func(api huma.API) {
		huma.Register(api, huma.Operation{OperationID: "boom", Method: http.MethodGet, Path: "/boom/{n}", Security: Bearer()},
			func(ctx context.Context, in *struct {
				N int `path:"n" minimum:"1"`
			}) (*struct{}, error) {
				return nil, Failure(ctx, log, errors.New("decode row: something unexpected"))
			})
	})
	s, err := newServer(Config{Listen: "127.0.0.1:0", Title: "test"}, serverParams{Lifecycle: lc, Log: log, Authn: ks, Registrars: []Registrar{reg}})
	if err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	t.Cleanup(lc.RequireStop)
	get := func(path, id, bearer string) (*http.Response, Problem) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr()+path, nil)
		if id != "" {
			req.Header.Set(RequestIDHeader, id)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp, p
	}
	seen := map[string]bool{}
	for _, tc := range []struct {
		name, path, id, bearer string
		status                 int
		keep                   bool
	}{
		{"a handler's 500", "/boom/1", "req-7f3a.b_c", key, 500, true},
		{"a parameter check's 422", "/boom/0", "0b8e4c6a-5e0f-4b8e-9d2a-3c1f7e6a9b10", key, 422, true},
		{"the authentication's 401", "/boom/1", "", "", 401, false},
		{"the edge's 404", "/nowhere", "has space", "", 404, false},
		{"a 404 with an ID too long", "/nowhere", strings.Repeat("a", 129), "", 404, false},
		{"a 404 with an ID of another shape", "/nowhere", "-leading-dash", "", 404, false},
	} {
		resp, p := get(tc.path, tc.id, tc.bearer)
		id := resp.Header.Get(RequestIDHeader)
		switch {
		case resp.StatusCode != tc.status:
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
		case tc.keep && id != tc.id:
			t.Errorf("%s: X-Request-Id %q, want the one sent, %q", tc.name, id, tc.id)
		case !tc.keep && (id == tc.id || !requestIDShape.MatchString(id) || len(id) != 36):
			t.Errorf("%s: X-Request-Id %q for %q sent, want a new UUID", tc.name, id, tc.id)
		case p.Instance != "urn:metallo:request:"+id:
			t.Errorf("%s: instance %q, X-Request-Id %q", tc.name, p.Instance, id)
		case seen[id]:
			t.Errorf("%s: ID %q answered twice", tc.name, id)
		}
		seen[id] = true
	}
	lines := logs.FilterMessage("request failed").All()
	if len(lines) != 1 || lines[0].ContextMap()["request_id"] != "req-7f3a.b_c" || lines[0].ContextMap()["operation"] != "boom" {
		t.Fatalf("the 500's log line: %+v", lines)
	}
}
