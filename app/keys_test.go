package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// An environment's Runtime key is authenticated by environments.yaml, so
// `keys new --principal environment:<id>` points there (with the hash as
// key_sha256), never at keys.yaml, and refuses --append.
func TestKeysNewForAnEnvironmentPointsAtEnvironmentsYAML(t *testing.T) {
	var out bytes.Buffer
	code := Main(t.Context(), []string{"keys", "new", "--principal", "environment:alpha-k8s"}, Env{Stdout: &out, Stderr: &out})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	s := out.String()
	m := regexp.MustCompile(`(?m)^key: (\S+)$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no key printed: %s", s)
	}
	sum := sha256.Sum256([]byte(m[1]))
	if !strings.Contains(s, "environments.yaml") || !strings.Contains(s, "id: alpha-k8s") ||
		!strings.Contains(s, "key_sha256: "+hex.EncodeToString(sum[:])) || strings.Contains(s, "add under keys:") {
		t.Fatalf("output %q", s)
	}
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	var bad bytes.Buffer
	code = Main(t.Context(), []string{"keys", "new", "--principal", "environment:alpha-k8s", "--append", keys}, Env{Stdout: &bad, Stderr: &bad})
	if code == 0 || !strings.Contains(bad.String(), "--append") || !strings.Contains(bad.String(), "environments.yaml") {
		t.Fatalf("--append of an environment key: exit %d, %s", code, bad.String())
	}
	if _, err := os.Stat(keys); !os.IsNotExist(err) {
		t.Fatal("an environment key was appended to a keys file")
	}
}

// A key that --append cannot store is never printed: handed out, it would
// authenticate nothing.
func TestKeysNewPrintsNoKeyItCouldNotAppend(t *testing.T) {
	dir := t.TempDir()
	for name, path := range map[string]string{
		"a directory":         dir,
		"an unparseable file": writeFile(t, filepath.Join(dir, "bad.yaml"), "keys: [unclosed\n"),
	} {
		var out bytes.Buffer
		code := Main(t.Context(), []string{"keys", "new", "--principal", "site:alpha", "--append", path}, Env{Stdout: &out, Stderr: &out})
		if code == 0 || strings.Contains(out.String(), "key: mtl_") || strings.Contains(out.String(), "key: ") && strings.Contains(out.String(), "# added") {
			t.Errorf("--append to %s: exit %d, output %q; want a failure that prints no key", name, code, out.String())
		}
	}
	good := filepath.Join(dir, "keys.yaml")
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"keys", "new", "--principal", "site:alpha", "--append", good}, Env{Stdout: &out, Stderr: &out}); code != 0 ||
		!regexp.MustCompile(`(?m)^key: \S+\n# added site:alpha to `).MatchString(out.String()) {
		t.Fatalf("--append to a new file: exit %d, output %q", code, out.String())
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
