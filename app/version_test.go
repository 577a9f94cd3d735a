package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// The build of a binary (docs/operations.md#versions): `make build` stamps
// the checkout's commit, `metallo version` and `--version` say it, every
// role's /metrics carries it in metallo_build_info, the central roles'
// served OpenAPI document carries it in x-metallo-build, and the documents
// `metallo openapi` prints (the committed ones) never do.

// gitOut runs git in the module root and returns its trimmed output.
func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	root, err := testsetup.ModuleRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s (the tests run in a git checkout): %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// runBinary runs bin with args and returns its standard output.
func runBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("metallo %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// madeBuild returns the binary `make build` makes and its build as
// `metallo version -o json` prints it.
func madeBuild(t *testing.T) (string, buildinfo.Info) {
	t.Helper()
	bin := testsetup.Binary(t, testsetup.WithMake())
	var info buildinfo.Info
	if err := json.Unmarshal([]byte(runBinary(t, bin, "version", "--output", "json")), &info); err != nil {
		t.Fatal(err)
	}
	return bin, info
}

func TestMakeBuildStampsTheCommitAndVersionSaysIt(t *testing.T) {
	bin, info := madeBuild(t)
	head := gitOut(t, "rev-parse", "HEAD")
	committed, err := strconv.ParseInt(gitOut(t, "show", "-s", "--format=%ct", "HEAD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	describe := gitOut(t, "describe", "--tags", "--always", "--abbrev=12", "--match", "v[0-9]*", "HEAD")
	if info.Revision != head || !info.Time.Equal(time.Unix(committed, 0)) || info.Modified == nil {
		t.Fatalf("make build's binary says %+v; want revision %s committed at %s, and whether the tree was modified", info, head, time.Unix(committed, 0).UTC())
	}
	if want := describe + map[bool]string{true: "+dirty", false: ""}[*info.Modified]; info.Version != want {
		t.Errorf("version %q; want %q (git describe, +dirty when modified)", info.Version, want)
	}
	if info.GoVersion != runtime.Version() || info.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("go %s %s; want %s %s/%s", info.GoVersion, info.Platform, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	text := runBinary(t, bin, "version")
	modified := strconv.FormatBool(*info.Modified)
	for _, want := range []string{"metallo " + info.Version + "\n", "revision: " + head + "\n", "time:     " + info.Time.Format(time.RFC3339) + "\n",
		"modified: " + modified + "\n", "go:       " + runtime.Version() + " " + info.Platform + "\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("metallo version does not say %q:\n%s", want, text)
		}
	}
	if !strings.HasPrefix(text, "metallo "+info.Version+"\n") {
		t.Errorf("metallo version's first line is not the version:\n%s", text)
	}
	if flag := runBinary(t, bin, "--version"); flag != text {
		t.Errorf("metallo --version:\n%s\nmetallo version:\n%s", flag, text)
	}
}

func TestVersionRefusesAnUnknownOutputNamingTheFlag(t *testing.T) {
	code, stderr := runMain(t, nil, "version", "--output", "yaml")
	if code == 0 || !strings.Contains(stderr, "--output") || !strings.Contains(stderr, "text or json") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// A build that says nothing prints (devel) and unknown.
func TestVersionSaysDevelAndUnknownOfABuildWithoutData(t *testing.T) {
	text := versionLines(buildinfo.From(nil, buildinfo.Linked{}))
	for _, want := range []string{"metallo (devel)\n", "revision: unknown\n", "time:     unknown\n", "modified: unknown\n", "go:       " + runtime.Version()} {
		if !strings.Contains(text, want) {
			t.Errorf("%q does not say %q", text, want)
		}
	}
}

// roleProcess is a `metallo serve` subprocess whose log is read for its
// listeners' addresses.
type roleProcess struct {
	cmd   *exec.Cmd
	lines chan string
	// seen are the lines read so far.
	seen []string
}

// startRole starts `bin serve args…` and returns it once its admin
// listener serves (the "serving metrics" line), with that address; it is
// stopped with SIGTERM (by its PID) when the test ends.
func startRole(t *testing.T, bin string, args ...string) (*roleProcess, string) {
	t.Helper()
	p := &roleProcess{cmd: exec.Command(bin, append([]string{"serve"}, args...)...), lines: make(chan string, 1024)}
	p.cmd.Env = append(os.Environ(), "METALLO_LOG_LEVEL=info", "METALLO_LOG_FORMAT=json")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("log of serve %v:\n%s", args, strings.Join(p.seen, "\n"))
		}
	})
	return p, p.addr(t, "serving metrics")
}

// addr returns the addr field of the log line msg, reading the log until
// it comes.
func (p *roleProcess) addr(t *testing.T, msg string) string {
	t.Helper()
	addrOf := func(line string) string {
		var e struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == msg {
			return e.Addr
		}
		return ""
	}
	for _, line := range p.seen {
		if a := addrOf(line); a != "" {
			return a
		}
	}
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("serve ended before logging %q:\n%s", msg, strings.Join(p.seen, "\n"))
			}
			p.seen = append(p.seen, line)
			if a := addrOf(line); a != "" {
				return a
			}
		case <-timeout:
			t.Fatalf("no %q line within 2 minutes:\n%s", msg, strings.Join(p.seen, "\n"))
		}
	}
}

func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	return b
}

func TestEveryRoleServesItsBuildAndOnlyTheServedDocumentsCarryIt(t *testing.T) {
	bin, info := madeBuild(t)
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}})
	ownerKey := filepath.Join(dir, "provisioning.key")
	if err := os.WriteFile(ownerKey, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := "--admin-listen=127.0.0.1:0"
	provisioning, provisioningAdmin := startRole(t, bin, "--role", "provisioning", "--migrate", "--listen", "127.0.0.1:0", admin, "--keys-file", files.KeysFile,
		"--environments-file", files.EnvironmentsFile, "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", "https://waldur.example.org")
	execution, executionAdmin := startRole(t, bin, "--role", "execution", "--migrate", "--listen", "127.0.0.1:0", admin, "--keys-file", files.KeysFile,
		"--environments-file", files.EnvironmentsFile, "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
		"--resource-owner", "http", "--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", ownerKey)

	journals, record := filepath.Join(dir, "journals"), "file:"+filepath.Join(dir, "installation.json")
	runBinary(t, bin, "runtime", "install", "--journal-dir", journals, "--environment", "alpha-k8s", "--authority", "http://127.0.0.1:1",
		"--installation-record", record, "--log-level", "error")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rtArgs := with(with(with(runtimeArgs(t, journals), "--installation-record", record), "--kubeconfig", kubeconfig), "--admin-listen", "127.0.0.1:0")
	_, runtimeAdmin := startRole(t, bin, rtArgs[1:]...) // after "serve"

	series := fmt.Sprintf("metallo_build_info{go_version=%q,revision=%q,version=%q} 1\n", info.GoVersion, info.Revision, info.Version)
	for role, addr := range map[string]string{"provisioning": provisioningAdmin, "execution": executionAdmin, "runtime": runtimeAdmin} {
		if metrics := getBody(t, "http://"+addr+"/metrics"); !bytes.Contains(metrics, []byte(series)) {
			t.Errorf("%s's /metrics does not carry %s", role, series)
		}
	}

	want, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	for role, p := range map[string]*roleProcess{"provisioning": provisioning, "execution": execution} {
		var doc struct {
			Info struct {
				Version string          `json:"version"`
				Build   json.RawMessage `json:"x-metallo-build"`
			} `json:"info"`
		}
		base := "http://" + p.addr(t, "serving API")
		if err := json.Unmarshal(getBody(t, base+"/openapi.json"), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Info.Version != httpserver.APIVersion || !bytes.Equal(doc.Info.Build, want) {
			t.Errorf("%s serves info.version %q and x-metallo-build %s; want %q and %s", role, doc.Info.Version, doc.Info.Build, httpserver.APIVersion, want)
		}
		if yaml := getBody(t, base+"/openapi.yaml"); !bytes.Contains(yaml, []byte(httpserver.BuildExtension+":")) || !bytes.Contains(yaml, []byte(info.Revision)) {
			t.Errorf("%s's /openapi.yaml does not carry the build", role)
		}
		// The document `metallo openapi` prints — the committed one — is
		// the API's alone: the same from any build.
		printed := runBinary(t, bin, "openapi", "--role", role)
		committed, err := os.ReadFile(filepath.Join("..", "openapi", role+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if printed != string(committed) || strings.Contains(printed, httpserver.BuildExtension) || !strings.Contains(printed, "\n  version: "+httpserver.APIVersion+"\n") {
			t.Errorf("metallo openapi --role %s of a stamped build differs from openapi/%s.yaml or carries the build", role, role)
		}
	}
}
