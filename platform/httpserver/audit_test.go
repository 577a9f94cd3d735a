package httpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/platform/auth"
)

type auditIn struct {
	Site string `path:"site"`
	Body struct {
		N int `json:"n"`
	}
}

type auditRead struct {
	Site string `path:"site"`
}

// Every call of a mutating operation is one audit line on the audit
// logger once answered, whatever the answer: who, what, on what, how it
// ended and the request ID; a read is not audited
// (docs/operations.md#the-audit-log).
func TestEveryMutatingCallIsOneAuditLineWithPrincipalRouteTargetOutcomeAndRequestID(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	mux := http.NewServeMux()
	api := NewAPI(mux, "test")
	UseAudit(api, zap.New(core))
	UseAuthentication(api, staticAuth{"k-alpha": {Kind: auth.KindSite, ID: "alpha"}, "k-beta": {Kind: auth.KindSite, ID: "beta"}}, zap.NewNop())
	admit := AdmitMetadata(AdmitPathPrincipal(auth.KindSite, "site"))
	huma.Register(api, huma.Operation{OperationID: "submit", Method: http.MethodPost, Path: "/sites/{site}/reports", Security: Bearer(), Metadata: admit},
		func(_ context.Context, in *auditIn) (*struct{}, error) {
			if in.Body.N == 7 {
				return nil, NewProblem(http.StatusConflict, "seven_is_taken", "n=7 is taken")
			}
			if in.Body.N == 5 {
				return nil, NewProblem(http.StatusServiceUnavailable, ReasonUnavailable, "down")
			}
			return nil, nil
		})
	huma.Register(api, huma.Operation{OperationID: "read", Method: http.MethodGet, Path: "/sites/{site}/reports", Security: Bearer(), Metadata: admit},
		func(_ context.Context, _ *auditRead) (*struct{}, error) { return nil, nil })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	call := func(method, key, body, id string) {
		t.Helper()
		var r *strings.Reader
		if body != "" {
			r = strings.NewReader(body)
		} else {
			r = strings.NewReader("")
		}
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/sites/alpha/reports", r)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		req.Header.Set(RequestIDHeader, id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	call(http.MethodPost, "k-alpha", `{"n":1}`, "req-ok")
	call(http.MethodPost, "k-alpha", `{"n":7}`, "req-conflict")
	call(http.MethodPost, "k-alpha", `{"n":5}`, "req-down")
	call(http.MethodPost, "k-beta", `{"n":1}`, "req-forbidden")
	call(http.MethodPost, "", `{"n":1}`, "req-anonymous")
	call(http.MethodGet, "k-alpha", "", "req-read")

	want := []struct {
		id, principal, outcome string
		status                 int
	}{
		{"req-ok", "site:alpha", AuditSucceeded, 204},
		{"req-conflict", "site:alpha", AuditRefused, 409},
		{"req-down", "site:alpha", AuditFailed, 503},
		{"req-forbidden", "site:beta", AuditRefused, 403},
		{"req-anonymous", "", AuditRefused, 401},
	}
	entries := logs.All()
	if len(entries) != len(want) {
		t.Fatalf("%d audit lines, want %d: %v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		f := e.ContextMap()
		if e.LoggerName != AuditLogger || e.Message != "audit" || f["request_id"] != w.id || f["principal"] != w.principal ||
			f["outcome"] != w.outcome || f["status"] != int64(w.status) || f["method"] != "POST" || f["route"] != "/sites/{site}/reports" ||
			f["operation"] != "submit" || f["target"] != "site=alpha" {
			t.Errorf("line %d: %s %s %v, want %+v", i, e.LoggerName, e.Message, f, w)
		}
	}
}

// staticAuth authenticates fixed tokens.
type staticAuth map[string]auth.Principal

func (s staticAuth) Authenticate(_ context.Context, token string) (auth.Principal, error) {
	if p, ok := s[token]; ok {
		return p, nil
	}
	return auth.Principal{}, auth.ErrUnauthenticated
}
