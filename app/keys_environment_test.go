package app

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// An environment's Runtime authenticates only by environments.yaml
// (docs/site-protocol.md#authentication-and-authorisation): a keys.yaml naming an
// environment:<id> principal, or listing no key, is refused at start and on reload (the
// previous version stays in use, counted refused), and such a key never opens the Site routes.
func TestKeysFileNamingAnEnvironmentOrNoKeyIsRefusedAtStartAndOnReload(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{
		{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"},
	})
	ownerKey := filepath.Join(dir, "provisioning.key")
	if err := os.WriteFile(ownerKey, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--role", "execution", "--migrate", "--admin-listen", "127.0.0.1:0",
		"--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile,
		"--execution-database-url", "sqlite:" + filepath.Join(dir, "execution.sqlite"),
		"--resource-owner", "http", "--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", ownerKey}
	execEntry := auth.KeyEntry{Principal: "service:execution", SHA256: auth.HashKey(files.ServiceKey)}
	rogue, rogueEntry := executiontest.NewKey(t, "environment:alpha-k8s")
	withRogue := keysYAML(t, execEntry, rogueEntry)

	// A fresh start with the environment's key in keys.yaml is refused, naming the entry.
	badKeys := filepath.Join(dir, "bad-keys.yaml")
	if err := os.WriteFile(badKeys, []byte(withRogue), 0o600); err != nil {
		t.Fatal(err)
	}
	// The bound only ends a start that was wrongly accepted and serves on.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, with(args, "--keys-file", badKeys)...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || ctx.Err() != nil || !strings.Contains(stderr.String(), "keys[1] (environment:alpha-k8s)") {
		t.Fatalf("a start with an environment's key in keys.yaml: %v\n%s", err, stderr.String())
	}

	p := startServed(t, bin, args...)
	c := executiontest.Client{Base: p.base}
	install := "6a0f3c1e-0000-4000-8000-0000000000aa"
	executiontest.Want(t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", files.EnvironmentKeys["alpha-k8s"], install, nil), http.StatusOK, "")

	mark := p.logMark()
	replaceFile(t, files.KeysFile, withRogue)
	refused, mark := p.waitLog(t, mark, refusedLine, "keys")
	if !strings.Contains(refused.Error, "keys[1] (environment:alpha-k8s)") || !strings.Contains(refused.Error, "environments.yaml") {
		t.Errorf("the refusal does not name the entry and where the key goes: %q", refused.Error)
	}
	executiontest.Want(t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", rogue, install, nil), http.StatusUnauthorized, siteprotocol.ProblemUnauthenticated)

	replaceFile(t, files.KeysFile, "keys: []\n")
	refused, _ = p.waitLog(t, mark, refusedLine, "keys")
	if !strings.Contains(refused.Error, "no key is listed") {
		t.Errorf("the refusal of an empty keys file does not say why: %q", refused.Error)
	}
	executiontest.Want(t, c.Call(t, http.MethodGet, unknownCommand, files.ServiceKey, "", nil), http.StatusNotFound, siteprotocol.ProblemUnknownCommand)
	if m := metricsText(t, p.adminAddr(t)); !strings.Contains(m, `metallo_config_reloads_total{file="keys",outcome="refused"} 2`) {
		t.Errorf("the refusals are not counted:\n%s", m)
	}
}
