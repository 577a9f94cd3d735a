package app

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// TestOneKindOfFaultGetsOneAnswerOnBothRolesAndBothEngines sends the same
// faults to every JSON body route of the provisioning and the execution
// role, composed in one process on SQLite and on PostgreSQL, and asserts the
// one rule of docs/architecture.md#one-answer-per-fault: bytes that are not
// one I-JSON text are 400; a well-formed text of the wrong content (a null,
// a NUL, a number beyond 64 bits or 10^30, a fraction in an integer field,
// a value of the wrong type, not an object) is 422 naming the member; and a
// refused request stores nothing.
func TestOneKindOfFaultGetsOneAnswerOnBothRolesAndBothEngines(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			provisioningDB, executionDB := "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "sqlite:"+filepath.Join(dir, "execution.sqlite")
			if engine == "postgres" {
				provisioningDB, executionDB = dbtest.NewPostgres(t), dbtest.NewPostgres(t)
			}
			faultsOnEveryBody(t, dir, provisioningDB, executionDB)
		})
	}
}

func faultsOnEveryBody(t *testing.T, dir, provisioningDB, executionDB string) {
	const installation = "6a0f3c1e-0000-4000-8000-0000000000f1"
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", provisioningDB, "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", executionDB, "--resource-owner", "in-process"),
	}
	var srv *httpserver.Server
	app := fxtest.New(t,
		Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)),
		fx.Decorate(func(clock.Clock) clock.Clock { return clock.NewManual(time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)) }),
		fx.Populate(&srv),
	)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	c := executiontest.Client{Base: "http://" + srv.Addr()}
	site, beto, exe, runtime := files.ExtraKeys["site:alpha"], files.ExtraKeys["service:beto"], files.ServiceKey, files.EnvironmentKeys["alpha-k8s"]

	// One command appended and pulled, so a result has a command to answer.
	const command = `{"id":"3f9a6c1e-2b7d-4e5f-9a10-6c2d8e4b7f01","issued_at":"2026-11-29T10:00:00.000Z","member_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80",` +
		`"operation":"bind-member","payload":{"account":"member-9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","binding_id":"5d1e7f20-8a3b-4c6d-9e0f-1a2b3c4d5e6f",` +
		`"generation":@,"namespace":"project-0a1b2c3d","party_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","revision":1},"project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"}`
	executiontest.Want(t, c.Call(t, http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", exe, "", []byte(strings.Replace(command, "@", "1", 1))), http.StatusCreated, "")
	pulled := executiontest.Decode[siteprotocol.Pull](t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands", runtime, installation, nil))
	cmd, err := siteprotocol.ParsePulled(pulled.Commands[0])
	dbtest.Must(t, err)
	_, result, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, "bound", nil, nil)
	dbtest.Must(t, err)
	if !strings.Contains(string(result), `"sequence":1`) {
		t.Fatalf("the result has no sequence member: %s", result)
	}

	// Each route's valid body with "@" where an integer (for rebind: a
	// boolean) goes; each fault replaces "@" or transforms the whole text.
	routes := []struct {
		name, method, path, key, installation, body, reason400, reason422 string
	}{
		{"reports", http.MethodPost, "/resource-provisioning/alpha/reports", site, "",
			`{"reports":[{"provider_resource_id":"r1","offering_id":"o","provider_project_id":"pp","state":"OK","paused":false,"limits":{"cpu":@},"observed_at":"2026-08-20T10:00:00Z"}]}`,
			"malformed", "validation-failed"},
		{"beto event", http.MethodPost, "/resource-provisioning/events/beto", beto, "",
			`{"event_id":"e1","type":"project.ProjectChanged","occurred_at":"2026-08-20T10:00:00Z","project":{"id":"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d","revision":@,"state":"active","provider_bindings":[]}}`,
			"malformed", "validation-failed"},
		{"accounts", http.MethodPost, "/resource-provisioning/alpha/accounts", site, "",
			`{"provider_resource_id":"r1","observed_at":"2026-08-20T10:00:00Z","accounts":[{"party_id":"9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","account":"member-9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d","uid":"u1","binding_id":"edf0dbce-a8c3-5a1d-8d34-0e0ff66583ab","generation":@,"state":"ready"}]}`,
			"malformed", "validation-failed"},
		{"append", http.MethodPost, "/execution/v1/streams/alpha-k8s/commands", exe, "", strings.Replace(command, "3f9a6c1e", "4f9a6c1e", 1),
			siteprotocol.ProblemInvalidCommand, siteprotocol.ProblemInvalidCommand},
		{"result", http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", runtime, installation, strings.Replace(string(result), `"sequence":1`, `"sequence":@`, 1),
			siteprotocol.ProblemInvalidResult, siteprotocol.ProblemInvalidResult},
		{"rebind", http.MethodPost, "/execution/v1/streams/alpha-k8s/rebind", exe, "", `{"unbind":@,"reason":"moved"}`,
			"invalid-request", "validation-failed"},
		{"plans", http.MethodPost, "/execution/v1/plans", exe, "", `{"project":"7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d","environment":"alpha-k8s","demand":{"cpu":@}}`,
			"invalid-request", "validation-failed"},
	}
	at := func(v string) func(string) string {
		return func(b string) string { return strings.Replace(b, "@", v, 1) }
	}
	faults := []struct {
		name   string
		status int
		make   func(body string) string
	}{
		{"not JSON", 400, func(b string) string { return at("1")(b)[:len(b)-1] }},
		{"invalid UTF-8", 400, at("\"\xff\"")},
		{"an escaped lone surrogate", 400, at(`"\ud800"`)},
		{"a member named twice", 400, func(b string) string { return `{"twice":1,"twice":2,` + at("1")(b)[1:] }},
		{"data after the value", 400, func(b string) string { return at("1")(b) + ` {}` }},
		{"null", 422, at("null")},
		{"a NUL in a string", 422, at(`"a\u0000b"`)},
		{"a number beyond 64 bits", 422, at("18446744073709551616")},
		{"10^30", 422, at("1e30")},
		{"a fraction", 422, at("1.5")},
		{"a string where a number or boolean goes", 422, at(`"x"`)},
		{"not an object", 422, func(string) string { return `["x"]` }},
	}
	for _, f := range faults {
		for _, r := range routes {
			body := f.make(r.body)
			reason := r.reason400
			if f.status == 422 {
				reason = r.reason422
			}
			reply := c.Call(t, r.method, r.path, r.key, r.installation, []byte(body))
			if reply.Status != f.status || reply.Reason() != reason {
				t.Errorf("%s on %s: got %s, want %d %s", f.name, r.name, reply, f.status, reason)
			}
		}
	}

	// Nothing was stored: no allocation, no event, the stream as it was.
	snapshot := c.Call(t, http.MethodGet, "/resource-provisioning/allocations", exe, "", nil)
	if !strings.Contains(string(snapshot.Body), `"allocations":[]`) {
		t.Errorf("refused reports stored an allocation: %s", snapshot)
	}
	st := executiontest.Decode[siteprotocol.StreamState](t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", runtime, installation, nil))
	if st.HeadSequence != 1 || st.AcknowledgedSequence != 0 || st.InstallationID != installation {
		t.Errorf("refused bodies moved the stream: %+v", st)
	}
}
