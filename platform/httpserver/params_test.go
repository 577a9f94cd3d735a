package httpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
)

type paramsIn struct {
	ID     string `path:"id" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"`
	Cursor string `query:"cursor" maxLength:"512"`
}

// A path or query parameter that is not text (NUL, another control
// character, invalid UTF-8) is 422 naming it before the handler runs, its
// value not echoed; a parameter of the wrong shape is Huma's 422, its
// value echoed only when it is short text; a path in the mux's 404 is
// quoted.
func TestParametersThatAreNotTextAre422BeforeTheHandlerAndNeverEchoed(t *testing.T) {
	mux := http.NewServeMux()
	api := NewAPI(mux, "test")
	UseAuthentication(api, auth.Chain{}, zap.NewNop())
	reached := 0
	huma.Register(api, huma.Operation{OperationID: "get", Method: http.MethodGet, Path: "/things/{id}"},
		func(_ context.Context, in *paramsIn) (*struct{}, error) {
			reached++
			return &struct{}{}, nil
		})
	srv := httptest.NewServer(edge(DefaultBodyReadTimeout, mux))
	defer srv.Close()
	const id = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	long := strings.Repeat("x", 10<<10)
	for _, tc := range []struct {
		path, location string
		status         int
	}{
		{"/things/a%00b", "path.id", 422},
		{"/things/x%C3%28", "path.id", 422},
		{"/things/%ff", "path.id", 422},
		{"/things/a%1bb", "path.id", 422},
		{"/things/a%C2%85b", "path.id", 422}, // C1 NEL
		{"/things/" + long, "path.id", 422},
		{"/things/" + id + "?cursor=a%00b", "query.cursor", 422},
		{"/things/" + id + "?cursor=ok&cursor=%ff", "query.cursor", 422},
		{"/things/" + id + "?cursor=" + long, "query.cursor", 422},
		{"/things/" + id + "?cursor=ok", "", 204},
		{"/nowhere/a%00b", "", 404},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%.80s: %d, want %d: %s", tc.path, resp.StatusCode, tc.status, raw)
			continue
		}
		if tc.status == 204 {
			continue
		}
		var p struct {
			Detail string
			Reason string
			Errors []struct {
				Location string
				Value    any
			}
		}
		if err := json.Unmarshal(raw, &p); err != nil || p.Reason == "" {
			t.Errorf("%.80s: not a problem: %s", tc.path, raw)
			continue
		}
		if !IsText(p.Detail) || strings.Contains(p.Detail, long) || strings.ContainsRune(p.Detail, '\uFFFD') {
			t.Errorf("%.80s: detail carries what the caller sent: %q", tc.path, p.Detail)
		}
		if tc.location != "" && (len(p.Errors) == 0 || p.Errors[0].Location != tc.location) {
			t.Errorf("%.80s: errors %+v, want one at %s", tc.path, p.Errors, tc.location)
		}
		for _, e := range p.Errors {
			if s, ok := e.Value.(string); ok && (!IsText(s) || len(s) > maxEchoedValue) {
				t.Errorf("%.80s: echoed %q", tc.path, s)
			}
		}
	}
	if reached != 1 {
		t.Fatalf("the handler ran %d times, want once (for the one good request)", reached)
	}
}
