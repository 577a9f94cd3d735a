package app

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
)

// Serving provisioning and execution on two unmigrated databases fails
// before anything starts, naming both contexts, not only the first one Fx
// happens to construct.
func TestServeNamesEveryContextWithPendingMigrations(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}})
	var stderr bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--role", "provisioning,execution",
		"--provisioning-database-url", "sqlite:" + filepath.Join(dir, "provisioning.sqlite"),
		"--execution-database-url", "sqlite:" + filepath.Join(dir, "execution.sqlite"),
		"--waldur-instance", "https://waldur.example.org", "--resource-owner", "in-process",
		"--listen", "127.0.0.1:0", "--admin-listen", "",
		"--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile,
	}, Env{Stdout: &bytes.Buffer{}, Stderr: &stderr})
	out := stderr.String()
	if code == 0 {
		t.Fatalf("started on unmigrated databases: %s", out)
	}
	for _, want := range []string{"resource_provisioning", "execution_ports", "pending migrations", "--migrate"} {
		if !strings.Contains(out, want) {
			t.Errorf("the start error does not name %q: %s", want, out)
		}
	}
}
