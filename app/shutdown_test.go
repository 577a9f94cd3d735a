package app

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// TestSIGTERMAnswersAWaitingLongPollAtOnceAndTheProcessExits runs the real
// binary (`serve --role provisioning,execution`) on each engine, opens a
// Runtime's long poll of 30 s on an empty stream, waits for the event that
// it is waiting (the pull bound the stream), and sends the process
// SIGTERM: the poll is answered 200 with an empty page and the process
// exits with status 0 — both before the poll's own wait would have ended
// (an event of the test: a timer of the wait started before the poll was
// sent, so it ends no later than the server's). The stop logs one info line
// (API server stopped) and no warning or error
// (docs/operations.md#stopping-and-rolling-updates).
func TestSIGTERMAnswersAWaitingLongPollAtOnceAndTheProcessExits(t *testing.T) {
	bin := testsetup.Binary(t)
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}})
			provURL, execURL := "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "sqlite:"+filepath.Join(dir, "execution.sqlite")
			if engine == "postgres" {
				provURL, execURL = dbtest.NewPostgres(t), dbtest.NewPostgres(t)
			}
			p := startServed(t, bin, "--role", "provisioning,execution", "--migrate", "--keys-file", files.KeysFile,
				"--environments-file", files.EnvironmentsFile, "--resource-owner", "in-process",
				"--provisioning-database-url", provURL, "--execution-database-url", execURL,
				"--waldur-instance", waldurInstance)
			const installation = "inst-sigterm-1"
			get := func(path string) (*http.Response, []byte, error) {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.base+path, nil)
				if err != nil {
					return nil, nil, err
				}
				req.Header.Set("Authorization", "Bearer "+files.EnvironmentKeys["alpha-k8s"])
				req.Header.Set(siteprotocol.InstallationHeader, installation)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return nil, nil, err
				}
				defer func() { _ = resp.Body.Close() }()
				raw, err := io.ReadAll(resp.Body)
				return resp, raw, err
			}

			type answer struct {
				status int
				body   []byte
				err    error
			}
			polled := make(chan answer, 1)
			waitEnd := time.After(30 * time.Second) // started before the poll: it ends no later than the server's wait
			go func() {
				resp, raw, err := get("/site/v1/streams/alpha-k8s/commands?after=0&wait=30")
				a := answer{body: raw, err: err}
				if resp != nil {
					a.status = resp.StatusCode
				}
				polled <- a
			}()
			// The event that the poll waits: it bound the stream (a pull
			// binds it, then reads, then waits for an append).
			for bound := false; !bound; {
				select {
				case a := <-polled:
					t.Fatalf("the poll was answered before the signal: %d %s %v", a.status, a.body, a.err)
				case <-waitEnd:
					t.Fatal("the poll never bound the stream")
				default:
				}
				_, raw, err := get("/site/v1/streams/alpha-k8s")
				var st siteprotocol.StreamState
				if err == nil && json.Unmarshal(raw, &st) == nil && st.InstallationID == installation {
					bound = true
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
			signalled := len(p.logLines())
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- p.exit() }()

			var a answer
			select {
			case a = <-polled:
			case <-waitEnd:
				t.Fatal("the waiting poll was not answered before its wait would have ended")
			}
			var page siteprotocol.Pull
			if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil || len(page.Commands) != 0 {
				t.Fatalf("the waiting poll answered %d %s %v, want 200 and an empty page", a.status, a.body, a.err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("the process exited with %v:\n%s", err, p.logText())
				}
			case <-waitEnd:
				t.Fatalf("the process did not exit before the poll's wait would have ended:\n%s", p.logText())
			}

			stopped := 0
			for _, line := range p.logLines()[signalled:] {
				var e struct {
					Level string `json:"level"`
					Msg   string `json:"msg"`
				}
				if json.Unmarshal([]byte(line), &e) != nil {
					continue
				}
				if e.Msg == "API server stopped" && e.Level == "info" {
					stopped++
				}
				if e.Level == "warn" || e.Level == "error" {
					t.Errorf("the stop logged %s", line)
				}
			}
			if stopped != 1 {
				t.Errorf("the stop logged %d info lines API server stopped, want 1:\n%s", stopped, strings.Join(p.logLines()[signalled:], "\n"))
			}
		})
	}
}
