package executionports_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/storetest"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// send is Call with an explicit Content-Type ("" sends none) and headers.
func (s *server) send(t *testing.T, method, path, key, installation, contentType string, body []byte) (reply, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, bytes.NewReader(body))
	must(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if installation != "" {
		req.Header.Set(siteprotocol.InstallationHeader, installation)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return reply{Status: resp.StatusCode, Body: b}, resp.Header
}

func (s *server) rebind(t *testing.T, env, body string) reply {
	return s.call(t, http.MethodPost, "/execution/v1/streams/"+env+"/rebind", s.serviceKey, "", []byte(body))
}

func (s *server) state(t *testing.T, env, key, installation string) siteprotocol.StreamState {
	r := s.call(t, http.MethodGet, "/site/v1/streams/"+env, key, installation, nil)
	wantStatus(t, r, http.StatusOK, "")
	return decode[siteprotocol.StreamState](t, r)
}

func TestAPullAnswerStaysWithinTheByteBudgetAsServed(t *testing.T) {
	s := startServer(t, options{})
	// Nine commands of exactly 1 MiB canonical form: eight of them fill
	// MaxPullBytes in canonical bytes, but served with sequence and digest
	// they exceed it, so an answer holds seven.
	for i := 1; i <= 9; i++ {
		c := storetest.Padded(t, 60, i, siteprotocol.MaxCommandBytes)
		wantStatus(t, s.appendCommand(t, "alpha-k8s", c.Canonical), http.StatusCreated, "")
	}
	var after int64
	var answers []int
	for after < 9 {
		page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, int(after), 100, 0))
		total := 0
		for _, raw := range page.Commands {
			c, err := siteprotocol.ParsePulled(raw)
			must(t, err)
			if c.Sequence != after+1 {
				t.Fatalf("pulled sequence %d after %d", c.Sequence, after)
			}
			after = c.Sequence
			total += len(raw)
		}
		if len(page.Commands) == 0 || total > siteprotocol.MaxPullBytes {
			t.Fatalf("a pull answered %d commands of %d bytes (budget %d)", len(page.Commands), total, siteprotocol.MaxPullBytes)
		}
		answers = append(answers, len(page.Commands))
	}
	if fmt.Sprint(answers) != "[7 2]" {
		t.Fatalf("commands per answer %v, want [7 2]", answers)
	}
}

func TestAReadOnlyPullNeverBindsButIsStillFenced(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	readOnly := func(installation string) reply {
		return s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0&wait=0&bind=false", s.alphaKey, installation, nil)
	}
	r := readOnly(installB)
	wantStatus(t, r, http.StatusOK, "")
	if page := decode[siteprotocol.Pull](t, r); len(page.Commands) != 1 || page.HeadSequence != 1 {
		t.Fatalf("read-only pull: %s", r)
	}
	if st := s.state(t, "alpha-k8s", s.alphaKey, installA); st.InstallationID != "" {
		t.Fatalf("a read-only pull bound the stream to %q", st.InstallationID)
	}
	// The default binds.
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusOK, "")
	if st := s.state(t, "alpha-k8s", s.alphaKey, installA); st.InstallationID != installA {
		t.Fatalf("a pull without bind left the stream bound to %q", st.InstallationID)
	}
	wantStatus(t, readOnly(installB), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	wantStatus(t, readOnly(installA), http.StatusOK, "")
	wantStatus(t, s.call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?bind=maybe", s.alphaKey, installA, nil), http.StatusUnprocessableEntity, "")
}

func TestARebindNamesExactlyOneOfAnInstallationAndUnbind(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusOK, "")
	for name, body := range map[string]string{
		"both":             `{"installation_id":"` + installB + `","unbind":true,"reason":"x"}`,
		"neither":          `{"reason":"x"}`,
		"an empty ID":      `{"installation_id":"","reason":"x"}`,
		"unbind false":     `{"unbind":false,"reason":"x"}`,
		"a malformed ID":   `{"installation_id":"not an id!","reason":"x"}`,
		"no reason":        `{"installation_id":"` + installB + `"}`,
		"an unknown field": `{"installation_id":"` + installB + `","reason":"x","force":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, s.rebind(t, "alpha-k8s", body), http.StatusUnprocessableEntity, "validation-failed")
		})
	}
	if st := s.state(t, "alpha-k8s", s.alphaKey, installA); st.InstallationID != installA {
		t.Fatalf("a refused rebind changed the binding to %q", st.InstallationID)
	}
	wantStatus(t, s.rebind(t, "alpha-k8s", `{"unbind":true,"reason":"Runtime uninstalled"}`), http.StatusOK, "")
	if st := s.state(t, "alpha-k8s", s.alphaKey, installB); st.InstallationID != "" {
		t.Fatalf("unbind left the stream bound to %q", st.InstallationID)
	}
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installB, 0, 10, 0), http.StatusOK, "")
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusConflict, siteprotocol.ProblemInstallationMismatch)
	wantStatus(t, s.rebind(t, "alpha-k8s", `{"installation_id":"`+installA+`","reason":"back"}`), http.StatusOK, "")
	wantStatus(t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0), http.StatusOK, "")
}

func TestEveryBodyIsStrictJSON(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0))
	result := string(resultFor(t, page.Commands[0], "done"))
	cmd := string(observe(2, issued))
	plan := `{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":1000}}`
	rebind := `{"installation_id":"` + installB + `","reason":"moved"}`

	// breaks returns body with each strictness rule broken once.
	breaks := func(body, member, value string) map[string]string {
		return map[string]string{
			"invalid UTF-8":    strings.Replace(body, `"`+member+`":"`+value+`"`, "\""+member+"\":\""+value+"\xff\"", 1),
			"a lone surrogate": strings.Replace(body, `"`+member+`":"`+value+`"`, `"`+member+`":"`+value+`\ud800"`, 1),
			"NUL":              strings.Replace(body, `"`+member+`":"`+value+`"`, `"`+member+`":"`+value+`\u0000"`, 1),
			"null":             strings.Replace(body, `"`+member+`":"`+value+`"`, `"`+member+`":null`, 1),
			"a duplicate":      strings.Replace(body, `"`+member+`":"`+value+`"`, `"`+member+`":"`+value+`","`+member+`":"`+value+`"`, 1),
			"two values":       body + ` {}`,
		}
	}
	routes := []struct {
		name, method, path, key, installation, reason string
		bodies                                        map[string]string
	}{
		{"append", http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.serviceKey, "", siteprotocol.ProblemInvalidCommand, breaks(cmd, "family", "batch")},
		{"acknowledge", http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", s.alphaKey, installA, siteprotocol.ProblemInvalidResult, breaks(result, "message", "done")},
		{"rebind", http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, "", "invalid-request", breaks(rebind, "reason", "moved")},
		{"plans", http.MethodPost, "/execution/v1/plans", s.serviceKey, "", "invalid-request", breaks(plan, "environment", "alpha-k8s")},
	}
	for _, route := range routes {
		for rule, body := range route.bodies {
			t.Run(route.name+"/"+rule, func(t *testing.T) {
				if body == route.bodies["null"] && !strings.Contains(body, "null") {
					t.Fatalf("the test did not break the body: %s", body)
				}
				r := s.call(t, route.method, route.path, route.key, route.installation, []byte(body))
				// One rule for both central roles (docs/architecture.md#one-answer-per-fault):
				// bytes that are not one I-JSON text are 400; a null or a
				// NUL in a well-formed text is 422 naming the member.
				switch {
				case rule != "null" && rule != "NUL":
					wantStatus(t, r, http.StatusBadRequest, route.reason)
				case route.reason == "invalid-request":
					wantStatus(t, r, http.StatusUnprocessableEntity, "validation-failed")
				default:
					wantStatus(t, r, http.StatusUnprocessableEntity, route.reason)
				}
			})
		}
	}
	// Nothing changed.
	if st := s.state(t, "alpha-k8s", s.alphaKey, installA); st.HeadSequence != 1 || st.AcknowledgedSequence != 0 || st.InstallationID != installA {
		t.Fatalf("refused bodies changed the stream: %+v", st)
	}
	// The server assigns sequences: any sequence member is refused.
	for _, seq := range []string{"0", "1", "2"} {
		withSeq := strings.Replace(cmd, `{`, `{"sequence":`+seq+`,`, 1)
		r := s.appendCommand(t, "alpha-k8s", []byte(withSeq))
		wantStatus(t, r, http.StatusUnprocessableEntity, siteprotocol.ProblemInvalidCommand)
		if !strings.Contains(string(r.Body), `"location":"body.sequence"`) {
			t.Fatalf("sequence %s: the problem does not name body.sequence: %s", seq, r)
		}
	}
}

// TestBodiesMustBeDeclaredJSON: every route with a body takes JSON
// declared as application/json or a +json type, in any case, UTF-8
// (docs/architecture.md#one-answer-per-fault); anything else is 415.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	s := startServer(t, options{})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0))
	routes := []struct {
		name, method, path, key, installation, body string
		ok                                          int
	}{
		{"append", http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.serviceKey, "", string(observe(2, issued)), http.StatusCreated},
		{"acknowledge", http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", s.alphaKey, installA, string(resultFor(t, page.Commands[0], "done")), http.StatusOK},
		{"rebind", http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, "", `{"installation_id":"` + installA + `","reason":"same"}`, http.StatusOK},
		{"plans", http.MethodPost, "/execution/v1/plans", s.serviceKey, "", `{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":1000}}`, http.StatusOK},
	}
	for _, route := range routes {
		t.Run(route.name, func(t *testing.T) {
			for _, ct := range []string{"", "text/plain", "application/cbor", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/jsonx"} {
				r, _ := s.send(t, route.method, route.path, route.key, route.installation, ct, []byte(route.body))
				if r.Status != http.StatusUnsupportedMediaType || r.Reason() != "unsupported-media-type" {
					t.Fatalf("Content-Type %q: got %s, want 415 unsupported-media-type", ct, r)
				}
			}
			// One media-type rule on both central roles: JSON in any case,
			// application/json or a +json type, UTF-8. The first is the
			// route's answer; the rest repeat it (an idempotent retry).
			for i, ct := range []string{"application/json; charset=UTF-8", "APPLICATION/JSON", "Application/Json; Charset=\"utf-8\"", "application/vnd.metallo+json", "APPLICATION/VND.METALLO+JSON; charset=UTF-8"} {
				r, _ := s.send(t, route.method, route.path, route.key, route.installation, ct, []byte(route.body))
				if (i == 0 && r.Status != route.ok) || r.Status/100 != 2 {
					t.Fatalf("Content-Type %q: got %s, want %d", ct, r, route.ok)
				}
			}
		})
	}
}

func TestAWrongPrincipalIs403BeforeTheBodyIsValidated(t *testing.T) {
	s := startServer(t, options{})
	bad := []byte(`{"not":"valid",`)
	for name, tc := range map[string]struct {
		method, path, key, installation string
	}{
		"an environment key on plans":          {http.MethodPost, "/execution/v1/plans", s.alphaKey, ""},
		"an environment key on append":         {http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.alphaKey, ""},
		"an environment key on rebind":         {http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.alphaKey, ""},
		"an unconfigured service key on plans": {http.MethodPost, "/execution/v1/plans", s.betoKey, ""},
		"A's key on B's result":                {http.MethodPut, "/site/v1/streams/beta-k8s/commands/1/result", s.alphaKey, installA},
		"A's key on B's result, no header":     {http.MethodPut, "/site/v1/streams/beta-k8s/commands/0/result", s.alphaKey, ""},
		"a service key on a Site route":        {http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", s.serviceKey, installA},
		"A's key on B's pull, bad query":       {http.MethodGet, "/site/v1/streams/beta-k8s/commands?limit=1000&wait=99", s.alphaKey, installA},
		"A's key on an unknown environment":    {http.MethodGet, "/site/v1/streams/ghost/commands", s.alphaKey, installA},
	} {
		t.Run(name, func(t *testing.T) {
			var body []byte
			if tc.method != http.MethodGet {
				body = bad
			}
			r, _ := s.send(t, tc.method, tc.path, tc.key, tc.installation, "text/plain", body)
			wantStatus(t, r, http.StatusForbidden, siteprotocol.ProblemForbidden)
		})
	}
}

func TestAnUnknownEnvironmentIs404OnEveryStreamRoute(t *testing.T) {
	s := startServer(t, options{})
	bad := []byte(`{"not":"valid",`)
	// No key names an environment that environments.yaml does not list (keys.yaml holds no
	// environment key), so the Site routes answer another environment's key 403 (above); the
	// service routes name the unknown environment.
	for name, tc := range map[string]struct {
		method, path, key, installation string
		body                            []byte
	}{
		"append":      {http.MethodPost, "/execution/v1/streams/ghost/commands", s.serviceKey, "", bad},
		"get command": {http.MethodGet, "/execution/v1/streams/ghost/commands/" + uuid(1), s.serviceKey, "", nil},
		"rebind":      {http.MethodPost, "/execution/v1/streams/ghost/rebind", s.serviceKey, "", bad},
	} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, s.call(t, tc.method, tc.path, tc.key, tc.installation, tc.body), http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment)
		})
	}
}

func TestPlanValidationErrorsNameTheBodyField(t *testing.T) {
	s := startServer(t, options{})
	for name, tc := range map[string]struct {
		body      string
		locations []string
	}{
		"project":         {`{"project":"Project Alpha","environment":"alpha-k8s","demand":{"cpu":1}}`, []string{"body.project"}},
		"no environment":  {`{"project":"` + uuid(7) + `","demand":{"cpu":1}}`, []string{"body.environment"}},
		"demand type":     {`{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":"2"}}`, []string{"body.demand.cpu"}},
		"negative demand": {`{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":-1,"memory":-2}}`, []string{"body.demand.cpu", "body.demand.memory"}},
		// A key holding '.' leaves the next keys' locations exact.
		"dotted keys": {`{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"gpu.nvidia":"two","memory":"x","a.b":{},"storage":true}}`,
			[]string{"body.demand.a.b", "body.demand.gpu.nvidia", "body.demand.memory", "body.demand.storage"}},
		"unknown resource": {`{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"disk":1}}`, []string{"body.demand.disk"}},
		"unknown member":   {`{"project":"` + uuid(7) + `","environment":"alpha-k8s","demand":{"cpu":1},"colour":"blue"}`, []string{"body.colour"}},
		"unknown env":      {`{"project":"` + uuid(7) + `","environment":"ghost","demand":{"cpu":1}}`, []string{"body.environment"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := s.call(t, http.MethodPost, "/execution/v1/plans", s.serviceKey, "", []byte(tc.body))
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("got %s, want 422", r)
			}
			p := decode[struct {
				Errors []struct {
					Location string `json:"location"`
				} `json:"errors"`
			}](t, r)
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Location)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.locations) {
				t.Fatalf("locations %v, want %v: %s", got, tc.locations, r)
			}
		})
	}
}

func TestAnUnreachableDatabaseIs503OnEveryStreamRouteAndReadyz(t *testing.T) {
	url := dbtest.NewPostgres(t)
	s := startServer(t, options{databaseURL: url})
	wantStatus(t, s.appendCommand(t, "alpha-k8s", observe(1, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "alpha-k8s", s.alphaKey, installA, 0, 10, 0))
	result := resultFor(t, page.Commands[0], "done")
	ready, _ := s.send(t, http.MethodGet, "/readyz", "", "", "", nil)
	wantStatus(t, ready, http.StatusOK, "")

	cfg, err := pgx.ParseConfig(url)
	must(t, err)
	admin, err := pgx.Connect(context.Background(), dbtest.ServerURL())
	must(t, err)
	_, err = admin.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)")
	must(t, err)
	must(t, admin.Close(context.Background()))

	leaks := []string{cfg.Database, cfg.Host, cfg.User, "SQLSTATE", "postgres"}
	for name, tc := range map[string]struct {
		method, path, key, installation string
		body                            []byte
	}{
		"state":       {http.MethodGet, "/site/v1/streams/alpha-k8s", s.alphaKey, installA, nil},
		"pull":        {http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0&wait=0", s.alphaKey, installA, nil},
		"acknowledge": {http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", s.alphaKey, installA, result},
		"append":      {http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", s.serviceKey, "", observe(2, issued)},
		"get command": {http.MethodGet, "/execution/v1/streams/alpha-k8s/commands/" + uuid(1), s.serviceKey, "", nil},
		"rebind":      {http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", s.serviceKey, "", []byte(`{"installation_id":"` + installB + `","reason":"x"}`)},
	} {
		t.Run(name, func(t *testing.T) {
			ct := ""
			if tc.body != nil {
				ct = "application/json"
			}
			r, h := s.send(t, tc.method, tc.path, tc.key, tc.installation, ct, tc.body)
			wantStatus(t, r, http.StatusServiceUnavailable, "unavailable")
			if h.Get("Retry-After") == "" {
				t.Errorf("no Retry-After: %v", h)
			}
			for _, l := range leaks {
				if strings.Contains(string(r.Body), l) {
					t.Errorf("the problem leaks %q: %s", l, r)
				}
			}
		})
	}
	ready, _ = s.send(t, http.MethodGet, "/readyz", "", "", "", nil)
	if ready.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the database dropped: %s", ready)
	}
	for _, l := range leaks {
		if strings.Contains(string(ready.Body), l) {
			t.Errorf("/readyz leaks %q: %s", l, ready)
		}
	}
}
