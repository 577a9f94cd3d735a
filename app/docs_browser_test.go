package app

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// TestDocsRenderTheExecutionOperationsInHeadlessChromiumWithoutNetwork is
// the browser lane (docs/testing.md#the-browser-lane): the metallo binary
// serves the execution role, and Debian's chromium, headless with a new
// empty profile and every host but 127.0.0.1 resolved to nothing (so no
// external URL can load), renders /docs at an operation's page; the DOM
// must hold every execution operation's summary (the sidebar's group) and
// the operation's own description. A missing chromium fails the test,
// naming make test, which installs it.
func TestDocsRenderTheExecutionOperationsInHeadlessChromiumWithoutNetwork(t *testing.T) {
	t.Log("metallo-lane: browser")
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("Debian's chromium is not installed: run make test (it installs the chromium package with apt-get when missing), or apt-get install chromium")
	}
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}})
	ownerKey := filepath.Join(dir, "provisioning.key")
	if err := os.WriteFile(ownerKey, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServed(t, bin, "--role", "execution", "--migrate", "--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile,
		"--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"), "--resource-owner", "http",
		"--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", ownerKey)

	resp, err := http.Get(p.base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Summary     string `json:"summary"`
			Description string `json:"description"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	var summaries []string
	var appendDescription string
	for _, item := range doc.Paths {
		for _, op := range item {
			summaries = append(summaries, op.Summary)
			if op.OperationID == "append-command" {
				appendDescription = op.Description
			}
		}
	}
	if len(summaries) == 0 || appendDescription == "" {
		t.Fatalf("the served document has no append-command operation: %s", spec)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(),
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--virtual-time-budget=20000", "--dump-dom",
		p.base+"/docs#/operations/append-command")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	text := domText(string(dom))
	for _, s := range summaries {
		if !strings.Contains(text, s) {
			t.Errorf("the rendered /docs does not show the operation %q", s)
		}
	}
	// The operation's page itself rendered: its description's first sentence.
	first, _, _ := strings.Cut(appendDescription, ":")
	if !strings.Contains(text, first) {
		t.Errorf("the rendered /docs does not show append-command's description %q", first)
	}
	if t.Failed() {
		t.Logf("rendered text:\n%s", text)
	}
}

var (
	styleOrScript = regexp.MustCompile(`(?s)<(style|script)\b.*?</(style|script)>`)
	tag           = regexp.MustCompile(`<[^>]+>`)
	space         = regexp.MustCompile(`\s+`)
)

// domText is the text of a dumped DOM: tags, styles and scripts dropped,
// entities decoded, white space runs made one space.
func domText(dom string) string {
	s := styleOrScript.ReplaceAllString(dom, " ")
	s = tag.ReplaceAllString(s, " ")
	return space.ReplaceAllString(html.UnescapeString(s), " ")
}
