package app

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// runtimeArgs returns a complete `serve --role runtime` command line whose
// files exist, with the journal directory dir.
func runtimeArgs(t *testing.T, dir string) []string {
	t.Helper()
	tmp := t.TempDir()
	key := filepath.Join(tmp, "key")
	policy := filepath.Join(tmp, "policy.yaml")
	grantsFile := filepath.Join(tmp, "grants.yaml")
	for f, content := range map[string]string{key: "x\n", policy: "[]\n", grantsFile: "[]\n"} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"serve", "--role", "runtime", "--admin-listen", "", "--journal-dir", dir,
		"--environment", "alpha-k8s", "--authority", "http://127.0.0.1:1", "--key-file", key,
		"--heartbeat-file", filepath.Join(tmp, "heartbeat"), "--permissions", "policy:" + policy,
		"--repository-grants", "file:" + grantsFile,
		"--batch-image", "registry.example/batch@sha256:" + strings.Repeat("a", 64),
		"--installation-record", "file:" + filepath.Join(tmp, "installation.json")}
}

func runMain(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	code := Main(t.Context(), args, Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	return code, stderr.String()
}

func with(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}

func without(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == flag {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func TestTheRuntimeRoleRefusesEveryDatabaseURL(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range []string{"--execution-database-url", "--provisioning-database-url"} {
		code, stderr := runMain(t, nil, with(runtimeArgs(t, dir), flag, "sqlite:"+filepath.Join(dir, "x.sqlite"))...)
		if code == 0 || !strings.Contains(stderr, flag) || !strings.Contains(stderr, "no platform database") {
			t.Fatalf("%s: exit %d, %s", flag, code, stderr)
		}
	}
	code, stderr := runMain(t, map[string]string{"METALLO_EXECUTION_DATABASE_URL": "postgres://localhost/x"}, runtimeArgs(t, dir)...)
	if code == 0 || !strings.Contains(stderr, "execution-database-url") {
		t.Fatalf("from the environment: exit %d, %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatal("a refused start created files")
	}
	if r := RuntimeRole(); r.Central || r.Migrate != nil || r.Context != "site_runtime" {
		t.Fatalf("runtime role %+v", r)
	}
}

func TestTheRuntimeRoleRunsAloneInItsProcess(t *testing.T) {
	code, stderr := runMain(t, nil, with(runtimeArgs(t, t.TempDir()), "--role", "runtime,execution")...)
	if code == 0 || !strings.Contains(stderr, "runs alone") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
}

func TestServeRefusesTheRuntimeConfigurationsItCannotRunNamingTheFlag(t *testing.T) {
	base := runtimeArgs(t, t.TempDir())
	cases := map[string][]string{
		"--batch-image":         with(base, "--batch-image", "registry.example/batch:latest"),
		"--permissions":         without(base, "--permissions"),
		"--repository-grants":   without(base, "--repository-grants"),
		"--installation-record": with(base, "--installation-record", "secret:ns/x"),
		"--authority":           with(base, "--authority", "http://metallo.example.org"),
		"--token-file":          without(base, "--key-file"),
		"--liveness-bound":      with(base, "--liveness-bound", "10s"),
	}
	for flag, args := range cases {
		code, stderr := runMain(t, nil, args...)
		if code == 0 || !strings.Contains(stderr, flag) {
			t.Errorf("%s: exit %d, %s", flag, code, stderr)
		}
	}
	code, stderr := runMain(t, map[string]string{"METALLO_BATCH_IMAGE": "busybox"}, without(base, "--batch-image")...)
	if code == 0 || !strings.Contains(stderr, "METALLO_BATCH_IMAGE") || !strings.Contains(stderr, "pinned by digest") {
		t.Fatalf("tag-only image from the environment: exit %d, %s", code, stderr)
	}
}

func TestServeNeverCreatesAMissingJournal(t *testing.T) {
	dir := t.TempDir()
	code, stderr := runMain(t, nil, runtimeArgs(t, dir)...)
	if code == 0 || !strings.Contains(stderr, "metallo runtime install") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("serve created %d files in the journal directory", len(entries))
	}
	missing := filepath.Join(dir, "absent")
	if code, _ := runMain(t, nil, runtimeArgs(t, missing)...); code == 0 {
		t.Fatal("served a missing journal directory")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatal("serve created the journal directory")
	}
}

func TestInstallThenLivenessWithoutAWorkerFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journals")
	record := filepath.Join(t.TempDir(), "installation.json")
	install := []string{"runtime", "install", "--journal-dir", dir, "--environment", "alpha-k8s", "--authority", "https://site.example",
		"--installation-record", "file:" + record, "--log-level", "error"}
	if code, stderr := runMain(t, nil, install...); code != 0 {
		t.Fatalf("install: %s", stderr)
	}
	raw, _ := os.ReadFile(record)
	if code, stderr := runMain(t, nil, install...); code != 0 {
		t.Fatalf("install again (verifies): %s", stderr)
	}
	if again, _ := os.ReadFile(record); !bytes.Equal(raw, again) {
		t.Fatal("a second install replaced the record")
	}
	if err := os.Remove(filepath.Join(dir, "jobs.sqlite")); err != nil {
		t.Fatal(err)
	}
	if code, stderr := runMain(t, nil, install...); code == 0 || !strings.Contains(stderr, "jobs.sqlite") {
		t.Fatalf("install over a missing journal: exit %d, %s", code, stderr)
	}
	code, stderr := runMain(t, nil, "runtime", "liveness", "--heartbeat-file", filepath.Join(t.TempDir(), "none"))
	if code == 0 || !strings.Contains(stderr, "heartbeat file missing") {
		t.Fatalf("liveness without a heartbeat: exit %d, %s", code, stderr)
	}
}

// runtimeRoleWith returns the runtime role configured by serve's flags in
// args (after "serve --role runtime").
func runtimeRoleWith(t *testing.T, args []string) Role {
	t.Helper()
	r := RuntimeRole()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	r.Flags(fs)
	fs.String("role", "", "")
	fs.String("admin-listen", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTheRuntimeRoleComposesStartsAndStopsReleasingItsJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journals")
	record := filepath.Join(t.TempDir(), "installation.json")
	if code, stderr := runMain(t, nil, "runtime", "install", "--journal-dir", dir, "--environment", "alpha-k8s",
		"--authority", "http://127.0.0.1:1", "--installation-record", "file:"+record, "--log-level", "error"); code != 0 {
		t.Fatal(stderr)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := with(with(runtimeArgs(t, dir), "--installation-record", "file:"+record), "--kubeconfig", kubeconfig)
	r := runtimeRoleWith(t, args)
	if err := r.Preflight(zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	var reg *prometheus.Registry
	app := fxtest.New(t, Compose([]Role{r}, Common{AdminListen: ""}, zap.NewNop()), fx.Populate(&reg))
	app.RequireStart()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var stopped bool
	for _, f := range families {
		stopped = stopped || f.GetName() == "metallo_runtime_stopped"
	}
	if !stopped {
		t.Fatal("metallo_runtime_stopped is not registered")
	}
	if _, err := journal.Open(t.Context(), dir, journal.Options{}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("a running Runtime's journal opened again: %v", err)
	}
	app.RequireStop()
	j, err := journal.Open(t.Context(), dir, journal.Options{})
	if err != nil {
		t.Fatalf("the journal is still locked after stop: %v", err)
	}
	_ = j.Close()
}

// runtime install checks every flag by serve's rules before it writes
// anything: a refused flag names itself and leaves no journal directory and
// no installation record behind.
func TestInstallRefusesABadFlagNamingItAndWritesNothing(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "journals")
	record := filepath.Join(tmp, "installation.json")
	notADir := filepath.Join(tmp, "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"runtime", "install", "--journal-dir", dir, "--environment", "alpha-k8s", "--authority", "https://site.example",
		"--installation-record", "file:" + record, "--log-level", "error"}
	cases := map[string][]string{
		"--journal-dir":         with(base, "--journal-dir", notADir),
		"--environment":         with(base, "--environment", "alpha k8s"),
		"--authority":           with(base, "--authority", "http://site.example"),
		"--installation-record": with(base, "--installation-record", "secret:ns/x"),
		"--kubeconfig":          with(base, "--kubeconfig", filepath.Join(tmp, "absent")),
		"--log-level":           with(base, "--log-level", "loud"),
	}
	for flag, args := range cases {
		code, stderr := runMain(t, nil, args...)
		if code == 0 || !strings.Contains(stderr, flag) {
			t.Errorf("%s: exit %d, %s", flag, code, stderr)
		}
		for _, p := range []string{dir, record} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("%s: a refused install wrote %s", flag, p)
			}
		}
	}
	code, stderr := runMain(t, nil, without(base, "--authority")...)
	if code == 0 || !strings.Contains(stderr, "--authority") {
		t.Fatalf("install without --authority: exit %d, %s", code, stderr)
	}
}

func TestServeRefusesNonPositiveDurationsAndPlainHTTPProvidersNamingTheFlag(t *testing.T) {
	base := runtimeArgs(t, t.TempDir())
	cases := map[string][]string{
		"--pull-wait":         with(base, "--pull-wait", "0s"),
		"--deletion-wait":     with(base, "--deletion-wait", "0s"),
		"--permissions-bound": with(base, "--permissions-bound", "-1m"),
		"--backoff-initial":   with(base, "--backoff-initial", "0s"),
		"--permissions":       with(base, "--permissions", "http:http://permissions.example"),
	}
	for flag, args := range cases {
		code, stderr := runMain(t, nil, args...)
		if code == 0 || !strings.Contains(stderr, flag) {
			t.Errorf("%s: exit %d, %s", flag, code, stderr)
		}
	}
}

// serve writes the first heartbeat after the journal opens and refuses to
// start, naming --heartbeat-file, when it cannot.
func TestServeRefusesToStartWhenTheFirstHeartbeatCannotBeWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journals")
	record := filepath.Join(t.TempDir(), "installation.json")
	if code, stderr := runMain(t, nil, "runtime", "install", "--journal-dir", dir, "--environment", "alpha-k8s",
		"--authority", "http://127.0.0.1:1", "--installation-record", "file:"+record, "--log-level", "error"); code != 0 {
		t.Fatal(stderr)
	}
	args := with(with(runtimeArgs(t, dir), "--installation-record", "file:"+record),
		"--heartbeat-file", filepath.Join(t.TempDir(), "absent", "heartbeat"))
	code, stderr := runMain(t, nil, args...)
	if code == 0 || !strings.Contains(stderr, "--heartbeat-file") || !strings.Contains(stderr, "cannot be written") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
	// The refused start released the journal.
	j, err := journal.Open(t.Context(), dir, journal.Options{})
	if err != nil {
		t.Fatalf("the journal is locked after a refused start: %v", err)
	}
	_ = j.Close()
}

func TestLivenessNamesWhatIsWrongWithTheHeartbeat(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now().UTC()
	cases := []struct {
		file, bound, want string
	}{
		{filepath.Join(dir, "none"), "2m", "heartbeat file missing"},
		{write("garbled", "not json"), "2m", "garbled"},
		{write("empty", ""), "2m", "garbled"},
		{write("future", `{"beat_at":"`+now.Add(time.Hour).Format(time.RFC3339Nano)+`"}`), "2m", "dated in the future"},
		{write("stale", `{"beat_at":"`+now.Add(-time.Hour).Format(time.RFC3339Nano)+`"}`), "2m", "older than the liveness bound"},
		{write("stopped", `{"beat_at":"`+now.Format(time.RFC3339Nano)+`","stopped":"result-conflict","cause":"x"}`), "2m", "result-conflict"},
		{write("refused", `{"beat_at":"`+now.Format(time.RFC3339Nano)+`","credential_refused_since":"`+now.Add(-3*time.Minute).Format(time.RFC3339Nano)+
			`","credential_refusal":"the Site API refuses the credential --token-file /t: site api answered 401 unauthenticated: no valid bearer token"}`),
			"2m", "refuses the Runtime's credential: every request since"},
		{write("fresh", `{"beat_at":"`+now.Format(time.RFC3339Nano)+`"}`), "0s", "--liveness-bound"},
		{"", "2m", "--heartbeat-file"},
	}
	for _, c := range cases {
		code, stderr := runMain(t, nil, "runtime", "liveness", "--heartbeat-file", c.file, "--liveness-bound", c.bound)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s (bound %s): exit %d, want %q in %s", c.file, c.bound, code, c.want, stderr)
		}
	}
	if code, stderr := runMain(t, nil, "runtime", "liveness", "--heartbeat-file", filepath.Join(dir, "fresh")); code != 0 {
		t.Fatalf("a fresh beat: %s", stderr)
	}
	// Refused for less than the bound: alive, with a warning naming it.
	recent := write("refused-recently", `{"beat_at":"`+now.Format(time.RFC3339Nano)+`","credential_refused_since":"`+now.Add(-30*time.Second).Format(time.RFC3339Nano)+
		`","credential_refusal":"the Site API refuses the credential --token-file /t: site api answered 401 unauthenticated: no valid bearer token"}`)
	var stdout bytes.Buffer
	if code := Main(t.Context(), []string{"runtime", "liveness", "--heartbeat-file", recent}, Env{Stdout: &stdout, Stderr: &bytes.Buffer{},
		LookupEnv: func(string) (string, bool) { return "", false }}); code != 0 || !strings.Contains(stdout.String(), "was refused (liveness fails past 2m0s)") ||
		!strings.Contains(stdout.String(), "--token-file /t") {
		t.Fatalf("refused for 30s with a bound of 2m: exit %d, %s", code, stdout.String())
	}
}

// pflag takes a `quoted` word of a flag's usage as its argument name
// (UnquoteUsage), so the help of serve and the runtime commands uses none.
func TestRuntimeHelpTextsQuoteNoArgumentNames(t *testing.T) {
	root := NewRootCommand(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	for _, path := range [][]string{{"serve"}, {"runtime", "install"}, {"runtime", "check"}, {"runtime", "liveness"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("%s --%s: usage has a backtick (shown as argument %q): %s", strings.Join(path, " "), f.Name, name, f.Usage)
			}
		})
	}
}

// helperEnv marks a subprocess of the install kill test: TestMain runs the
// metallo command given after "--" in it instead of the tests.
const helperEnv = "METALLO_TEST_RUNTIME_HELPER"

// TestMain runs the tests, or — in a subprocess of the install kill test
// (helperEnv set) — the `metallo` command given after "--" (with the process
// environment, so METALLO_FAILPOINTS arms its failpoints), and exits with
// its code. A dispatch here rather than a skipped helper test keeps every
// test of the package a test that runs.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "1" {
		os.Exit(testsetup.Run(m))
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(Main(context.Background(), args, Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv}))
}

// startRuntime runs serve's Preflight for the journals in dir and the
// record, then starts and stops the composed runtime role.
func startRuntime(t *testing.T, dir, record string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runtimeRoleWith(t, with(with(runtimeArgs(t, dir), "--installation-record", "file:"+record), "--kubeconfig", kubeconfig))
	if err := r.Preflight(zap.NewNop()); err != nil {
		t.Fatalf("serve refuses to start: %v", err)
	}
	app := fxtest.New(t, Compose([]Role{r}, Common{AdminListen: ""}, zap.NewNop()))
	app.RequireStart()
	app.RequireStop()
}

// `metallo runtime install` SIGKILLed by its failpoints after each journal
// file is built and after each is linked into place leaves no record; the
// next install redoes the installation and serve starts on it.
func TestAnInstallKilledAtAnyStepIsRedoneAndServeStarts(t *testing.T) {
	for _, fp := range []string{"install-after-build@1", "install-after-build@2", "install-after-build@3",
		"install-after-link@1", "install-after-link@2", "install-after-link@3"} {
		t.Run(fp, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journals")
			record := filepath.Join(t.TempDir(), "installation.json")
			install := installArgs(dir, record)
			cmd := exec.Command(os.Args[0], append([]string{"--"}, install...)...)
			cmd.Env = append(os.Environ(), helperEnv+"=1", "METALLO_FAILPOINTS="+fp)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("install was not killed at %s: %v\n%s", fp, err, out)
			}
			if _, err := os.Stat(record); !os.IsNotExist(err) {
				t.Fatalf("a killed install left a record: %v", err)
			}
			code, stderr := runMain(t, nil, install...)
			if code != 0 {
				t.Fatalf("install after a kill at %s: exit %d, %s", fp, code, stderr)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 3 {
				t.Fatalf("the journal directory holds %d entries, want the three journals", len(entries))
			}
			startRuntime(t, dir, record)
		})
	}
}

// installArgs is the `runtime install` command line of the install tests:
// journals in dir, the installation record in the file record, environment
// alpha-k8s.
func installArgs(dir, record string) []string {
	return []string{"runtime", "install", "--journal-dir", dir, "--environment", "alpha-k8s",
		"--authority", "http://127.0.0.1:1", "--installation-record", "file:" + record, "--log-level", "error"}
}

// An earlier version's interrupted install (jobs.sqlite and services.sqlite
// linked, delivery.sqlite's temporary file and its rollback journal left)
// is redone too.
func TestAnEarlierVersionsInterruptedInstallIsRedone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journals")
	record := filepath.Join(t.TempDir(), "installation.json")
	install := installArgs(dir, record)
	if code, stderr := runMain(t, nil, install...); code != 0 {
		t.Fatal(stderr)
	}
	for _, f := range []string{"delivery.sqlite", record} {
		if err := os.Remove(filepath.Join(dir, filepath.Base(f))); err != nil && f != record {
			t.Fatal(err)
		}
		_ = os.Remove(f)
	}
	for _, f := range []string{".delivery.sqlite.install", ".delivery.sqlite.install-journal"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, stderr := runMain(t, nil, install...); code != 0 {
		t.Fatalf("install after an interrupted install: exit %d, %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Fatalf("%d entries left in the journal directory", len(entries))
	}
	startRuntime(t, dir, record)
}

// A partial set that is not an interrupted install's — here complete
// journals bound to another environment, minus jobs.sqlite — is refused,
// naming the partial set, and nothing changes.
func TestAPartialSetOfAnotherBindingStillRefusesTheInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journals")
	record := filepath.Join(t.TempDir(), "installation.json")
	install := installArgs(dir, record)
	if code, stderr := runMain(t, nil, with(install, "--environment", "beta-k8s")...); code != 0 {
		t.Fatal(stderr)
	}
	if err := errors.Join(os.Remove(record), os.Remove(filepath.Join(dir, "jobs.sqlite"))); err != nil {
		t.Fatal(err)
	}
	code, stderr := runMain(t, nil, install...)
	if code == 0 || !strings.Contains(stderr, "partial journal set") || !strings.Contains(stderr, "beta-k8s") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("a refused install changed the journal directory: %d entries", len(entries))
	}
}

// A refused install removes the journal directory it created.
func TestAFailedInstallLeavesNoJournalDirectoryItCreated(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "volume", "journals")
	record := filepath.Join(tmp, "installation.json")
	if err := os.WriteFile(record, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _ := runMain(t, nil, "runtime", "install", "--journal-dir", dir, "--environment", "alpha-k8s",
		"--authority", "http://127.0.0.1:1", "--installation-record", "file:"+record, "--log-level", "error")
	if code == 0 {
		t.Fatal("install over a record without journals succeeded")
	}
	if _, err := os.Stat(filepath.Join(tmp, "volume")); !os.IsNotExist(err) {
		t.Fatalf("a failed install left the directory it created: %v", err)
	}
}

// installAt runs `runtime install` for environment into a new journal
// directory and record, and returns both.
func installAt(t *testing.T, environment string) (dir, record string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "journals")
	record = filepath.Join(t.TempDir(), "installation.json")
	if code, stderr := runMain(t, nil, "runtime", "install", "--journal-dir", dir, "--environment", environment,
		"--authority", "http://127.0.0.1:1", "--installation-record", "file:"+record, "--log-level", "error"); code != 0 {
		t.Fatal(stderr)
	}
	return dir, record
}

// serve checks the installation record and the journals' binding on every
// start and refuses, with a non-zero exit naming both sides, before it
// writes anything (no heartbeat, no -wal/-shm).
func TestServeRefusesARecordOrJournalsOfAnotherBindingOrInstallation(t *testing.T) {
	alphaDir, alphaRecord := installAt(t, "alpha-k8s")
	_, betaRecord := installAt(t, "beta-k8s")
	_, otherAlphaRecord := installAt(t, "alpha-k8s")
	cases := []struct {
		name        string
		environment string
		record      string
		want        []string
	}{
		{"journals bound to another environment", "beta-k8s", betaRecord, []string{"delivery.sqlite", "alpha-k8s", "beta-k8s", "--environment"}},
		{"a record of another environment", "beta-k8s", alphaRecord, []string{"--installation-record", "alpha-k8s", "beta-k8s"}},
		{"a record of another installation", "alpha-k8s", otherAlphaRecord, []string{"delivery.sqlite", "installation record names installation"}},
		{"no record", "alpha-k8s", filepath.Join(t.TempDir(), "absent.json"), []string{"--installation-record", "does not exist", "metallo runtime install"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			heartbeat := filepath.Join(t.TempDir(), "heartbeat")
			args := with(with(with(runtimeArgs(t, alphaDir), "--environment", c.environment), "--installation-record", "file:"+c.record),
				"--heartbeat-file", heartbeat)
			before, _ := os.ReadDir(alphaDir)
			code, stderr := runMain(t, nil, args...)
			if code == 0 {
				t.Fatal("served")
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("want %q in %s", w, stderr)
				}
			}
			if after, _ := os.ReadDir(alphaDir); len(after) != len(before) {
				t.Errorf("a refused start changed the journal directory: %d → %d entries", len(before), len(after))
			}
			if _, err := os.Stat(heartbeat); !os.IsNotExist(err) {
				t.Error("a refused start wrote the heartbeat")
			}
		})
	}
}

// runtime check compares the record's environment and authority with its
// flags, as install does, before it calls the Site API.
func TestCheckRefusesARecordOfAnotherBindingNamingTheFlag(t *testing.T) {
	_, record := installAt(t, "beta-k8s")
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runMain(t, nil, "runtime", "check", "--environment", "alpha-k8s", "--authority", "http://127.0.0.1:1",
		"--key-file", key, "--installation-record", "file:"+record, "--retry-for", "1ms")
	if code == 0 || !strings.Contains(stderr, "--installation-record") || !strings.Contains(stderr, "beta-k8s") || strings.Contains(stderr, "connection refused") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
}

// A --ca-file that cannot be read or holds no PEM certificate is refused
// at flag validation, naming the flag, before serve writes anything (no
// heartbeat, no -wal/-shm) and before check calls the Site API.
func TestABadCAFileIsRefusedAtFlagValidationForServeAndCheck(t *testing.T) {
	dir, record := installAt(t, "alpha-k8s")
	tmp := t.TempDir()
	notPEM := filepath.Join(tmp, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(tmp, "ca-dir") // a directory cannot be read as a file
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(tmp, "key")
	if err := os.WriteFile(key, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ca := range []string{notPEM, unreadable} {
		heartbeat := filepath.Join(t.TempDir(), "heartbeat")
		before, _ := os.ReadDir(dir)
		args := with(with(with(runtimeArgs(t, dir), "--installation-record", "file:"+record), "--heartbeat-file", heartbeat), "--ca-file", ca)
		code, stderr := runMain(t, nil, args...)
		if code == 0 || !strings.Contains(stderr, "invalid value") || !strings.Contains(stderr, "for --ca-file") {
			t.Errorf("serve --ca-file %s: exit %d, %s", ca, code, stderr)
		}
		if after, _ := os.ReadDir(dir); len(after) != len(before) {
			t.Errorf("serve --ca-file %s changed the journal directory", ca)
		}
		if _, err := os.Stat(heartbeat); !os.IsNotExist(err) {
			t.Errorf("serve --ca-file %s wrote the heartbeat", ca)
		}
		code, stderr = runMain(t, nil, "runtime", "check", "--environment", "alpha-k8s", "--authority", "http://127.0.0.1:1",
			"--key-file", key, "--installation-record", "file:"+record, "--retry-for", "1ms", "--ca-file", ca)
		if code == 0 || !strings.Contains(stderr, "for --ca-file") {
			t.Errorf("check --ca-file %s: exit %d, %s", ca, code, stderr)
		}
	}
	code, stderr := runMain(t, nil, "runtime", "install", "--journal-dir", filepath.Join(tmp, "j"), "--environment", "alpha-k8s",
		"--authority", "http://127.0.0.1:1", "--installation-record", "file:"+filepath.Join(tmp, "r.json"), "--ca-file", notPEM)
	if code == 0 || !strings.Contains(stderr, "ca-file") {
		t.Errorf("install --ca-file: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "j")); !os.IsNotExist(err) {
		t.Error("install with --ca-file wrote the journal directory")
	}
}

// The protocol's pull wait is whole seconds: 1500ms is refused naming
// --pull-wait.
func TestServeRefusesAPullWaitOfFractionalSeconds(t *testing.T) {
	code, stderr := runMain(t, nil, with(runtimeArgs(t, t.TempDir()), "--pull-wait", "1500ms")...)
	if code == 0 || !strings.Contains(stderr, "--pull-wait") || !strings.Contains(stderr, "whole seconds") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
}

// runtime check on an unbound stream says so instead of printing an empty
// installation.
func TestCheckOnAnUnboundStreamSaysItIsUnbound(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/commands") {
			if r.URL.Query().Get("bind") != "false" {
				t.Errorf("check pulled with bind=%q", r.URL.Query().Get("bind"))
			}
			_, _ = w.Write([]byte(`{"commands":[],"head_sequence":0,"acknowledged_sequence":0}`))
			return
		}
		_, _ = w.Write([]byte(`{"environment":"alpha-k8s","authority":"` + "http://" + r.Host + `","acknowledged_sequence":0,"head_sequence":0}`))
	}))
	defer site.Close()
	tmp := t.TempDir()
	record := filepath.Join(tmp, "installation.json")
	if code, stderr := runMain(t, nil, "runtime", "install", "--journal-dir", filepath.Join(tmp, "journals"), "--environment", "alpha-k8s",
		"--authority", site.URL, "--installation-record", "file:"+record, "--log-level", "error"); code != 0 {
		t.Fatal(stderr)
	}
	key := filepath.Join(tmp, "key")
	if err := os.WriteFile(key, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"runtime", "check", "--environment", "alpha-k8s", "--authority", site.URL, "--key-file", key,
		"--installation-record", "file:" + record, "--retry-for", "1s"}, Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: func(string) (string, bool) { return "", false }})
	if code != 0 || !strings.Contains(stdout.String(), "installation: unbound (this read-only check did not bind it)") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout.String(), stderr.String())
	}
}
