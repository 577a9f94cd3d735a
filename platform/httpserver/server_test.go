package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
)

type echoIn struct {
	Body struct {
		N int `json:"n" minimum:"0"`
	}
}
type echoOut struct {
	Body struct {
		Principal string `json:"principal"`
	}
}

func testServer(t *testing.T, authn auth.Authenticator) *httptest.Server {
	t.Helper()
	srv, _ := testServerWithMetrics(t, authn)
	return srv
}

// testServerWithMetrics serves the test API with its request metrics on a
// registry of its own.
func testServerWithMetrics(t *testing.T, authn auth.Authenticator) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	mux := http.NewServeMux()
	api := NewAPI(mux, "test")
	reg := prometheus.NewRegistry()
	m, err := newHTTPMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	api.UseMiddleware(m.middleware)
	UseAuthentication(api, authn, zap.NewNop())
	huma.Register(api, huma.Operation{OperationID: "echo", Method: http.MethodPost, Path: "/echo", Security: Bearer()},
		func(ctx context.Context, in *echoIn) (*echoOut, error) {
			p, _ := auth.FromContext(ctx)
			if in.Body.N == 7 {
				return nil, NewProblem(http.StatusConflict, "seven_is_taken", "n=7 is taken")
			}
			out := &echoOut{}
			out.Body.Principal = p.String()
			return out, nil
		})
	registerHealth(mux, []ReadinessCheck{{Name: "db", Check: func(context.Context) error {
		return errors.New("failed to connect to `user=postgres database=secret_db`")
	}}}, zap.NewNop())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, reg
}

func post(t *testing.T, url, token, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, resp.Header
}

func TestErrorsAreProblemDetailsWithAReason(t *testing.T) {
	key, entry, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{entry}})
	srv := testServer(t, ks)
	cases := []struct {
		name, token, body string
		status            int
		reason            string
	}{
		{"no credential", "", `{"n":1}`, 401, "unauthenticated"},
		{"unknown credential", "nope", `{"n":1}`, 401, "unauthenticated"},
		{"malformed json", key, `{"n":`, 400, "invalid-request"},
		{"unknown field", key, `{"n":1,"m":2}`, 422, "validation-failed"},
		{"negative", key, `{"n":-1}`, 422, "validation-failed"},
		{"too large", key, `{"n":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "payload-too-large"},
		{"domain problem", key, `{"n":7}`, 409, "seven_is_taken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body, hdr := post(t, srv.URL+"/echo", tc.token, tc.body)
			if status != tc.status || body["reason"] != tc.reason {
				t.Fatalf("status %d reason %v, want %d %s (body %v)", status, body["reason"], tc.status, tc.reason, body)
			}
			if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Fatalf("content type %q", ct)
			}
			if body["status"] != float64(tc.status) || body["title"] == "" {
				t.Fatalf("not RFC 9457: %v", body)
			}
		})
	}
	status, body, _ := post(t, srv.URL+"/echo", key, `{"n":1}`)
	if status != 200 || body["principal"] != "site:alpha" {
		t.Fatalf("authenticated call: %d %v", status, body)
	}
	if _, ok := body["$schema"]; ok {
		t.Fatal("responses must be exactly the operation's body, without $schema")
	}
}

type brokenAuthn struct{}

func (brokenAuthn) Authenticate(context.Context, string) (auth.Principal, error) {
	return auth.Principal{}, errors.New("tokenreview: connection refused")
}

func TestAnAuthenticatorThatCannotCheckAnswers503(t *testing.T) {
	srv := testServer(t, brokenAuthn{})
	status, body, hdr := post(t, srv.URL+"/echo", "tok", `{"n":1}`)
	if status != 503 || body["reason"] != "unavailable" || hdr.Get("Retry-After") != "5" {
		t.Fatalf("%d %v, Retry-After %q", status, body, hdr.Get("Retry-After"))
	}
}

func TestReadyzReportsFailedChecksAndHealthzDoesNot(t *testing.T) {
	srv := testServer(t, auth.Chain{})
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "db: not ready") || strings.Contains(string(b), "secret_db") ||
		resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), `"reason":"unavailable"`) {
		t.Fatalf("readyz %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	resp, err = http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	for _, p := range []string{"/openapi.json", "/openapi.yaml", "/docs"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}

func TestTheOpenAPIDocumentDescribesProblemsWithTheirReason(t *testing.T) {
	srv := testServer(t, auth.Chain{})
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	ref := doc.Paths["/echo"]["post"].Responses["default"].Content["application/problem+json"].Schema.Ref
	if ref != "#/components/schemas/Problem" {
		t.Fatalf("error responses refer to %q", ref)
	}
	if _, ok := doc.Components.Schemas["Problem"].Properties["reason"]; !ok {
		t.Fatal("the Problem schema has no reason")
	}
}

func TestProblemsDoNotEchoLargeRequestValues(t *testing.T) {
	key, entry, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{entry}})
	srv := testServer(t, ks)
	secret := strings.Repeat("s", 2000)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/echo", strings.NewReader(`{"n":"`+secret+`"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 422 || strings.Contains(string(b), secret) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

type siteIn struct {
	Site string `path:"site"`
	Body struct {
		N int `json:"n" minimum:"0"`
	}
}

func TestAWrongPrincipalIsRefusedBeforeTheBodyIsValidated(t *testing.T) {
	alphaKey, alpha, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	svcKey, svc, _ := auth.NewKey(auth.Principal{Kind: auth.KindService, ID: "execution"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{alpha, svc}})
	mux := http.NewServeMux()
	api := NewAPI(mux, "test")
	UseAuthentication(api, ks, zap.NewNop())
	huma.Register(api, huma.Operation{OperationID: "site-op", Method: http.MethodPost, Path: "/sites/{site}/x",
		Security: Bearer(), Metadata: AdmitMetadata(AdmitPathPrincipal(auth.KindSite, "site"))},
		func(context.Context, *siteIn) (*struct{}, error) { return nil, nil })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		name, url, token, body string
		status                 int
	}{
		{"service key, bad body", "/sites/alpha/x", svcKey, `{"n":-1,"extra":1}`, 403},
		{"other site, bad body", "/sites/beta/x", alphaKey, `{"n":-1}`, 403},
		{"own site, bad body", "/sites/alpha/x", alphaKey, `{"n":-1}`, 422},
		{"own site, lower-case scheme", "/sites/alpha/x", alphaKey, `{"n":1}`, 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.url, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			scheme := "Bearer "
			if strings.Contains(tc.name, "lower-case") {
				scheme = "bearer "
			}
			req.Header.Set("Authorization", scheme+tc.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 403 && (!strings.Contains(string(b), `"reason":"forbidden"`) || strings.Contains(string(b), "minimum")) {
				t.Fatalf("403 must be a problem that says nothing about the body: %s", b)
			}
		})
	}
}

func TestTheMuxsOwn404And405AreProblemDetails(t *testing.T) {
	srv := httptest.NewServer(edge(DefaultBodyReadTimeout, testServer(t, auth.Chain{}).Config.Handler))
	defer srv.Close()
	for path, want := range map[string]int{"/nowhere": 404, "/echo": 405} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/problem+json" || body["reason"] == nil {
			t.Fatalf("%s: %d %q %v", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if want == 405 && resp.Header.Get("Allow") == "" {
			t.Fatal("405 keeps its Allow header")
		}
	}
}

func TestRequestMetricsCountAnswersByOperationAndCode(t *testing.T) {
	key, entry, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{entry}})
	srv, reg := testServerWithMetrics(t, ks)
	post(t, srv.URL+"/echo", key, `{"n":1}`)
	post(t, srv.URL+"/echo", key, `{"n":2}`)
	post(t, srv.URL+"/echo", key, `{"n":7}`)
	post(t, srv.URL+"/echo", "", `{"n":1}`)
	post(t, srv.URL+"/nowhere", key, `{}`) // the mux's own 404: not an operation
	want := `
# HELP metallo_http_requests_total Requests answered by the public API, by operation ID, HTTP status code and execution environment (empty where a route has none).
# TYPE metallo_http_requests_total counter
metallo_http_requests_total{code="200",environment="",operation="echo"} 2
metallo_http_requests_total{code="401",environment="",operation="echo"} 1
metallo_http_requests_total{code="409",environment="",operation="echo"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metallo_http_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "metallo_http_request_duration_seconds"); n != 1 {
		t.Fatalf("%d duration series; want 1 (operation echo)", n)
	}
}

type streamIn struct {
	Environment string `path:"environment"`
}

// A route that declares its environment path parameter is labelled with it
// when it names a known environment, whatever the answer (a 401 included);
// an unknown value is labelled empty, so callers cannot create series.
func TestRequestMetricsLabelAKnownEnvironmentOnly(t *testing.T) {
	key, entry, _ := auth.NewKey(auth.Principal{Kind: auth.KindSite, ID: "alpha"})
	ks, _ := auth.NewKeyStore(auth.KeysFile{Keys: []auth.KeyEntry{entry}})
	mux := http.NewServeMux()
	api := NewAPI(mux, "test")
	reg := prometheus.NewRegistry()
	m, err := newHTTPMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	api.UseMiddleware(m.middleware)
	UseAuthentication(api, ks, zap.NewNop())
	huma.Register(api, huma.Operation{OperationID: "stream", Method: http.MethodGet, Path: "/streams/{environment}", Security: Bearer(),
		Metadata: MetricsEnvironment("environment", func(id string) bool { return id == "alpha-k8s" })},
		func(context.Context, *streamIn) (*struct{}, error) { return nil, nil })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(path, token string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/streams/alpha-k8s", key)
	get("/streams/alpha-k8s", "")
	get("/streams/made-up-1", key)
	get("/streams/made-up-2", "")
	want := `
# HELP metallo_http_requests_total Requests answered by the public API, by operation ID, HTTP status code and execution environment (empty where a route has none).
# TYPE metallo_http_requests_total counter
metallo_http_requests_total{code="204",environment="alpha-k8s",operation="stream"} 1
metallo_http_requests_total{code="204",environment="",operation="stream"} 1
metallo_http_requests_total{code="401",environment="alpha-k8s",operation="stream"} 1
metallo_http_requests_total{code="401",environment="",operation="stream"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metallo_http_requests_total"); err != nil {
		t.Fatal(err)
	}
}
