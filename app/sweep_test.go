package app

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/httpserver/routetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The route sweep: generated parameters and bodies sent to every route of
// both central roles (the routes of the served OpenAPI document, so a new
// route is swept without a change here) on both engines. Every answer
// must be a 2xx or a 4xx problem (never a 5xx), arrive within the body
// read deadline (a bound on a hang, not a speed target), and a refused
// request must leave every table of both databases as it was. A parameter
// that is not text (NUL, invalid UTF-8, an escape character) or is 10 kB
// long is a 4xx on every route, and every request gets the same status on
// both engines. Rules: docs/architecture.md#parameters,
// docs/operations.md#request-bodies.

// sweepReadTimeout is the sweep processes' --body-read-timeout.
const sweepReadTimeout = 2 * time.Second

// sweepHangBound bounds how long any answer may take: the body read
// deadline and a margin for a loaded machine. An answer later than this is
// a hang.
const sweepHangBound = sweepReadTimeout + 5*time.Second

// sweepProcess is `serve --role provisioning,execution` composed in this
// test process on one engine, the execution role reading its owner in
// process.
type sweepProcess struct {
	base   string
	files  executiontest.Files
	api    huma.API
	digest func(t *testing.T) string
}

func startSweepProcess(t *testing.T, engine string) *sweepProcess {
	t.Helper()
	return startSweepProcessWith(t, engine, sweepReadTimeout)
}

// startSweepProcessWith is startSweepProcess with --body-read-timeout
// readTimeout.
func startSweepProcessWith(t *testing.T, engine string, readTimeout time.Duration) *sweepProcess {
	t.Helper()
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	provURL, execURL := "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "sqlite:"+filepath.Join(dir, "execution.sqlite")
	if engine == "postgres" {
		provURL, execURL = dbtest.NewPostgres(t), dbtest.NewPostgres(t)
	}
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", provURL, "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", execURL, "--resource-owner", "in-process"),
	}
	var srv *httpserver.Server
	app := fxtest.New(t,
		Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true, BodyReadTimeout: readTimeout}, zaptest.NewLogger(t)),
		fx.Populate(&srv),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	dbs := []*database.Handle{openForDigest(t, provURL), openForDigest(t, execURL)}
	return &sweepProcess{base: "http://" + srv.Addr(), files: files, api: srv.API, digest: func(t *testing.T) string {
		t.Helper()
		h := sha256.New()
		for _, db := range dbs {
			h.Write([]byte(tablesDigest(t, db)))
		}
		return hex.EncodeToString(h.Sum(nil))
	}}
}

func openForDigest(t *testing.T, rawURL string) *database.Handle {
	t.Helper()
	target, err := database.ParseURL(rawURL, "")
	dbtest.Must(t, err)
	h, err := database.Open(t.Context(), target, database.Options{})
	dbtest.Must(t, err)
	t.Cleanup(h.Close)
	return h
}

// tablesDigest is every row of every table of db, as text, sorted.
func tablesDigest(t *testing.T, h *database.Handle) string {
	t.Helper()
	ctx := t.Context()
	var rows []string
	if h.Pool != nil {
		tables, err := h.Pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
		dbtest.Must(t, err)
		var names []string
		for tables.Next() {
			var n string
			dbtest.Must(t, tables.Scan(&n))
			names = append(names, n)
		}
		tables.Close()
		for _, n := range names {
			rs, err := h.Pool.Query(ctx, fmt.Sprintf(`SELECT %q::text FROM %q`, n, n))
			dbtest.Must(t, err)
			for rs.Next() {
				var s string
				dbtest.Must(t, rs.Scan(&s))
				rows = append(rows, n+":"+s)
			}
			rs.Close()
			dbtest.Must(t, rs.Err())
		}
	} else {
		tables, err := h.DB.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
		dbtest.Must(t, err)
		var names []string
		for tables.Next() {
			var n string
			dbtest.Must(t, tables.Scan(&n))
			names = append(names, n)
		}
		dbtest.Must(t, tables.Close())
		for _, n := range names {
			rs, err := h.DB.QueryContext(ctx, fmt.Sprintf(`SELECT * FROM %q`, n))
			dbtest.Must(t, err)
			cols, err := rs.Columns()
			dbtest.Must(t, err)
			for rs.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				dbtest.Must(t, rs.Scan(ptrs...))
				rows = append(rows, fmt.Sprintf("%s:%v", n, vals))
			}
			dbtest.Must(t, rs.Close())
		}
	}
	sort.Strings(rows)
	return strings.Join(rows, "\n")
}

// sweepRequest is one generated request.
type sweepRequest struct {
	name        string // what it tries, for messages
	method      string
	path        string // with parameters filled in and escaped
	key         string
	contentType string
	body        []byte
	// badParam marks a parameter that is not text or is 10 kB long: the
	// answer must be a 4xx.
	badParam bool
	// want is the status the answer must have (0: any the other checks
	// allow).
	want int
	// jsonSpelling marks a good body declared JSON in another spelling:
	// the answer must not be 415.
	jsonSpelling bool
	// offRoute marks a request whose path names no route (the mux answers
	// it), so the operation's documented reasons do not apply.
	offRoute bool
}

const (
	sweepUUID   = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	sweepSite   = "alpha"
	sweepEnv    = "alpha-k8s"
	sweepInstID = "inst-sweep-1"
)

// goodParam is a valid value of parameter p.
func goodParam(p *huma.Param) string {
	switch {
	case p.Name == "environment":
		return sweepEnv
	case p.Name == "site":
		return sweepSite
	case p.Schema != nil && p.Schema.Pattern == httpserver.UUIDPattern:
		return sweepUUID
	case p.Schema != nil && p.Schema.Type == "integer":
		if p.Schema.Minimum != nil && *p.Schema.Minimum > 0 {
			return fmt.Sprint(int64(*p.Schema.Minimum))
		}
		return "0"
	case p.Schema != nil && p.Schema.Type == "boolean":
		return "false"
	case p.In == "query" && (p.Name == "cursor" || p.Name == "after"):
		return ""
	}
	return "alice"
}

// badParams are the values every parameter is tried with: not text, or
// too long for any parameter.
var badParams = map[string]string{
	"NUL":           "a\x00b",
	"0xff":          "\xff",
	"invalid UTF-8": "x\xC3\x28",
	"ESC":           "a\x1bb",
	"10 kB":         strings.Repeat("7", 10<<10),
}

// keyFor is the credential that admits op, so requests reach its
// parameter and body checks.
func keyFor(s *sweepProcess, op *huma.Operation) string {
	switch {
	case strings.HasPrefix(op.Path, "/site/v1/"):
		return s.files.EnvironmentKeys[sweepEnv]
	case strings.Contains(op.Path, "{site}"):
		return s.files.ExtraKeys["site:alpha"]
	case strings.HasSuffix(op.Path, "/events/beto"):
		return s.files.ExtraKeys["service:beto"]
	}
	return s.files.ServiceKey
}

// fill returns op's path and query with every parameter good except
// override (name → raw value).
func fill(op *huma.Operation, override map[string]string) string {
	path := op.Path
	q := url.Values{}
	for _, p := range op.Parameters {
		v, ok := override[p.Name]
		if !ok {
			v = goodParam(p)
		}
		switch p.In {
		case "path":
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(v))
		case "query":
			if v != "" {
				q.Set(p.Name, v)
			}
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// bodySchema is the schema of op's JSON request body, or nil.
func bodySchema(api huma.API, op *huma.Operation) *huma.Schema {
	if op.RequestBody == nil || op.RequestBody.Content["application/json"] == nil {
		return nil
	}
	return resolve(api, op.RequestBody.Content["application/json"].Schema)
}

func resolve(api huma.API, s *huma.Schema) *huma.Schema {
	for s != nil && s.Ref != "" {
		s = api.OpenAPI().Components.Schemas.SchemaFromRef(s.Ref)
	}
	return s
}

// instance generates a value of schema s: every property, the first enum
// value, a known pattern's match, one array item, one map member.
func instance(api huma.API, s *huma.Schema, depth int) any {
	s = resolve(api, s)
	if s == nil || depth > 8 {
		return "x"
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	switch s.Type {
	case "object":
		out := map[string]any{}
		for name, p := range s.Properties {
			out[name] = instance(api, p, depth+1)
		}
		if ap, ok := s.AdditionalProperties.(*huma.Schema); ok && len(s.Properties) == 0 {
			out["cpu"] = instance(api, ap, depth+1)
		}
		return out
	case "array":
		return []any{instance(api, s.Items, depth+1)}
	case "integer", "number":
		if s.Minimum != nil && *s.Minimum > 1 {
			return int64(*s.Minimum)
		}
		return 1
	case "boolean":
		return false
	case "string":
		switch {
		case s.Format == "date-time":
			return "2026-08-20T10:00:00Z"
		case s.Pattern == httpserver.UUIDPattern:
			return sweepUUID
		case s.Pattern != "":
			return "a1"
		}
		return "x"
	}
	return map[string]any{}
}

// leaves lists the JSON paths (member names and indexes) of every value in
// v, containers included.
func leaves(v any, at []any, out *[][]any) {
	*out = append(*out, slices.Clone(at))
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(mapsKeys(x)) {
			leaves(x[k], append(at, k), out)
		}
	case []any:
		for i, e := range x {
			leaves(e, append(at, i), out)
		}
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// mutate returns a deep copy of v with the value at path replaced by
// repl (removed when repl is removeMember).
func mutate(v any, path []any, repl any) any {
	if len(path) == 0 {
		return repl
	}
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = e
		}
		k := path[0].(string)
		if len(path) == 1 && repl == removeMember {
			delete(c, k)
		} else {
			c[k] = mutate(x[k], path[1:], repl)
		}
		return c
	case []any:
		c := slices.Clone(x)
		i := path[0].(int)
		c[i] = mutate(x[i], path[1:], repl)
		return c
	}
	return v
}

type removed struct{}

var removeMember = removed{}

// replacements are the values a member is mutated to: other valid values
// first (a new resource, other limits), then what no member takes.
var replacements = []any{"y2", 2000, 0, false, nil, "a\x00b", "\u001b[31m", strings.Repeat("x", 10<<10), -1, 1.5, json.Number("1e400"),
	json.Number("1000000000000000000000000000000"), json.Number("-9223372036854775809"), true, "", map[string]any{}, []any{}, removeMember,
	"2026-08-20T10:00:00.123456789Z", "9999-12-31T23:59:59Z"}

// rawBodies are bodies no schema generates.
var rawBodies = []string{"", "{", "[]", "null", "nul", "\"x\"", "0", "{}", `{"a":1,"a":2}`, "{\"x\":\"\xff\"}", `{"x":"\ud800"}`,
	"{} {}", strings.Repeat("[", 5000) + strings.Repeat("]", 5000), "{\"x\":\"a\x00b\"}", "\xef\xbb\xbf{}"}

// seedBodies are valid bodies of the routes that take one (by operation
// ID), so that their mutations reach past the first check; a route without
// one is mutated from a generated instance of its schema.
var seedBodies = map[string]string{
	"submit-reports": `{"reports":[{"provider_resource_id":"r1","offering_id":"o","provider_project_id":"` + memberWaldur + `","state":"OK","paused":false,` +
		`"limits":{"cpu":1000},"applied_limits":{"cpu":1000},"native_scope":"ns-r1","observed_at":"2026-08-20T10:00:00Z"}]}`,
	"receive-beto-event": `{"event_id":"p1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"` + sweepUUID + `","revision":1,"state":"active",` +
		`"provider_bindings":[{"provider":"waldur","instance":"` + waldurInstance + `","external_id":"` + memberWaldur + `"}],"memberships":[{"party_id":"` + memberParty + `","role":"member"}]}}`,
	"submit-accounts": `{"provider_resource_id":"r1","observed_at":"2026-08-20T10:01:00Z","accounts":[{"party_id":"` + memberParty + `","account":"member-` + memberParty +
		`","uid":"uid-1","binding_id":"` + sweepUUID + `","generation":1,"state":"ready"}]}`,
	"append-command": string(startCommand(1, issuedAt)),
	"rebind-stream":  `{"installation_id":"` + sweepInstID + `","reason":"the route sweep"}`,
	"plan-capacity":  `{"project":"` + sweepUUID + `","environment":"` + sweepEnv + `","demand":{"cpu":1000,"memory":1073741824}}`,
}

// generate is the sweep's requests of op: each parameter bad in turn,
// then (for a route with a body) the raw bodies, other media types, and
// mutations of a generated instance of its schema, drawn with rng.
func generate(t *testing.T, s *sweepProcess, op *huma.Operation, rng *rand.Rand) []sweepRequest {
	key := keyFor(s, op)
	hasBody := op.RequestBody != nil
	ct := ""
	var good []byte
	var inst any
	if hasBody {
		ct = "application/json"
		inst = instance(s.api, bodySchema(s.api, op), 0)
		if seed, ok := seedBodies[op.OperationID]; ok {
			dbtest.Must(t, json.Unmarshal([]byte(seed), &inst))
		}
		good, _ = json.Marshal(inst)
	}
	var reqs []sweepRequest
	for _, p := range op.Parameters {
		if p.In != "path" && p.In != "query" {
			continue
		}
		for _, name := range slices.Sorted(stringKeys(badParams)) {
			reqs = append(reqs, sweepRequest{name: p.In + "." + p.Name + " " + name, method: op.Method, path: fill(op, map[string]string{p.Name: badParams[name]}),
				key: key, contentType: ct, body: good, badParam: true})
		}
		if p.Schema != nil && (p.Schema.Type == "integer" || p.Schema.Type == "boolean") {
			for _, v := range []string{"-1", "1.5", "abc", "99999999999999999999", "0x10"} {
				reqs = append(reqs, sweepRequest{name: p.In + "." + p.Name + "=" + v, method: op.Method, path: fill(op, map[string]string{p.Name: v}), key: key, contentType: ct, body: good})
			}
		}
	}
	path := fill(op, nil)
	reqs = append(reqs, sweepRequest{name: "good parameters", method: op.Method, path: path, key: key, contentType: ct, body: good})
	// A query that cannot be decoded is refused, never dropped; a path
	// the mux would clean is no route, never a redirect.
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	reqs = append(reqs,
		sweepRequest{name: "query %zz", method: op.Method, path: path + sep + "cursor=%zz", key: key, contentType: ct, body: good, want: http.StatusBadRequest},
		sweepRequest{name: "query ;", method: op.Method, path: path + sep + "a=1;b=2", key: key, contentType: ct, body: good, want: http.StatusBadRequest},
		sweepRequest{name: "path //", offRoute: true, method: op.Method, path: "/" + path, key: key, contentType: ct, body: good, want: http.StatusNotFound},
		sweepRequest{name: "path /x/../", offRoute: true, method: op.Method, path: "/x/.." + path, key: key, contentType: ct, body: good, want: http.StatusNotFound},
		sweepRequest{name: "path /./", offRoute: true, method: op.Method, path: "/." + path, key: key, contentType: ct, body: good, want: http.StatusNotFound},
	)
	if !hasBody {
		// A route that takes no body refuses one declared.
		reqs = append(reqs, sweepRequest{name: "a body on a route without one", method: op.Method, path: path, key: key, contentType: "application/json", body: []byte(`{}`), want: http.StatusBadRequest})
		return reqs
	}
	for _, c := range []string{"APPLICATION/JSON", "Application/Json; Charset=UTF-8", "application/vnd.metallo+json", "APPLICATION/PROBLEM+JSON; charset=utf-8"} {
		reqs = append(reqs, sweepRequest{name: "content type " + c, method: op.Method, path: path, key: key, contentType: c, body: good, jsonSpelling: true})
	}
	for i, b := range rawBodies {
		reqs = append(reqs, sweepRequest{name: fmt.Sprintf("raw body %d", i), method: op.Method, path: path, key: key, contentType: ct, body: []byte(b)})
	}
	for _, c := range []string{"", "text/plain", "application/json; charset=latin1", "application/cbor", "multipart/form-data; boundary=x", "application/jsonx", "TEXT/JSON"} {
		reqs = append(reqs, sweepRequest{name: "content type " + c, method: op.Method, path: path, key: key, contentType: c, body: good, want: http.StatusUnsupportedMediaType})
	}
	var at [][]any
	leaves(inst, nil, &at)
	const perRoute = 120
	for range perRoute {
		p := at[rng.IntN(len(at))]
		repl := replacements[rng.IntN(len(replacements))]
		if len(p) == 0 && repl == removeMember {
			continue
		}
		b, err := json.Marshal(mutate(inst, p, repl))
		if err != nil {
			continue
		}
		reqs = append(reqs, sweepRequest{name: fmt.Sprintf("body %v = %.40v", p, repl), method: op.Method, path: path, key: key, contentType: ct, body: b})
	}
	// An extra member and an oversized body.
	if m, ok := inst.(map[string]any); ok {
		extra := mutate(m, []any{"unknown_member"}, 1)
		b, _ := json.Marshal(extra)
		reqs = append(reqs, sweepRequest{name: "unknown member", method: op.Method, path: path, key: key, contentType: ct, body: b})
	}
	reqs = append(reqs, sweepRequest{name: "5 MiB body", method: op.Method, path: path, key: key, contentType: ct,
		body: []byte(`{"x":"` + strings.Repeat("x", 5<<20) + `"}`)})
	return reqs
}

func stringKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sweepAnswer is what one request got.
type sweepAnswer struct {
	status      int
	contentType string // the media type, without parameters
	took        time.Duration
	reason      string // a 4xx problem's
}

// mediaType is a Content-Type header's media type without parameters.
func mediaType(header string) string {
	mt, _, _ := strings.Cut(header, ";")
	return strings.TrimSpace(mt)
}

// send sends r and checks the answer's shape: a 2xx, or a 4xx problem
// whose detail, messages and echoed values are text without what a bad
// parameter carried.
func (s *sweepProcess) send(t *testing.T, r sweepRequest) sweepAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), sweepHangBound)
	defer cancel()
	var body io.Reader
	if r.body != nil {
		body = strings.NewReader(string(r.body))
	}
	req, err := http.NewRequestWithContext(ctx, r.method, s.base+r.path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.name, err)
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set(siteprotocol.InstallationHeader, sweepInstID)
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %.100s (%s): no answer within %s: %v", r.method, r.path, r.name, sweepHangBound, err)
		return sweepAnswer{status: -1}
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		t.Errorf("%s %.100s (%s): answer not read within %s: %v", r.method, r.path, r.name, sweepHangBound, err)
	}
	a := sweepAnswer{status: resp.StatusCode, contentType: mediaType(resp.Header.Get("Content-Type")), took: took}
	if r.want != 0 && resp.StatusCode != r.want {
		t.Errorf("%s %.100s (%s): %d %.300s, want %d", r.method, r.path, r.name, resp.StatusCode, raw, r.want)
	}
	if r.jsonSpelling && resp.StatusCode == http.StatusUnsupportedMediaType {
		t.Errorf("%s %.100s (%s): 415 for a JSON media type", r.method, r.path, r.name)
	}
	if resp.StatusCode >= 300 && (a.contentType != "application/problem+json" || resp.Header.Get("Location") != "") {
		t.Errorf("%s %.100s (%s): %d %q Location %q: every refusal is a problem, never a redirect", r.method, r.path, r.name, resp.StatusCode, a.contentType, resp.Header.Get("Location"))
	}
	if id := resp.Header.Get(httpserver.RequestIDHeader); id == "" {
		t.Errorf("%s %.100s (%s): no %s", r.method, r.path, r.name, httpserver.RequestIDHeader)
	}
	switch {
	case resp.StatusCode >= 500:
		t.Errorf("%s %.100s (%s): %d %.300s", r.method, r.path, r.name, resp.StatusCode, raw)
	case resp.StatusCode >= 400:
		var p struct {
			Detail string `json:"detail"`
			Reason string `json:"reason"`
			Errors []struct {
				Message string `json:"message"`
				Value   any    `json:"value"`
			} `json:"errors"`
		}
		if json.Unmarshal(raw, &p) != nil || p.Reason == "" {
			t.Errorf("%s %.100s (%s): %d is not a problem with a reason: %.300s", r.method, r.path, r.name, resp.StatusCode, raw)
			break
		}
		a.reason = p.Reason
		texts := []string{p.Detail}
		for _, e := range p.Errors {
			texts = append(texts, e.Message)
			if v, ok := e.Value.(string); ok {
				texts = append(texts, v)
			}
		}
		for _, x := range texts {
			if !httpserver.IsText(x) || strings.Contains(x, badParams["10 kB"]) {
				t.Errorf("%s %.100s (%s): the problem echoes what the caller sent: %.300q", r.method, r.path, r.name, x)
			}
		}
	case r.badParam:
		t.Errorf("%s %.100s (%s): %d, want a 4xx", r.method, r.path, r.name, resp.StatusCode)
	}
	return a
}

// truncatedBody sends op's request declaring 100 body bytes, sends 10 and
// closes its side of the connection: it returns the answer's status, media
// type and, for a problem, its reason.
func (s *sweepProcess) truncatedBody(t *testing.T, op *huma.Operation) (int, string, string) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Error(err)
		return -1, "", ""
	}
	defer conn.Close()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		op.Method, fill(op, nil), keyFor(s, op), siteprotocol.InstallationHeader, sweepInstID)
	_ = conn.SetDeadline(time.Now().Add(sweepHangBound))
	if _, err := io.WriteString(conn, head+`{"x":12345`); err != nil {
		t.Error(err)
		return -1, "", ""
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("%s %s with a truncated body: no answer: %v", op.Method, op.Path, err)
		return -1, "", ""
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var p struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(raw, &p)
	return resp.StatusCode, mediaType(resp.Header.Get("Content-Type")), p.Reason
}

// slowBody sends op's request declaring 999 body bytes and sending 7: the
// answer must come (not a 5xx) within the hang bound. It returns the
// answer's status and, for a 4xx problem, its reason.
func (s *sweepProcess) slowBody(t *testing.T, op *huma.Operation) (int, string) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Error(err)
		return -1, ""
	}
	defer conn.Close()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: 999\r\n\r\n",
		op.Method, fill(op, nil), keyFor(s, op), siteprotocol.InstallationHeader, sweepInstID)
	_ = conn.SetDeadline(time.Now().Add(sweepHangBound))
	if _, err := io.WriteString(conn, head+`{"x":1,`); err != nil {
		t.Error(err)
		return -1, ""
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("%s %s with a stalled body: no answer within %s: %v", op.Method, op.Path, sweepHangBound, err)
		return -1, ""
	}
	var p struct {
		Reason string `json:"reason"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	_ = json.Unmarshal(raw, &p)
	if resp.StatusCode >= 500 {
		t.Errorf("%s %s with a stalled body: %d", op.Method, op.Path, resp.StatusCode)
	}
	return resp.StatusCode, p.Reason
}

// reasonDocumented reports whether op's document lists reason for status
// in the response's x-reasons (httpserver.WithReasons). Every operation
// that needs a bearer credential lists its reasons, on both roles.
func reasonDocumented(op *huma.Operation, status int, reason string) bool {
	if len(op.Security) == 0 {
		return true
	}
	resp := op.Responses[fmt.Sprint(status)]
	if resp == nil {
		return false
	}
	listed, _ := resp.Extensions["x-reasons"].([]string)
	return slices.Contains(listed, reason)
}

// sweep runs every generated request on s in order (one seeded draw, so
// both engines get the same requests) and returns each one's status.
func sweep(t *testing.T, s *sweepProcess) map[string]int {
	rng := rand.New(rand.NewPCG(15, 2026))
	statuses := map[string]int{}
	kinds := map[string]int{} // "status media type" → answers
	before := s.digest(t)
	ops := routetest.Operations(s.api)
	if len(ops) < 15 {
		t.Fatalf("the served document has %d operations; both roles' are expected", len(ops))
	}
	n := 0
	for _, op := range ops {
		for _, r := range generate(t, s, op, rng) {
			a := s.send(t, r)
			n++
			kinds[fmt.Sprintf("%d %s", a.status, a.contentType)]++
			if a.status >= 400 && a.status < 500 && !r.offRoute && !reasonDocumented(op, a.status, a.reason) {
				t.Errorf("%s %s (%s): answered %d %s, which the route's documentation does not list", op.Method, op.Path, r.name, a.status, a.reason)
			}
			statuses[fmt.Sprintf("%s %s %s", op.Method, op.Path, r.name)] = a.status
			after := s.digest(t)
			if a.status >= 400 && after != before {
				t.Errorf("%s %.100s (%s): refused %d, but the stored state changed", r.method, r.path, r.name, a.status)
			}
			before = after
		}
	}
	// A body shorter than its Content-Length, the client's side then
	// closed: 400 on every route, nothing stored.
	for _, op := range ops {
		code, ct, reason := s.truncatedBody(t, op)
		kinds[fmt.Sprintf("%d %s", code, ct)]++
		n++
		if code != http.StatusBadRequest || ct != "application/problem+json" || reason != httpserver.DefaultReason(http.StatusBadRequest) {
			t.Errorf("%s %s with a truncated body: %d %s %s, want 400 invalid-request", op.Method, op.Path, code, ct, reason)
		}
		statuses[op.Method+" "+op.Path+" truncated body"] = code
	}
	if after := s.digest(t); after != before {
		t.Errorf("requests with truncated bodies changed the stored state")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, reason := s.slowBody(t, op)
			if code >= 400 && code < 500 && !reasonDocumented(op, code, reason) {
				t.Errorf("%s %s (stalled body): answered %d %s, which the route's documentation does not list", op.Method, op.Path, code, reason)
			}
			mu.Lock()
			statuses[op.Method+" "+op.Path+" stalled body"] = code
			mu.Unlock()
		}()
	}
	wg.Wait()
	if after := s.digest(t); after != before {
		t.Errorf("requests with stalled bodies changed the stored state")
	}
	byStatus := map[int]int{}
	for _, c := range statuses {
		byStatus[c]++
	}
	t.Logf("%d generated requests and %d stalled bodies on %d operations; answers by status: %v", n, len(ops), len(ops), byStatus)
	t.Logf("answers by status and media type (stalled bodies left out): %v", kinds)
	return statuses
}

func TestRouteSweepOnBothEnginesNo5xxNoHangNothingStoredByARefusal(t *testing.T) {
	results := map[string]map[string]int{}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			results[engine] = sweep(t, startSweepProcess(t, engine))
		})
	}
	sq, pg := results["sqlite"], results["postgres"]
	if sq == nil || pg == nil {
		t.Fatal("an engine's sweep did not finish")
	}
	var differ []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range sq {
			if !yield(k) {
				return
			}
		}
	}) {
		if sq[k] != pg[k] {
			differ = append(differ, fmt.Sprintf("%.120s: sqlite %d, postgres %d", k, sq[k], pg[k]))
		}
	}
	if len(differ) > 0 {
		t.Errorf("%d requests were answered differently by the two engines:\n%s", len(differ), strings.Join(differ, "\n"))
	}
}
