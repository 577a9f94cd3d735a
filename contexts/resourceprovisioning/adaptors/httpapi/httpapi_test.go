package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/sqlitestore"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// t0 is the server clock of every test.
var t0 = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)

const project = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"

// keys maps each test bearer token to its principal.
type keys map[string]auth.Principal

func (k keys) Authenticate(_ context.Context, token string) (auth.Principal, error) {
	if p, ok := k[token]; ok {
		return p, nil
	}
	return auth.Principal{}, auth.ErrUnauthenticated
}

// harness is the API on a real service over a SQLite store, served over
// HTTP with the platform's authentication and admit hook.
type harness struct {
	base string
	svc  *application.Service
	// brk closes the database under the running API.
	brk  func()
	path string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := dbtest.Migrated(t, resourceprovisioning.Database(), database.SQLite)
	store, err := sqlitestore.New(h.DB, h.Target.Path)
	dbtest.Must(t, err)
	t.Cleanup(func() { _ = store.Close() })
	log := zap.NewNop() // a fuzz target's workers may not log through f
	if _, fuzz := t.(*testing.F); !fuzz {
		log = zaptest.NewLogger(t)
	}
	tel, err := telemetry.New(log, prometheus.NewRegistry())
	dbtest.Must(t, err)
	svc, err := application.NewService(store, clock.NewManual(t0), tel, application.Config{WaldurInstance: "https://waldur.example.org", Environments: application.StaticSites{"alpha-k8s": "alpha", "beta-k8s": "beta"}})
	dbtest.Must(t, err)
	mux := http.NewServeMux()
	api := httpserver.NewAPI(mux, "test")
	httpserver.UseAuthentication(api, keys{
		"alpha": {Kind: auth.KindSite, ID: "alpha"},
		"beta":  {Kind: auth.KindSite, ID: "beta"},
		"beto":  {Kind: auth.KindService, ID: "beto"},
		"exec":  {Kind: auth.KindService, ID: "execution"},
		"env":   {Kind: auth.KindEnvironment, ID: "alpha-k8s"},
	}, log)
	httpapi.Register(api, &httpapi.Handlers{Service: svc, Log: log})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &harness{base: srv.URL + "/resource-provisioning", svc: svc, brk: func() { h.Close(); _ = store.Close() }, path: h.Target.Path}
}

type problem struct {
	Status int
	Reason string
	Errors []struct{ Location, Message string }
}

// send sends body (GET when empty) with key and returns the status and
// the decoded problem (zero unless the answer is a problem document).
func (h *harness) send(t *testing.T, path, key, body string) (int, problem, []byte) {
	t.Helper()
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(t.Context(), method, h.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var p problem
	if res.StatusCode >= 400 {
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") || json.Unmarshal(raw, &p) != nil || p.Status != res.StatusCode || p.Reason == "" {
			t.Fatalf("%s %s: %d is not a problem document with a reason: %s %s", method, path, res.StatusCode, ct, raw)
		}
	}
	return res.StatusCode, p, raw
}

// report is a valid report body member list (without braces) for resource r.
func report(r string) string {
	return `"provider_resource_id":"` + r + `","offering_id":"o","provider_project_id":"pp","state":"OK","paused":false,` +
		`"limits":{"cpu":1000},"observed_at":"2026-08-20T10:00:00Z"`
}

func reports(members string) string { return `{"reports":[{` + members + `}]}` }

const event = `{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z",` +
	`"project":{"id":"` + project + `","revision":1,"state":"active","provider_bindings":[],` +
	`"memberships":[{"party_id":"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","role":"member"}]}}`

// stored returns how many allocations and changes the service holds.
func (h *harness) stored(t *testing.T) (int, int) {
	t.Helper()
	a, err := h.svc.Allocations(t.Context(), "", application.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.svc.Changes(t.Context(), 0, application.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return len(a.Allocations), len(c.Changes)
}

type bodyCase struct {
	name, path, key, body string
	status                int
	reason, location      string
}

func (h *harness) check(t *testing.T, cases []bodyCase) {
	t.Helper()
	for _, c := range cases {
		code, p, raw := h.send(t, c.path, c.key, c.body)
		if code != c.status || p.Reason != c.reason {
			t.Errorf("%s: %d %q, want %d %q: %s", c.name, code, p.Reason, c.status, c.reason, raw)
			continue
		}
		if c.location == "" {
			continue
		}
		found := false
		for _, e := range p.Errors {
			found = found || e.Location == c.location
		}
		if !found {
			t.Errorf("%s: no error at %s: %s", c.name, c.location, raw)
		}
	}
}

// TestBodiesBreakingJSONRulesAreRefusedByNameAndStoreNothing: text that
// Go's decoder would repair or pick from silently is 400 malformed; a null
// or a control character is 422 validation-failed naming the member.
func TestBodiesBreakingJSONRulesAreRefusedByNameAndStoreNothing(t *testing.T) {
	h := newHarness(t)
	rep, ev := "/alpha/reports", "/events/beto"
	good := report("r1")
	h.check(t, []bodyCase{
		{"invalid UTF-8", rep, "alpha", reports(strings.Replace(good, `"r1"`, "\"r\xff1\"", 1)), 400, "malformed", "body"},
		{"a lone high surrogate", rep, "alpha", reports(strings.Replace(good, `"r1"`, `"r\ud8001"`, 1)), 400, "malformed", "body.reports[0].provider_resource_id"},
		{"a low surrogate first", rep, "alpha", reports(strings.Replace(good, `"r1"`, `"\udc00\ud800"`, 1)), 400, "malformed", "body.reports[0].provider_resource_id"},
		{"a limit named twice", rep, "alpha", reports(strings.Replace(good, `{"cpu":1000}`, `{"cpu":1000,"cpu":64000}`, 1)), 400, "malformed", "body.reports[0].limits.cpu"},
		{"reports named twice", rep, "alpha", `{"reports":[],"reports":[{` + good + `}]}`, 400, "malformed", "body.reports"},
		{"a field named twice", rep, "alpha", reports(good + `,"state":"Terminated"`), 400, "malformed", "body.reports[0].state"},
		{"data after the value", rep, "alpha", reports(good) + ` {}`, 400, "malformed", ""},
		{"not JSON", rep, "alpha", `{"reports":[{` + good, 400, "malformed", ""},
		{"nested 33 levels", rep, "alpha", reports(good + `,"native_scope":` + strings.Repeat("[", 30) + strings.Repeat("]", 30)), 400, "malformed", "body.reports[0].native_scope" + strings.Repeat("[0]", 29)},
		{"nested 10,001 levels", rep, "alpha", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), 400, "malformed", "body" + strings.Repeat("[0]", 32)},
		{"null paused", rep, "alpha", reports(strings.Replace(good, `"paused":false`, `"paused":null`, 1)), 422, "validation-failed", "body.reports[0].paused"},
		{"null applied limits", rep, "alpha", reports(good + `,"applied_limits":null`), 422, "validation-failed", "body.reports[0].applied_limits"},
		{"null identifier", rep, "alpha", reports(strings.Replace(good, `"r1"`, `null`, 1)), 422, "validation-failed", "body.reports[0].provider_resource_id"},
		{"null reports", rep, "alpha", `{"reports":null}`, 422, "validation-failed", "body.reports"},
		{"NUL in a value", rep, "alpha", reports(good + `,"native_scope":"ns\u0000"`), 422, "validation-failed", "body.reports[0].native_scope"},
		{"NUL in a limit key", rep, "alpha", reports(strings.Replace(good, `{"cpu":1000}`, `{"cpu\u0000":1000}`, 1)), 422, "validation-failed", ""},
		{"event: invalid UTF-8", ev, "beto", strings.Replace(event, `"member"`, "\"mem\xc0ber\"", 1), 400, "malformed", ""},
		{"event: a member named twice", ev, "beto", strings.Replace(event, `"revision":1,`, `"revision":1,"revision":9,`, 1), 400, "malformed", "body.project.revision"},
		{"event: null project", ev, "beto", `{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":null}`, 422, "validation-failed", "body.project"},
		{"event: null in a membership", ev, "beto", strings.Replace(event, `"role":"member"`, `"role":null`, 1), 422, "validation-failed", "body.project.memberships[0].role"},
		{"event: NUL in a membership", ev, "beto", strings.Replace(event, `"role":"member"`, `"role":"mem\u0000ber"`, 1), 422, "validation-failed", "body.project.memberships[0].role"},
		{"event: a lone surrogate", ev, "beto", strings.Replace(event, `"e1"`, `"e\udfff"`, 1), 400, "malformed", "body.event_id"},
	})
	if a, c := h.stored(t); a != 0 || c != 0 {
		t.Fatalf("refused bodies stored %d allocations and %d changes", a, c)
	}
	// Nothing of the refused events was received: the event is new.
	if code, _, raw := h.send(t, ev, "beto", event); code != 200 || !strings.Contains(string(raw), `"applied"`) {
		t.Fatalf("the valid event after the refused ones: %d %s", code, raw)
	}
	// Escapes that only look like the refused ones pass: an escaped
	// backslash before "u", a surrogate pair.
	body := `{"reports":[{` + strings.Replace(good, `"r1"`, `"r\\ud800"`, 1) + `},{` + strings.Replace(good, `"r1"`, `"r\ud83d\ude00"`, 1) + `}]}`
	if code, _, raw := h.send(t, rep, "alpha", body); code != 200 {
		t.Fatalf("well-formed escapes: %d %s", code, raw)
	}
	if a, _ := h.stored(t); a != 2 {
		t.Fatalf("%d allocations, want 2", a)
	}
}

// TestValidationFailuresCarryTheOneReason: Huma's schema checks, the
// domain's rules and the service's clock skew all answer 422
// validation-failed, each naming its location.
func TestValidationFailuresCarryTheOneReason(t *testing.T) {
	h := newHarness(t)
	good := report("r1")
	h.check(t, []bodyCase{
		{"unknown field", "/alpha/reports", "alpha", reports(good + `,"colour":"red"`), 422, "validation-failed", "body.reports[0].colour"},
		{"unknown limit key", "/alpha/reports", "alpha", reports(strings.Replace(good, `"cpu"`, `"ram"`, 1)), 422, "validation-failed", "body.reports[0].limits.ram"},
		{"nanoseconds", "/alpha/reports", "alpha", reports(strings.Replace(good, `10:00:00Z`, `10:00:00.0000001Z`, 1)), 422, "validation-failed", "body.reports[0].observed_at"},
		{"beyond the clock skew", "/alpha/reports", "alpha", reports(strings.Replace(good, `10:00:00Z`, `10:05:00.000001Z`, 1)), 422, "validation-failed", "body.reports[0].observed_at"},
		{"a project ID that is not a UUID", "/projects/project-a/allocations", "exec", "", 422, "validation-failed", "path.project"},
		{"an upper-case project ID", "/projects/" + strings.ToUpper(project) + "/allocations", "exec", "", 422, "validation-failed", "path.project"},
		{"event: a project ID that is not a UUID", "/events/beto", "beto", strings.Replace(event, project, "project-a", 1), 422, "validation-failed", "body.project.id"},
		{"event: an upper-case party ID", "/events/beto", "beto", strings.Replace(event, "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d", "9C2E5D1A-0B7F-4E3C-8A6D-2F1E0C9B8A7D", 1), 422, "validation-failed", "body.project.memberships[0].party_id"},
		{"event: unknown type", "/events/beto", "beto", strings.Replace(event, "project.ProjectChanged", "project.ProjectDeleted", 1), 422, "validation-failed", "body.type"},
	})
	if a, c := h.stored(t); a != 0 || c != 0 {
		t.Fatalf("refused bodies stored %d allocations and %d changes", a, c)
	}
	// Exactly at the skew bound is accepted; the canonical project ID reads.
	if code, _, raw := h.send(t, "/alpha/reports", "alpha", reports(strings.Replace(good, `10:00:00Z`, `10:05:00Z`, 1))); code != 200 {
		t.Fatalf("at the skew bound: %d %s", code, raw)
	}
	if code, _, raw := h.send(t, "/projects/"+project+"/allocations", "exec", ""); code != 200 {
		t.Fatalf("a canonical project ID: %d %s", code, raw)
	}
}

// TestTheWrongKeyIsForbiddenBeforeTheBodyIsRead: the admit hook answers
// 403 for a key of another Site or another kind even when the body would
// be refused (400/422) for an admitted key.
func TestTheWrongKeyIsForbiddenBeforeTheBodyIsRead(t *testing.T) {
	h := newHarness(t)
	bad := map[string]string{
		"null":      reports(strings.Replace(report("r1"), `"paused":false`, `"paused":null`, 1)),
		"invalid":   reports(strings.Replace(report("r1"), `"OK"`, `"Running"`, 1)),
		"malformed": `{"reports":[`,
	}
	for what, body := range bad {
		h.check(t, []bodyCase{
			{"site beta to alpha, " + what, "/alpha/reports", "beta", body, 403, "forbidden", ""},
			{"service key to reports, " + what, "/alpha/reports", "beto", body, 403, "forbidden", ""},
			{"environment key to reports, " + what, "/alpha/reports", "env", body, 403, "forbidden", ""},
			{"site key to events, " + what, "/events/beto", "alpha", body, 403, "forbidden", ""},
			{"another service to events, " + what, "/events/beto", "exec", body, 403, "forbidden", ""},
		})
	}
	h.check(t, []bodyCase{
		{"the own Site's key sees the body rule", "/alpha/reports", "alpha", bad["null"], 422, "validation-failed", "body.reports[0].paused"},
		{"a site key on the snapshot", "/allocations", "alpha", "", 403, "forbidden", ""},
		{"a site key on the feed", "/changes?after=" + "garbage!", "alpha", "", 403, "forbidden", ""},
		{"an environment key on a Project", "/projects/" + project + "/allocations", "env", "", 403, "forbidden", ""},
		{"a site key on binding conflicts", "/project-binding-conflicts", "alpha", "", 403, "forbidden", ""},
		{"no key", "/alpha/reports", "nope", bad["null"], 401, "unauthenticated", ""},
	})
}

// TestCursorsNotIssuedByTheAPIAre400 : forged, garbled and foreign
// cursors are refused with invalid-cursor, never a 500 and never the first
// page again; issued cursors page completely.
func TestCursorsNotIssuedByTheAPIAre400(t *testing.T) {
	h := newHarness(t)
	if code, _, raw := h.send(t, "/alpha/reports", "alpha", `{"reports":[{`+report("r1")+`},{`+report("r2")+`},{`+report("r3")+`}]}`); code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	var first struct {
		Allocations   []struct{ ID string }
		NextCursor    string `json:"next_cursor"`
		ChangesCursor string `json:"changes_cursor"`
	}
	code, _, raw := h.send(t, "/allocations?limit=1", "exec", "")
	if code != 200 || json.Unmarshal(raw, &first) != nil || first.NextCursor == "" || first.ChangesCursor == "" {
		t.Fatalf("first page: %d %s", code, raw)
	}
	cases := []bodyCase{}
	for name, cursor := range map[string]string{
		"garbled":                     "%21%21%21",
		"padded base64":               enc("a1:"+first.Allocations[0].ID) + "==",
		"forged text":                 enc("nope"),
		"an empty value":              enc("a1:"),
		"not an allocation ID":        enc("a1:r1"),
		"an upper-case allocation ID": enc("a1:" + strings.ToUpper(first.Allocations[0].ID)),
		"a feed cursor (foreign)":     first.ChangesCursor,
		"another version's prefix":    enc("a2:" + first.Allocations[0].ID),
	} {
		cases = append(cases, bodyCase{"snapshot, " + name, "/allocations?cursor=" + cursor, "exec", "", 400, "invalid-cursor", ""})
	}
	for name, cursor := range map[string]string{
		"garbled":                     "%2A",
		"forged text":                 enc("c1:three"),
		"negative":                    enc("c1:-1"),
		"leading zeros":               enc("c1:03"),
		"overflowing":                 enc("c1:99999999999999999999"),
		"beyond the head":             enc("c1:4"),
		"a snapshot cursor (foreign)": first.NextCursor,
	} {
		cases = append(cases, bodyCase{"feed, " + name, "/changes?after=" + cursor, "exec", "", 400, "invalid-cursor", ""})
	}
	h.check(t, cases)
	// Issued cursors page the snapshot completely, and the feed's head is a
	// valid (empty) position.
	seen := []string{first.Allocations[0].ID}
	for cursor := first.NextCursor; cursor != ""; {
		var page struct {
			Allocations []struct{ ID string }
			NextCursor  string `json:"next_cursor"`
		}
		code, _, raw := h.send(t, "/allocations?limit=1&cursor="+cursor, "exec", "")
		if code != 200 || json.Unmarshal(raw, &page) != nil {
			t.Fatalf("page after %s: %d %s", cursor, code, raw)
		}
		for _, a := range page.Allocations {
			seen = append(seen, a.ID)
		}
		cursor = page.NextCursor
	}
	if len(seen) != 3 || seen[0] >= seen[1] || seen[1] >= seen[2] {
		t.Fatalf("paged %v, want three IDs in order", seen)
	}
	code, _, raw = h.send(t, "/changes?after="+first.ChangesCursor, "exec", "")
	if code != 200 || !bytes.Contains(raw, []byte(`"changes":[]`)) {
		t.Fatalf("the head cursor: %d %s", code, raw)
	}
	code, _, raw = h.send(t, "/changes?after="+enc("c1:1"), "exec", "")
	if code != 200 || bytes.Count(raw, []byte(`"allocation_id"`)) != 2 {
		t.Fatalf("after position 1: %d %s", code, raw)
	}
}

// TestNumbersThatDoNotFitTheirIntegerFieldAre422AtTheMember: a number with
// a fraction or an exponent, or beyond 64 bits, where an integer is
// expected is 422 validation-failed located at the member, with a message
// that names no Go type; nothing is stored.
func TestNumbersThatDoNotFitTheirIntegerFieldAre422AtTheMember(t *testing.T) {
	h := newHarness(t)
	rep, ev := "/alpha/reports", "/events/beto"
	good := report("r1")
	binding := `{"event_id":"e2","type":"party.PartyProviderBindingChanged","occurred_at":"2026-08-20T10:00:00Z",` +
		`"binding":{"id":"e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b","party_id":"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","revision":2,` +
		`"provider":"site","instance":"alpha-k8s","external_id":"alice","state":"verified","generation":1e0}}`
	cases := []bodyCase{
		{"event: revision 1e0", ev, "beto", strings.Replace(event, `"revision":1,`, `"revision":1e0,`, 1), 422, "validation-failed", "body.project.revision"},
		{"event: revision 1.5", ev, "beto", strings.Replace(event, `"revision":1,`, `"revision":1.5,`, 1), 422, "validation-failed", "body.project.revision"},
		{"event: revision beyond int64", ev, "beto", strings.Replace(event, `"revision":1,`, `"revision":9223372036854775808,`, 1), 422, "validation-failed", "body.project.revision"},
		{"event: generation 1e0", ev, "beto", binding, 422, "validation-failed", "body.binding.generation"},
		{"report: cpu 1e3", rep, "alpha", reports(strings.Replace(good, `"cpu":1000`, `"cpu":1e3`, 1)), 422, "validation-failed", "body.reports[0].limits.cpu"},
		{"second report: memory beyond int64", rep, "alpha", `{"reports":[{` + good + `},{` + report("r2") + `,"applied_limits":{"memory":1e400}}]}`, 422, "validation-failed", "body.reports[1].applied_limits.memory"},
	}
	h.check(t, cases)
	for _, c := range cases {
		_, p, raw := h.send(t, c.path, c.key, c.body)
		for _, e := range p.Errors {
			for _, leak := range []string{"int64", "Go struct", "unmarshal", "ProjectBody"} {
				if strings.Contains(e.Message, leak) {
					t.Errorf("%s: the message names %q: %s", c.name, leak, raw)
				}
			}
		}
	}
	if a, c := h.stored(t); a != 0 || c != 0 {
		t.Fatalf("refused bodies stored %d allocations and %d changes", a, c)
	}
	if code, _, raw := h.send(t, ev, "beto", event); code != 200 || !strings.Contains(string(raw), `"applied"`) {
		t.Fatalf("the valid event after the refused ones: %d %s", code, raw)
	}
}

// TestBodiesMustBeDeclaredJSON: like the execution API, a report or an
// event is JSON declared as application/json or a +json type, in any case,
// UTF-8; no Content-Type (Huma would assume JSON), another type or another
// charset is 415 and stores nothing.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	h := newHarness(t)
	post := func(path, key, ct, body string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		return res.StatusCode, raw
	}
	routes := map[string]struct{ key, body string }{
		"/alpha/reports": {"alpha", reports(report("r1"))},
		"/events/beto":   {"beto", event},
	}
	for path, c := range routes {
		for _, ct := range []string{"", "text/plain", "application/cbor", "application/json; charset=latin1", "application/jsonx", "multipart/form-data; boundary=x"} {
			code, raw := post(path, c.key, ct, c.body)
			var p problem
			if code != http.StatusUnsupportedMediaType || json.Unmarshal(raw, &p) != nil || p.Reason != "unsupported-media-type" {
				t.Errorf("%s with Content-Type %q: %d %s, want a 415 problem", path, ct, code, raw)
			}
		}
	}
	if a, c := h.stored(t); a != 0 || c != 0 {
		t.Fatalf("refused bodies stored %d allocations and %d changes", a, c)
	}
	for path, c := range routes {
		for _, ct := range []string{"APPLICATION/JSON", "application/json; charset=UTF-8", "Application/Json; Charset=\"utf-8\"", "application/vnd.metallo+json", "APPLICATION/VND.METALLO+JSON"} {
			if code, raw := post(path, c.key, ct, c.body); code != http.StatusOK {
				t.Errorf("%s with Content-Type %q: %d %s, want 200", path, ct, code, raw)
			}
		}
	}
}

// TestAClosedDatabaseIs503OnEveryRouteWithoutDriverText: with the SQLite
// database closed under the API, every route answers 503 unavailable with
// Retry-After, and the problem names neither the driver nor the file.
func TestAClosedDatabaseIs503OnEveryRouteWithoutDriverText(t *testing.T) {
	h := newHarness(t)
	if code, _, raw := h.send(t, "/alpha/reports", "alpha", reports(report("r1"))); code != 200 {
		t.Fatalf("report: %d %s", code, raw)
	}
	h.brk()
	for _, c := range []struct{ path, key, body string }{
		{"/alpha/reports", "alpha", reports(report("r2"))},
		{"/events/beto", "beto", event},
		{"/allocations", "exec", ""},
		{"/changes", "exec", ""},
		{"/project-binding-conflicts", "exec", ""},
		{"/projects/" + project + "/allocations", "exec", ""},
		{"/alpha/accounts", "alpha", `{"provider_resource_id":"r1","observed_at":"2026-08-20T10:00:00Z","accounts":[]}`},
		{"/alpha/account-lookup?environment=alpha-k8s&username=alice&provider_project=pp", "alpha", ""},
		{"/environments/alpha-k8s/bindings", "exec", ""},
		{"/projects/" + project + "/accounts", "exec", ""},
		{"/allocations/6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77/accounts", "exec", ""},
	} {
		method := http.MethodPost
		if c.body == "" {
			method = http.MethodGet
		}
		req, err := http.NewRequestWithContext(t.Context(), method, h.base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+c.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		var p problem
		if res.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(raw, &p) != nil || p.Reason != "unavailable" {
			t.Errorf("%s %s: %d %s, want 503 unavailable", method, c.path, res.StatusCode, raw)
		}
		if res.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", method, c.path)
		}
		for _, leak := range []string{"sqlite", "sql:", h.path, "closed"} {
			if strings.Contains(string(raw), leak) {
				t.Errorf("%s %s: the problem leaks %q: %s", method, c.path, leak, raw)
			}
		}
	}
	// In-process owners see a fixed sentence too; the cause stays for logs.
	_, err := h.svc.ProjectAllocations(t.Context(), project, "")
	if !errors.Is(err, application.ErrUnavailable) || strings.Contains(err.Error(), "sql") {
		t.Fatalf("owner read: %v, want ErrUnavailable without driver text", err)
	}
	if cause := database.LogCause(err); !strings.Contains(cause, "sql") {
		t.Fatalf("the log cause %q lost the driver's error", cause)
	}
}
