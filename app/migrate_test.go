package app

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// migrate offers the roles' database URL flags and nothing of serve's
// own: --help lists no serve-only flag, and one is refused as unknown.
func TestMigrateTakesOnlyDatabaseFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"migrate", "--help"}, Env{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("migrate --help: exit %d: %s", code, stderr.String())
	}
	help := stdout.String()
	for _, want := range []string{"--role", "--provisioning-database-url", "--execution-database-url", "--execution-database-max-conns"} {
		if !strings.Contains(help, want) {
			t.Errorf("migrate --help does not list %s:\n%s", want, help)
		}
	}
	for _, serveOnly := range []string{"--waldur-instance", "--resource-owner", "--listen", "--binding-delivery-interval"} {
		if strings.Contains(help, serveOnly) {
			t.Errorf("migrate --help lists serve's %s:\n%s", serveOnly, help)
		}
	}
	if code, stderr := runMain(t, nil, "migrate", "--role", "provisioning", "--waldur-instance", "https://waldur.example.org"); code == 0 || !strings.Contains(stderr, "waldur-instance") {
		t.Errorf("migrate took serve's --waldur-instance: exit %d: %s", code, stderr)
	}
	dir := t.TempDir()
	if code, stderr := runMain(t, nil, "migrate", "--role", "provisioning,execution",
		"--provisioning-database-url", "sqlite:"+filepath.Join(dir, "p.sqlite"), "--execution-database-url", "sqlite:"+filepath.Join(dir, "e.sqlite")); code != 0 {
		t.Fatalf("migrate both roles: exit %d: %s", code, stderr)
	}
}
