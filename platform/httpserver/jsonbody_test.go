package httpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/ijson"
)

func TestJSONMediaTypeIsOneRuleInAnyCase(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                        true,
		"APPLICATION/JSON":                        true,
		"Application/Json; Charset=UTF-8":         true,
		`application/json; charset="utf-8"`:       true,
		"application/vnd.metallo+json":            true,
		"APPLICATION/PROBLEM+JSON; charset=utf-8": true,
		"":                                          false,
		"application/json; charset=latin1":          false,
		"application/jsonx":                         false,
		"application/json+xml":                      false,
		"text/plain":                                false,
		"application/cbor":                          false,
		"application/json; charset":                 false,
		"multipart/form-data; boundary=x":           false,
		"application/x-www-form-urlencoded":         false,
		"application/vnd.metallo+json; charset=ucs": false,
	} {
		if got := JSONMediaType(ct); got != want {
			t.Errorf("JSONMediaType(%q) = %v, want %v", ct, got, want)
		}
	}
}

type strictIn struct {
	Body struct {
		N int `json:"n"`
	}
}

// strictServer serves POST /strict behind StrictJSONBody (100 bytes, the
// ijson rules) and returns it with the bearer key it admits.
func strictServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	mux := http.NewServeMux()
	api := NewAPI(mux, "strict")
	key, entry, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{entry}})
	UseAuthentication(api, ks, zap.NewNop())
	guard := StrictJSONBody{
		Limit: 100,
		Check: func(raw []byte) error {
			_, err := ijson.Check(raw, ijson.Options{MaxDepth: ijson.MaxDepth})
			return err
		},
		Refuse: func(err error) *Problem { return NewProblem(JSONStatus(err), "malformed", JSONRule(err)) },
	}
	huma.Register(api, huma.Operation{OperationID: "strict", Method: http.MethodPost, Path: "/strict", Security: Bearer(), MaxBodyBytes: 101,
		Middlewares: huma.Middlewares{guard.Middleware()}},
		func(context.Context, *strictIn) (*struct{ Body struct{ OK bool } }, error) {
			out := &struct{ Body struct{ OK bool } }{}
			out.Body.OK = true
			return out, nil
		})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, key
}

// TestABodyShorterThanItsContentLengthIs400: a client that declares 100
// bytes, sends 10 and half-closes its side gets 400 invalid-request (the
// body could not be read whole), not a 5xx.
func TestABodyShorterThanItsContentLengthIs400(t *testing.T) {
	srv, key := strictServer(t)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("POST /strict HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", key)
	if _, err := io.WriteString(conn, head+`{"n":1234`); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p Problem
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(raw, &p) != nil || p.Reason != DefaultReason(http.StatusBadRequest) ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("a truncated body: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
}

// TestEveryJSONSpellingDecodesAlike: the guard hands Huma every accepted
// media type as application/json, so a +json type or an upper-case one
// decodes like application/json; another type is 415 before a byte is read.
func TestEveryJSONSpellingDecodesAlike(t *testing.T) {
	srv, key := strictServer(t)
	for ct, want := range map[string]int{
		"APPLICATION/JSON": 200, "application/vnd.metallo+json": 200, "Application/Json; charset=UTF-8": 200,
		"application/cbor": 415, "application/json; charset=latin1": 415, "": 415,
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/strict", strings.NewReader(`{"n":1}`))
		req.Header.Set("Authorization", "Bearer "+key)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Content-Type %q: %d %s, want %d", ct, resp.StatusCode, raw, want)
		}
	}
}
