package app

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

// provisioningRoleWith returns the provisioning role configured by args.
func provisioningRoleWith(t *testing.T, args ...string) Role {
	t.Helper()
	r := ProvisioningRole()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	r.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return r
}

// provisioningKeys writes a keys file admitting principals and returns its path and
// each principal's key.
func provisioningKeys(t *testing.T, principals ...string) (string, map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.yaml")
	keys := map[string]string{}
	for _, s := range principals {
		p, err := auth.ParsePrincipal(s)
		if err != nil {
			t.Fatal(err)
		}
		key, entry, err := auth.NewKey(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := appendKey(path, entry); err != nil {
			t.Fatal(err)
		}
		keys[s] = key
	}
	return path, keys
}

// provisioningEnvironments writes an environments.yaml with alpha-k8s at
// Site alpha (its Runtime key is never used here) and returns its path.
func provisioningEnvironments(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "environments.yaml")
	body := "environments:\n  - id: alpha-k8s\n    site: alpha\n    authority: https://metallo.example.org\n    auth: {key_sha256: " + auth.HashKey("unused") + "}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func provisioningSQLiteArgs(t *testing.T) []string {
	return []string{"--provisioning-database-url", "sqlite:" + filepath.Join(t.TempDir(), "provisioning.sqlite"), "--waldur-instance", "https://waldur.example.org"}
}

// TestProvisioningOpenAPIDocumentIsCommitted proves openapi/provisioning.yaml
// is what `metallo openapi --role provisioning` prints (regenerate with
// `make generate-openapi`). It never writes the file.
func TestProvisioningOpenAPIDocumentIsCommitted(t *testing.T) {
	want, err := OpenAPIYAML([]Role{ProvisioningRole()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../openapi/provisioning.yaml")
	if err != nil {
		t.Fatalf("read the committed document: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("openapi/provisioning.yaml differs from `metallo openapi --role provisioning`; run `make generate-openapi` and commit it")
	}
	for _, op := range []string{"/resource-provisioning/{site}/reports", "/resource-provisioning/events/beto", "/resource-provisioning/allocations", "/resource-provisioning/projects/{project}/allocations", "/resource-provisioning/changes",
		"/resource-provisioning/{site}/accounts", "/resource-provisioning/{site}/account-lookup", "/resource-provisioning/environments/{environment}/bindings",
		"/resource-provisioning/projects/{project}/accounts", "/resource-provisioning/allocations/{allocation}/accounts"} {
		if !strings.Contains(string(want), op+":") {
			t.Errorf("the document lacks %s", op)
		}
	}
}

func TestProvisioningRoleGraphIsValid(t *testing.T) {
	keys, _ := provisioningKeys(t, "site:alpha")
	r := provisioningRoleWith(t, provisioningSQLiteArgs(t)...)
	if err := fx.ValidateApp(Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: keys, EnvironmentsFile: provisioningEnvironments(t), Migrate: true}, zap.NewNop())); err != nil {
		t.Fatal(err)
	}
}

// TestProvisioningRoleStartsServesAndStops starts the role under fxtest on a
// SQLite file: readiness pings the database, /docs is served, a Site's
// report is accepted, the service is provided for in-process owners, and
// the app stops cleanly.
func TestProvisioningRoleStartsServesAndStops(t *testing.T) {
	keysFile, keys := provisioningKeys(t, "site:alpha", "service:execution")
	r := provisioningRoleWith(t, provisioningSQLiteArgs(t)...)
	var (
		srv *httpserver.Server
		svc *application.Service
	)
	app := fxtest.New(t, Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: keysFile, EnvironmentsFile: provisioningEnvironments(t), Migrate: true}, zaptest.NewLogger(t)), fx.Populate(&srv, &svc))
	app.RequireStart()
	base := "http://" + srv.Addr()
	for _, path := range []string{"/readyz", "/docs", "/openapi.json"} {
		if code, body := provisioningCall(t, http.MethodGet, base+path, "", ""); code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	report := `{"reports":[{"provider_resource_id":"r1","offering_id":"o","provider_project_id":"pp","state":"OK","paused":false,
	  "limits":{"cpu":1000},"applied_limits":{"cpu":1000},"observed_at":"2026-08-20T10:00:00Z"}]}`
	if code, body := provisioningCall(t, http.MethodPost, base+"/resource-provisioning/alpha/reports", keys["site:alpha"], report); code != http.StatusOK || !strings.Contains(body, `"outcome":"created"`) {
		t.Fatalf("report: %d %s", code, body)
	}
	if code, body := provisioningCall(t, http.MethodGet, base+"/resource-provisioning/allocations", keys["service:execution"], ""); code != http.StatusOK || !strings.Contains(body, `"provider_resource_id":"r1"`) {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	if svc == nil {
		t.Fatal("the application service is not provided for in-process owners")
	}
	app.RequireStop()
}

func TestProvisioningRoleWithoutMigrateRefusesPendingMigrations(t *testing.T) {
	keysFile, _ := provisioningKeys(t, "site:alpha")
	r := provisioningRoleWith(t, provisioningSQLiteArgs(t)...)
	app := fx.New(Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: keysFile, EnvironmentsFile: provisioningEnvironments(t)}, zap.NewNop()))
	err := app.Start(t.Context())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("started on an unmigrated database")
	}
	if !strings.Contains(err.Error(), "pending migrations") || !strings.Contains(err.Error(), "--migrate") {
		t.Fatalf("error does not say what to do: %v", err)
	}
}

func TestProvisioningRoleNeedsAWaldurInstance(t *testing.T) {
	for _, args := range [][]string{{}, {"--waldur-instance", "waldur.example.org"}} {
		r := provisioningRoleWith(t, args...)
		err := r.Preflight(zap.NewNop())
		if !errors.Is(err, config.ErrInvalidFlag) || !strings.Contains(err.Error(), "--waldur-instance") {
			t.Fatalf("%v: %v", args, err)
		}
	}
}

func TestProvisioningPreflightSaysItUsesTheEmbeddedDefault(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	r := provisioningRoleWith(t, "--waldur-instance", "https://waldur.example.org")
	if err := r.Preflight(zap.New(core)); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].Message, "embedded default SQLite ./var/provisioning.sqlite") {
		t.Fatalf("preflight logs %+v", logs.All())
	}
	bad := provisioningRoleWith(t, "--provisioning-database-url", "mysql://x", "--waldur-instance", "https://w.example")
	if err := bad.Preflight(zap.NewNop()); !errors.Is(err, config.ErrInvalidFlag) || !strings.Contains(err.Error(), "--provisioning-database-url") {
		t.Fatalf("bad URL: %v", err)
	}
}

func provisioningCall(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// countingAPI is a sink for waldur-report's posts that answers 200 and
// counts them. Its tests assert that refused records never reach any API,
// so it needs none of the provisioning API's behaviour.
func countingAPI(t *testing.T) (*httptest.Server, *int) {
	t.Helper()
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, &posts
}

// TestWaldurReportChecksRecordsBeforePosting: a record without its
// identifiers or state, or an --observed-at finer than a microsecond, fails
// the command naming the fields or the flag, and nothing reaches the API.
func TestWaldurReportChecksRecordsBeforePosting(t *testing.T) {
	srv, posts := countingAPI(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "site.key")
	if err := os.WriteFile(keyFile, []byte("mtl_k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `{"uuid":"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{"cpu":1}}`
	for _, c := range []struct {
		name, records, observed, want string
	}{
		{"an empty record", `[` + good + `,{}]`, "2026-08-20T10:00:00Z", "record 2 of 2: resource  (): missing uuid, offering_uuid, project_uuid, state"},
		{"no project or state", `{"uuid":"u","name":"x","offering_uuid":"o"}`, "2026-08-20T10:00:00Z", "missing project_uuid, state"},
		{"an unknown state", strings.Replace(good, `"OK"`, `"Running"`, 1), "2026-08-20T10:00:00Z", `report.state: unknown Waldur state "Running"`},
		{"nanoseconds", good, "2026-08-20T10:00:00.0000001Z", "--observed-at"},
	} {
		file := filepath.Join(dir, "records.json")
		if err := os.WriteFile(file, []byte(c.records), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code := Main(t.Context(), []string{"provisioning", "waldur-report", "--site", "alpha", "--resource", file, "--observed-at", c.observed,
			"--post", srv.URL, "--key-file", keyFile}, Env{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }})
		if code == 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: exit %d, want an error containing %q: %s", c.name, code, c.want, out.String())
		}
	}
	if *posts != 0 {
		t.Fatalf("%d posts reached the API", *posts)
	}
	// A microsecond observation time is taken, and the body carries it.
	file := filepath.Join(dir, "records.json")
	if err := os.WriteFile(file, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := Main(t.Context(), []string{"provisioning", "waldur-report", "--site", "alpha", "--resource", file, "--observed-at", "2026-08-20T10:00:00.000001+02:00"},
		Env{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }})
	if code != 0 || !strings.Contains(out.String(), `"observed_at": "2026-08-20T08:00:00.000001Z"`) {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}

// TestWaldurReportNamesTheFlagOrEveryRecordAtFault: a bad --gpu-vendor or a
// --post URL that is not http(s) is refused naming the flag; --key-file
// without --post is refused (it would be ignored); several records that
// cannot be reported are all named; a quota that does not fit is refused
// naming the record and field. Nothing reaches the API.
func TestWaldurReportNamesTheFlagOrEveryRecordAtFault(t *testing.T) {
	srv, posts := countingAPI(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "site.key")
	if err := os.WriteFile(keyFile, []byte("mtl_k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `{"uuid":"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{"cpu":1}}`
	for _, c := range []struct {
		name, records string
		args          []string
		want          []string
	}{
		{"a bad GPU vendor", good, []string{"--gpu-vendor", "NV IDIA", "--post", srv.URL, "--key-file", keyFile}, []string{"--gpu-vendor"}},
		{"an ftp URL", good, []string{"--post", "ftp://x", "--key-file", keyFile}, []string{"--post", "http or https"}},
		{"a key file without --post", good, []string{"--key-file", keyFile}, []string{"--key-file", "--post"}},
		{"three incomplete records", `[{"name":"a"},` + good + `,{"name":"b"},{"name":"c"}]`, []string{"--post", srv.URL, "--key-file", keyFile},
			[]string{"3 of 4 records", "record 1 of 4: resource  (a)", "record 3 of 4: resource  (b)", "record 4 of 4: resource  (c)"}},
		{"a quota beyond int64", strings.Replace(good, `"limits"`, `"backend_metadata":{"quota":{"cpu":"1e18"}},"limits"`, 1), []string{"--post", srv.URL, "--key-file", keyFile},
			[]string{`resource 3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50 (n): backend_metadata.quota: "cpu"`}},
		{"a limit that is not a number", strings.Replace(good, `"cpu":1`, `"ram":"lots"`, 1), []string{"--post", srv.URL, "--key-file", keyFile},
			[]string{`resource 3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50 (n): limit "ram"`}},
	} {
		file := filepath.Join(dir, "records.json")
		if err := os.WriteFile(file, []byte(c.records), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code := Main(t.Context(), append([]string{"provisioning", "waldur-report", "--site", "alpha", "--resource", file}, c.args...),
			Env{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }})
		if code == 0 {
			t.Errorf("%s: exit 0: %s", c.name, out.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: want an error containing %q: %s", c.name, w, out.String())
			}
		}
	}
	if *posts != 0 {
		t.Fatalf("%d posts reached the API", *posts)
	}
}

// TestProvisioningRoleRefusesAWaldurInstanceThatIsNotAnHTTPURL: refused at
// start, naming the flag.
func TestProvisioningRoleRefusesAWaldurInstanceThatIsNotAnHTTPURL(t *testing.T) {
	for _, bad := range []string{"ftp://waldur.example.org", "https://", "//waldur.example.org", "https://u:p@waldur.example.org"} {
		r := provisioningRoleWith(t, append(provisioningSQLiteArgs(t), "--waldur-instance", bad)...)
		err := r.Preflight(zap.NewNop())
		if !errors.Is(err, config.ErrInvalidFlag) || !strings.Contains(err.Error(), "--waldur-instance") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestWaldurReportVerifiesTheAPIAgainstItsCAFile: with
// --provisioning-ca-file the
// report is posted to a provisioning API whose certificate that bundle
// issued; without it the system roots refuse the certificate and nothing
// is posted; the flag without --post, or one that holds no certificate,
// is refused naming the flag. The API is an HTTPS sink (countingAPI's
// shape over TLS): the test is about the client's trust, not the API.
func TestWaldurReportVerifiesTheAPIAgainstItsCAFile(t *testing.T) {
	posts := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results":[]}`))
	}))
	t.Cleanup(srv.Close)
	ca := certauthority.ServerCAFile(t, srv)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "site.key")
	file := filepath.Join(dir, "records.json")
	notPEM := filepath.Join(dir, "ca.txt")
	for path, body := range map[string]string{keyFile: "mtl_k\n", notPEM: "not a certificate\n",
		file: `{"uuid":"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50","name":"n","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{"cpu":1}}`} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := Main(t.Context(), append([]string{"provisioning", "waldur-report", "--site", "alpha", "--resource", file}, args...),
			Env{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }})
		return code, out.String()
	}
	if code, out := run("--post", srv.URL, "--key-file", keyFile); code == 0 || posts != 0 || !strings.Contains(out, "certificate") {
		t.Fatalf("without the CA file: exit %d, %d posts: %s", code, posts, out)
	}
	for name, args := range map[string][]string{
		"the flag without --post":        {"--provisioning-ca-file", ca},
		"a bundle without a certificate": {"--post", srv.URL, "--key-file", keyFile, "--provisioning-ca-file", notPEM},
	} {
		if code, out := run(args...); code == 0 || !strings.Contains(out, "--provisioning-ca-file") {
			t.Errorf("%s: exit %d: %s", name, code, out)
		}
	}
	if posts != 0 {
		t.Fatalf("%d posts reached the API before the good run", posts)
	}
	if code, out := run("--post", srv.URL, "--key-file", keyFile, "--provisioning-ca-file", ca); code != 0 || posts != 1 {
		t.Fatalf("with the CA file: exit %d, %d posts: %s", code, posts, out)
	}
}
