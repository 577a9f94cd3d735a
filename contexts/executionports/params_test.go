package executionports_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/platform/database/dbtest"
)

// The command read with a command ID PostgreSQL cannot store (NUL, a lone
// 0xff, an invalid UTF-8 sequence), one that is not a UUID, or one 10 kB
// long is 422 validation-failed at path.id on both engines, before the
// store is asked, and the problem carries none of it
// (docs/architecture.md#parameters). It was a 500 on PostgreSQL and a 404
// echoing the NUL on SQLite.
func TestACommandIDThatIsNotAUUIDIs422OnBothEngines(t *testing.T) {
	servers := map[string]*server{
		"sqlite":   startServer(t, options{}),
		"postgres": startServer(t, options{databaseURL: dbtest.NewPostgres(t)}),
	}
	for _, id := range []string{"a%00b", "%ff", "x%C3%28", "not-a-uuid", "7A1E4C2B-1D3F-4A5B-9C8D-0E1F2A3B4C5D", strings.Repeat("7", 10<<10)} {
		for engine, s := range servers {
			r := s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/"+id, s.serviceKey, "", nil)
			wantStatus(t, r, http.StatusUnprocessableEntity, "validation-failed")
			var p struct {
				Detail string `json:"detail"`
				Errors []struct {
					Location string `json:"location"`
					Value    any    `json:"value"`
				} `json:"errors"`
			}
			must(t, json.Unmarshal(r.Body, &p))
			if len(p.Errors) != 1 || p.Errors[0].Location != "path.id" {
				t.Fatalf("%s %.40s: errors %+v, want one at path.id", engine, id, p.Errors)
			}
			if v, ok := p.Errors[0].Value.(string); ok && (strings.ContainsAny(v, "\x00\ufffd") || len(v) > 256) {
				t.Fatalf("%s %.40s: echoed %q", engine, id, v)
			}
			if strings.ContainsAny(p.Detail, "\x00\ufffd") || strings.Contains(p.Detail, "7777777777") {
				t.Fatalf("%s %.40s: detail %q", engine, id, p.Detail)
			}
		}
	}
	// A well-formed ID of no command is still 404 on both.
	for _, s := range servers {
		wantStatus(t, s.call(t, http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d", s.serviceKey, "", nil), http.StatusNotFound, "unknown-command")
	}
}
