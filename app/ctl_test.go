package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// TestCtlListsEnvironmentsAndCommandsWithPrivateDataAsDigestsAndAnOperatorKeyCannotAppend
// serves both central roles, appends a read-logs command with `metallo ctl
// append` and a service key, answers it as the Runtime (a protocol client
// here: the test pulls and sends the result a Runtime would, its log
// content a secret), and reads with an operator key: `ctl environments`
// shows the stream's lag, `ctl commands` the command and its result with
// the log content as its size and SHA-256 only, in both outputs; the
// Runtime's stop report shows in the listing and the next pull clears it;
// the operator key's append, rebind and plan are refused 403
// (docs/operations.md#metallo-ctl).
func TestCtlListsEnvironmentsAndCommandsWithPrivateDataAsDigestsAndAnOperatorKeyCannotAppend(t *testing.T) {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}}, "operator:alice")
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"), "--resource-owner", "in-process",
			"--binding-delivery-interval", "24h", "--binding-feed-interval", "24h"),
	}
	var srv *httpserver.Server
	app := fxtest.New(t, Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	base := "http://" + srv.Addr()
	operatorKey, serviceKey := filepath.Join(dir, "operator.key"), filepath.Join(dir, "service.key")
	for path, key := range map[string]string{operatorKey: files.ExtraKeys["operator:alice"], serviceKey: files.ServiceKey} {
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(keyFile string, args ...string) (string, error) {
		t.Helper()
		var out, errs bytes.Buffer
		cmd := NewRootCommand(Env{Stdout: &out, Stderr: &errs, LookupEnv: func(k string) (string, bool) {
			if k == "METALLO_KEY_FILE" {
				return keyFile, true
			}
			return "", false
		}})
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(t.Context())
		return out.String() + errs.String(), err
	}
	ctl := func(keyFile string, args ...string) (string, error) {
		t.Helper()
		return run(keyFile, append([]string{"ctl", "--server", base}, args...)...)
	}

	secret := "model says: the member's private log line 42"
	read := map[string]any{
		"id": "1b2c3d4e-5f60-4a1b-8c2d-3e4f5a6b7c8d", "operation": "read-logs", "issued_at": "2026-08-20T10:40:00Z",
		"run_id": "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10", "attempt_id": "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
		"member_id": "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80", "project_id": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
		"account_ref": map[string]any{"binding_id": "e6cc5fcd-e6be-5742-82db-4fa71c05bc99", "generation": 1}, "family": "batch",
		"payload": map[string]any{"tail_bytes": 4096},
	}
	raw, _ := json.Marshal(read)
	cmdFile := filepath.Join(dir, "read-logs.json")
	if err := os.WriteFile(cmdFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := ctl(operatorKey, "append", "alpha-k8s", "--file", cmdFile); err == nil || !strings.Contains(err.Error(), "403 forbidden") {
		t.Fatalf("an operator key appended: %s %v", out, err)
	}
	if out, err := ctl(operatorKey, "rebind", "alpha-k8s", "--unbind", "--reason", "takeover"); err == nil || !strings.Contains(err.Error(), "403 forbidden") {
		t.Fatalf("an operator key rebound: %s %v", out, err)
	}
	if out, err := ctl(operatorKey, "plan", "--project", "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9", "--environment", "alpha-k8s", "--demand", "cpu=1000"); err == nil || !strings.Contains(err.Error(), "403 forbidden") {
		t.Fatalf("an operator key planned: %s %v", out, err)
	}
	if out, err := ctl(serviceKey, "append", "alpha-k8s", "--file", cmdFile); err != nil || !strings.Contains(out, `"sequence": 1`) {
		t.Fatalf("append with the service key: %s %v", out, err)
	}

	// The Runtime's side, over the protocol.
	c := executiontest.Client{Base: base}
	envKey, inst := files.EnvironmentKeys["alpha-k8s"], "alpha-k8s-runtime-1"
	pulled := executiontest.Decode[siteprotocol.Pull](t, c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=0", envKey, inst, nil))
	if out, err := ctl(operatorKey, "environments"); err != nil || !regexpLine(out, `alpha-k8s\s+alpha\s+\S+\s+1\s+0\s+1\s+alpha-k8s-runtime-1\s`) {
		t.Fatalf("environments before the result (lag 1): %s %v", out, err)
	}
	cmd, err := siteprotocol.ParsePulled(pulled.Commands[0])
	if err != nil {
		t.Fatal(err)
	}
	_, result, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonRead, "read the log",
		siteprotocol.ReadLogsDetail{Container: "main", ContentBase64: base64.StdEncoding.EncodeToString([]byte(secret))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	executiontest.Want(t, c.Call(t, http.MethodPut, "/site/v1/streams/alpha-k8s/commands/1/result", envKey, inst, result), http.StatusOK, "")

	out, err := ctl(operatorKey, "environments")
	if err != nil || !regexpLine(out, `alpha-k8s\s+alpha\s+\S+\s+1\s+1\s+0\s+alpha-k8s-runtime-1\s`) {
		t.Fatalf("environments after the result (lag 0): %s %v", out, err)
	}
	for _, output := range []string{"table", "json"} {
		out, err := ctl(operatorKey, "commands", "alpha-k8s", "-o", output)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, secret) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(secret))) || strings.Contains(out, "private log") {
			t.Fatalf("ctl commands -o %s shows the member's log: %s", output, out)
		}
		if !strings.Contains(out, "read-logs") || !strings.Contains(out, "succeeded") {
			t.Fatalf("ctl commands -o %s lacks the command or its outcome: %s", output, out)
		}
	}
	out, _ = ctl(operatorKey, "commands", "alpha-k8s")
	if !strings.Contains(out, fmt.Sprintf("result.detail.content=%dB/sha256:%s", len(secret), digestPrefix(secret))) {
		t.Fatalf("the table does not show the log content's size and digest: %s", out)
	}
	out, _ = ctl(operatorKey, "commands", "alpha-k8s", "--outcome", "pending")
	if strings.Contains(out, "read-logs") {
		t.Fatalf("an acknowledged command listed as pending: %s", out)
	}

	// The Runtime stops and reports it; its next pull clears it.
	stop, _ := json.Marshal(siteprotocol.StopReport{Reason: siteprotocol.StopJournalIntegrity, Sequence: 1, RuntimeVersion: "v1.4.0", Message: "delivery.sqlite fails its checksum"})
	executiontest.Want(t, c.Call(t, http.MethodPost, "/site/v1/streams/alpha-k8s/stop", envKey, inst, stop), http.StatusOK, "")
	if out, err := ctl(operatorKey, "environments"); err != nil || !strings.Contains(out, "journal-integrity at 1 (v1.4.0") {
		t.Fatalf("environments after the stop report: %s %v", out, err)
	}
	c.Call(t, http.MethodGet, "/site/v1/streams/alpha-k8s/commands?after=1", envKey, inst, nil)
	if out, err := ctl(operatorKey, "environments"); err != nil || strings.Contains(out, "journal-integrity") {
		t.Fatalf("environments after the Runtime pulled again: %s %v", out, err)
	}
	if out, err := ctl(operatorKey, "bindings", "alpha-k8s"); err != nil || !strings.Contains(out, "bound") || !strings.Contains(out, inst) {
		t.Fatalf("bindings: %s %v", out, err)
	}
	// Completion of environment IDs asks the server.
	if out, err := run(operatorKey, "__complete", "ctl", "--server", base, "commands", "al"); err != nil || !regexpLine(out, `alpha-k8s$`) {
		t.Fatalf("completion of an environment ID: %s %v", out, err)
	}
	if out, _ := run(operatorKey, "__complete", "ctl", "--server", base, "commands", "zz"); strings.Contains(out, "alpha-k8s") {
		t.Fatalf("completion offered an ID without the prefix: %s", out)
	}
}

func regexpLine(out, pattern string) bool {
	return regexp.MustCompile(`(?m)^` + pattern).MatchString(out)
}

func digestPrefix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}
