package app

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// executionFiles writes keys.yaml and environments.yaml (alpha-k8s) into a
// temporary directory.
func executionFiles(t *testing.T) executiontest.Files {
	t.Helper()
	return executiontest.WriteFiles(t, t.TempDir(), []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}})
}

func executionArgs(t *testing.T, files executiontest.Files, extra ...string) []string {
	return append([]string{"--execution-database-url", "sqlite:" + filepath.Join(t.TempDir(), "execution.sqlite")}, extra...)
}

func TestExecutionRoleGraphIsValid(t *testing.T) {
	files := executionFiles(t)
	r := configured(t, ExecutionRole(), executionArgs(t, files, "--resource-owner", "http", "--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", files.KeysFile)...)
	if err := fx.ValidateApp(Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zap.NewNop())); err != nil {
		t.Fatal(err)
	}
}

func TestProvisioningAndExecutionComposeInOneProcessWithSeparateDatabases(t *testing.T) {
	files := executionFiles(t)
	dir := t.TempDir()
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"), "--resource-owner", "in-process"),
	}
	opts := Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t))
	if err := fx.ValidateApp(opts); err != nil {
		t.Fatal(err)
	}
	var srv *httpserver.Server
	app := fxtest.New(t, opts, fx.Populate(&srv))
	app.RequireStart()
	c := executiontest.Client{Base: "http://" + srv.Addr()}
	executiontest.Want(t, c.Call(t, http.MethodGet, "/readyz", "", "", nil), http.StatusOK, "")
	executiontest.Want(t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s", files.EnvironmentKeys["alpha-k8s"], "inst-1", nil), http.StatusOK, "")
	executiontest.Want(t, c.Call(t, http.MethodGet, "/resource-provisioning/allocations", files.ServiceKey, "", nil), http.StatusOK, "")
	app.RequireStop()
}

// TestExecutionRoleWithoutAnOwnerAdaptorRefusesToStartNamingTheOwner is the
// Must-hold: composed without --resource-owner, the role does not start and
// the error names resource_provisioning.
func TestExecutionRoleWithoutAnOwnerAdaptorRefusesToStartNamingTheOwner(t *testing.T) {
	files := executionFiles(t)
	r := configured(t, ExecutionRole(), executionArgs(t, files)...)
	err := r.Preflight(zap.NewNop())
	if !errors.Is(err, executionports.ErrNoOwner) || !strings.Contains(err.Error(), "resource_provisioning") || !strings.Contains(err.Error(), "--resource-owner") {
		t.Fatalf("got %v", err)
	}
}

func TestInProcessOwnerNeedsTheProvisioningRoleInTheSameProcess(t *testing.T) {
	files := executionFiles(t)
	r := configured(t, ExecutionRole(), executionArgs(t, files, "--resource-owner", "in-process")...)
	app := fx.New(Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zap.NewNop()))
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "--role provisioning,execution") || !strings.Contains(err.Error(), "resource_provisioning") {
		t.Fatalf("got %v", err)
	}
}

func TestHTTPOwnerNeedsItsURLAndKeyFile(t *testing.T) {
	files := executionFiles(t)
	r := configured(t, ExecutionRole(), executionArgs(t, files, "--resource-owner", "http")...)
	app := fx.New(Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zap.NewNop()))
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "--provisioning-url") || !strings.Contains(err.Error(), "--provisioning-key-file") {
		t.Fatalf("got %v", err)
	}
}

func TestExecutionPreflightNamesBadFlagsAndLogsTheEmbeddedDefault(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	if err := configured(t, ExecutionRole(), "--resource-owner", "in-process").Preflight(zap.New(core)); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].Message, "embedded default SQLite ./var/execution.sqlite") {
		t.Fatalf("preflight logs %+v", logs.All())
	}
	for flag, args := range map[string][]string{
		"execution-database-url": {"--execution-database-url", "mysql://x"},
		"resource-owner":         {"--resource-owner", "guess"},
		"read-result-retention":  {"--resource-owner", "in-process", "--read-result-retention", "-1m"},
	} {
		err := configured(t, ExecutionRole(), args...).Preflight(zap.NewNop())
		if !errors.Is(err, config.ErrInvalidFlag) || !strings.Contains(err.Error(), "--"+flag) {
			t.Fatalf("%v: %v", args, err)
		}
	}
}

func TestExecutionRoleRefusesABadEnvironmentsFileNamingTheEntry(t *testing.T) {
	files := executionFiles(t)
	bad := filepath.Join(t.TempDir(), "environments.yaml")
	executiontest.WriteYAML(t, bad, map[string]any{"environments": []map[string]any{{"id": "alpha-k8s", "site": "alpha", "authority": "https://m.example.org", "auth": map[string]any{}}}})
	r := configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(t.TempDir(), "e.sqlite"),
		"--resource-owner", "http", "--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", files.KeysFile)
	app := fx.New(Compose([]Role{r}, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: bad, Migrate: true}, zap.NewNop()))
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "--environments-file") || !strings.Contains(err.Error(), "environments[0] (alpha-k8s)") {
		t.Fatalf("got %v", err)
	}
}

// TestServeExecutionWithoutAnOwnerExitsNamingTheOwner runs the command line.
func TestServeExecutionWithoutAnOwnerExitsNamingTheOwner(t *testing.T) {
	files := executionFiles(t)
	var out, errOut strings.Builder
	code := Main(t.Context(), append([]string{"serve", "--role", "execution", "--keys-file", files.KeysFile, "--listen", "127.0.0.1:0", "--admin-listen", ""}, executionArgs(t, files)...),
		Env{Stdout: &out, Stderr: &errOut})
	if code == 0 || !strings.Contains(errOut.String(), "needs its owner resource_provisioning") {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
}
