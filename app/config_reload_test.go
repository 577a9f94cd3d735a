package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// The configuration files' reloads and the one environments file, with the real binary
// (docs/operations.md#configuration-reloads, docs/architecture.md#configuration-files).

const (
	reloadedLine = "configuration file reloaded; the new version is in use"
	refusedLine  = "configuration file refused; the previous version stays in use"
)

// logEntry is one JSON log line of a served process.
type logEntry struct {
	Msg   string `json:"msg"`
	File  string `json:"file"`
	Addr  string `json:"addr"`
	Error string `json:"error"`
}

// logMark is the number of log lines p has written so far.
func (p *servedProcess) logMark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.log)
}

// waitLog waits for p's first log line after mark with message msg about the configuration
// file file, and returns it with the mark after it. The bound only ends a test whose line never
// comes.
func (p *servedProcess) waitLog(t *testing.T, mark int, msg, file string) (logEntry, int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p.mu.Lock()
		lines := slices.Clone(p.log[mark:])
		p.mu.Unlock()
		for i, line := range lines {
			var e logEntry
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == msg && e.File == file {
				return e, mark + i + 1
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q about %s after line %d:\n%s", msg, file, mark, p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminAddr returns the address of p's admin listener from its log.
func (p *servedProcess) adminAddr(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(p.logText(), "\n") {
		var e logEntry
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "serving metrics" && e.Addr != "" {
			return e.Addr
		}
	}
	t.Fatalf("no admin listener in the log:\n%s", p.logText())
	return ""
}

// replaceFile writes body to path by a rename, as a configuration tool or a Secret volume
// changes a file: a reader sees the old or the new file, never part of one.
func replaceFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

func keysYAML(t *testing.T, entries ...auth.KeyEntry) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("keys:\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "  - principal: %s\n    sha256: %s\n", e.Principal, e.SHA256)
	}
	return b.String()
}

func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const unknownCommand = "/execution/v1/streams/alpha-k8s/commands/6b1c0d2e-3f4a-4b5c-8d6e-000000000001"

// A key removed from keys.yaml is refused from the first request after the process logs the
// reload, with no restart, and the other keys keep working; a keys.yaml that does not validate
// is refused whole, logged and counted, and the keys in use stay as they were. The same for
// environments.yaml: a removed environment's Runtime key is refused once the reload is logged,
// and a pull of it waiting at that moment ends refused, never answered as if the environment
// were there.
func TestAReloadedKeysFileRefusesARemovedKeyFromTheNextRequest(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{
		{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"},
		{ID: "beta-k8s", Site: "beta", Authority: "https://metallo.example.org"},
	}, "service:beto")
	ownerKey := filepath.Join(dir, "provisioning.key")
	if err := os.WriteFile(ownerKey, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServed(t, bin, "--role", "execution", "--migrate", "--admin-listen", "127.0.0.1:0",
		"--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile, "--execution-services", "execution,beto",
		"--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
		"--resource-owner", "http", "--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", ownerKey)
	c := executiontest.Client{Base: p.base}
	beto := files.ExtraKeys["service:beto"]
	// Both service keys are admitted: the command is unknown, not the caller.
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, files.ServiceKey, "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownCommand)
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, beto, "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownCommand)

	// keys.yaml without service:execution: refused from the first request after the line.
	betoEntry := auth.KeyEntry{Principal: "service:beto", SHA256: auth.HashKey(beto)}
	mark := p.logMark()
	replaceFile(t, files.KeysFile, keysYAML(t, betoEntry))
	_, mark = p.waitLog(t, mark, reloadedLine, "keys")
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, files.ServiceKey, "", nil), http.StatusUnauthorized, siteprotocol.ProblemUnauthenticated)
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, beto, "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownCommand)

	// A keys.yaml that does not validate (here it would bring the removed key back beside a bad
	// entry) is refused whole: the keys in use stay, the removed key stays refused.
	execEntry := auth.KeyEntry{Principal: "service:execution", SHA256: auth.HashKey(files.ServiceKey)}
	replaceFile(t, files.KeysFile, keysYAML(t, betoEntry, execEntry)+"  - principal: nobody\n    sha256: "+strings.Repeat("a", 64)+"\n")
	refused, _ := p.waitLog(t, mark, refusedLine, "keys")
	if !strings.Contains(refused.Error, "keys[2]") {
		t.Errorf("the refusal does not name the entry: %q", refused.Error)
	}
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, beto, "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownCommand)
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, files.ServiceKey, "", nil), http.StatusUnauthorized, siteprotocol.ProblemUnauthenticated)
	metrics := metricsText(t, p.adminAddr(t))
	for _, want := range []string{
		`metallo_config_reloads_total{file="keys",outcome="applied"} 1`,
		`metallo_config_reloads_total{file="keys",outcome="refused"} 1`,
		`metallo_config_last_reload_successful{file="keys"} 0`,
		`metallo_config_last_reload_successful{file="environments"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// environments.yaml without beta-k8s while its Runtime waits in a pull: the pull ends
	// refused (404 unknown-environment, or 401 if it came after the reload), never with the
	// 200 of a wait run out; from the line on, the Runtime's key is refused.
	install := "6a0f3c1e-0000-4000-8000-0000000000bb"
	betaKey := files.EnvironmentKeys["beta-k8s"]
	executiontest.Want(t, c.Call(t, http.MethodGet, "/site/v1/streams/beta-k8s", betaKey, install, nil), http.StatusOK, "")
	pulled := make(chan executiontest.Reply, 1)
	go func() {
		r, err := c.Try(http.MethodGet, "/site/v1/streams/beta-k8s/commands?after=0&wait=30", betaKey, install, nil)
		if err != nil {
			r = executiontest.Reply{Body: []byte(err.Error())}
		}
		pulled <- r
	}()
	mark = p.logMark()
	replaceFile(t, files.EnvironmentsFile, "environments:\n  - id: alpha-k8s\n    site: alpha\n    authority: https://metallo.example.org\n"+
		"    auth: {key_sha256: "+auth.HashKey(files.EnvironmentKeys["alpha-k8s"])+"}\n")
	_, _ = p.waitLog(t, mark, reloadedLine, "environments")
	executiontest.Want(t, c.Call(t, http.MethodGet, "/site/v1/streams/beta-k8s", betaKey, install, nil), http.StatusUnauthorized, siteprotocol.ProblemUnauthenticated)
	executiontest.Want(t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", files.EnvironmentKeys["alpha-k8s"], install, nil), http.StatusOK, "")
	r := <-pulled
	ended := r.Status == http.StatusNotFound && r.Reason() == siteprotocol.ProblemUnknownEnvironment
	refusedLater := r.Status == http.StatusUnauthorized && r.Reason() == siteprotocol.ProblemUnauthenticated
	if !ended && !refusedLater {
		t.Fatalf("the pull of the removed environment answered %s", r)
	}
}

// environmentsFile writes environments.yaml at path: each entry id@site (backend as given, none
// for kubernetes) with a static key, whose key it returns by environment.
func environmentsFile(t *testing.T, path string, entries ...[3]string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	var b strings.Builder
	b.WriteString("environments:\n")
	for _, e := range entries {
		key, entry := executiontest.NewKey(t, "environment:"+e[0])
		keys[e[0]] = key
		fmt.Fprintf(&b, "  - id: %s\n    site: %s\n    authority: https://metallo.example.org\n", e[0], e[1])
		if e[2] != "" {
			fmt.Fprintf(&b, "    backend: %s\n", e[2])
		}
		fmt.Fprintf(&b, "    auth: {key_sha256: %s}\n", entry.SHA256)
	}
	replaceFile(t, path, b.String())
	return keys
}

// The Must-hold of the one environments file: a provisioning role and an execution role started
// as separate processes of the real binary from one environments.yaml agree on every
// environment's Site — the execution role's stream state names it, the provisioning role shows
// the environment to its Site's agent and to no other Site's, and the execution role's delivery
// read of it (which asks the provisioning role) answers — and they agree again once both have
// reloaded a changed file (an environment moved to another Site, one added, one removed),
// without a restart.
func TestProvisioningAndExecutionProcessesAgreeOnEveryEnvironmentsSite(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	sites := []string{"alpha", "beta", "gamma"}
	keysFile := filepath.Join(dir, "keys.yaml")
	keys := map[string]string{}
	var entries []auth.KeyEntry
	for _, p := range []string{"service:execution", "site:alpha", "site:beta", "site:gamma"} {
		key, entry := executiontest.NewKey(t, p)
		keys[p] = key
		entries = append(entries, entry)
	}
	replaceFile(t, keysFile, keysYAML(t, entries...))
	ownerKey := filepath.Join(dir, "provisioning.key")
	if err := os.WriteFile(ownerKey, []byte(keys["service:execution"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "environments.yaml")
	envKeys := environmentsFile(t, envFile, [3]string{"alpha-k8s", "alpha", ""}, [3]string{"alpha-hpc", "alpha", "slurm"}, [3]string{"beta-k8s", "beta", "kubernetes"})

	prov := startServed(t, bin, "--role", "provisioning", "--migrate", "--keys-file", keysFile, "--environments-file", envFile,
		"--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance)
	execP := startServed(t, bin, "--role", "execution", "--migrate", "--keys-file", keysFile, "--environments-file", envFile,
		"--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"),
		"--resource-owner", "http", "--provisioning-url", prov.base, "--provisioning-key-file", ownerKey)
	provC, execC := executiontest.Client{Base: prov.base}, executiontest.Client{Base: execP.base}

	// agree checks both processes against want (environment → Site) and gone (environments
	// neither may know).
	agree := func(want map[string]string, gone ...string) {
		t.Helper()
		for env, site := range want {
			st := executiontest.Decode[siteprotocol.StreamState](t, execC.Call(t, http.MethodGet, "/site/v1/streams/"+env, envKeys[env], "inst-"+env, nil))
			if st.Site != site {
				t.Errorf("execution: %s is at Site %q, the file says %s", env, st.Site, site)
			}
			if r := execC.Call(t, http.MethodGet, "/execution/v1/streams/"+env+"/bindings", keys["service:execution"], "", nil); r.Status != http.StatusOK {
				t.Errorf("execution's delivery read of %s (asking provisioning): %s", env, r)
			}
			for _, s := range sites {
				r := provC.Call(t, http.MethodGet, "/resource-provisioning/"+s+"/account-lookup?username=u&provider_project=p&environment="+env, keys["site:"+s], "", nil)
				switch {
				case s == site && r.Status != http.StatusOK:
					t.Errorf("provisioning: %s is not an environment of its Site %s: %s", env, s, r)
				case s != site && (r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "not an environment of Site "+s)):
					t.Errorf("provisioning: %s is shown to Site %s, the file says %s: %s", env, s, site, r)
				}
			}
			executiontest.Want(t, provC.Call(t, http.MethodGet, "/resource-provisioning/environments/"+env+"/bindings", keys["service:execution"], "", nil), http.StatusOK, "")
		}
		for _, env := range gone {
			executiontest.Want(t, execC.Call(t, http.MethodGet, "/execution/v1/streams/"+env+"/bindings", keys["service:execution"], "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment)
			executiontest.Want(t, provC.Call(t, http.MethodGet, "/resource-provisioning/environments/"+env+"/bindings", keys["service:execution"], "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment)
		}
	}
	agree(map[string]string{"alpha-k8s": "alpha", "alpha-hpc": "alpha", "beta-k8s": "beta"}, "gamma-k8s")

	// alpha-hpc moves to Site beta, gamma-k8s comes, beta-k8s goes; both processes reload.
	pm, em := prov.logMark(), execP.logMark()
	envKeys = environmentsFile(t, envFile, [3]string{"alpha-k8s", "alpha", ""}, [3]string{"alpha-hpc", "beta", "slurm"}, [3]string{"gamma-k8s", "gamma", ""})
	prov.waitLog(t, pm, reloadedLine, "environments")
	execP.waitLog(t, em, reloadedLine, "environments")
	agree(map[string]string{"alpha-k8s": "alpha", "alpha-hpc": "beta", "gamma-k8s": "gamma"}, "beta-k8s")
}

// A provisioning start that still gives the removed --environment-site, on the command line or
// as METALLO_ENVIRONMENT_SITE, is refused before anything starts, naming the way forward.
func TestAStartWithEnvironmentSiteIsRefusedNamingTheEnvironmentsFile(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{args: []string{"--environment-site", "alpha-k8s=alpha"}},
		{env: "METALLO_ENVIRONMENT_SITE=alpha-k8s=alpha"},
	} {
		cmd := exec.Command(bin, append([]string{"serve", "--role", "provisioning", "--waldur-instance", waldurInstance,
			"--provisioning-database-url", "sqlite:" + filepath.Join(dir, "p.sqlite"), "--keys-file", filepath.Join(dir, "absent-keys.yaml")}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		out := stderr.String()
		if err == nil || !strings.Contains(out, "--environment-site (METALLO_ENVIRONMENT_SITE)") || !strings.Contains(out, "removed") ||
			!strings.Contains(out, "--environments-file, METALLO_ENVIRONMENTS_FILE") || !strings.Contains(out, "docs/operations.md#upgrades") {
			t.Errorf("%v %s: %v\n%s", tc.args, tc.env, err, out)
		}
		if strings.Contains(out, "starting") {
			t.Errorf("%v %s: something started:\n%s", tc.args, tc.env, out)
		}
	}
}
