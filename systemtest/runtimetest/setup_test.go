package runtimetest

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/systemtest/harness"
)

const (
	member    = "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80"
	project   = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"
	bindingID = "e41f0000-0000-4000-8000-000000000001"
)

func id(kind, n int) string { return fmt.Sprintf("%08x-%04x-4000-8000-%012x", n, kind, n) }

func envelope(n int, op siteprotocol.Operation) map[string]any {
	return map[string]any{"id": id(1, n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project}
}

// startCmd is a batch start (the stand-in native executor's command).
func startCmd(n int, env map[string]string) []byte {
	c := envelope(n, siteprotocol.OpStart)
	c["family"], c["run_id"], c["attempt_id"] = "batch", id(2, n), id(3, n)
	c["account_ref"] = map[string]any{"binding_id": bindingID, "generation": 1}
	p := map[string]any{"demand": map[string]int64{"cpu": 1000, "memory": 1 << 30}, "time_limit_seconds": 600, "argv": []string{"python", "train.py", fmt.Sprint(n)}}
	if env != nil {
		p["env"] = env
	}
	c["payload"] = p
	return marshal(c)
}

// bindCmd applies revision of the member binding.
func bindCmd(n int, revision int64) []byte {
	c := envelope(n, siteprotocol.OpBindMember)
	c["payload"] = map[string]any{"party_id": member, "namespace": "project-a", "account": siteprotocol.MemberAccount(member),
		"binding_id": bindingID, "revision": revision, "generation": 1}
	return marshal(c)
}

// unknownCmd names an operation outside the protocol.
func unknownCmd(n int) []byte {
	return marshal(map[string]any{"id": id(1, n), "operation": "teleport", "issued_at": "2026-11-29T10:00:00Z", "payload": map[string]any{"to": "mars"}})
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// env is one execution server with a proxy, and one installed Runtime.
type env struct {
	site *harness.Site
	rt   *harness.Runtime
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	site, err := harness.NewSite(bins.Metallo, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	if err := site.StartServer("execution.sqlite", ""); err != nil {
		t.Fatal(err)
	}
	rt, err := harness.NewRuntime(bins.Runtime, site, filepath.Join(dir, "runtime"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := rt.Install(); err != nil {
		t.Fatal(out, err)
	}
	return &env{site: site, rt: rt}
}

func (e *env) append(t *testing.T, cmds ...[]byte) {
	t.Helper()
	for _, c := range cmds {
		if _, err := e.site.Append(c); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) start(t *testing.T, failpoints string, extra ...string) *harness.Process {
	t.Helper()
	p, err := e.rt.Start(failpoints, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// waitAcknowledged waits until the server recorded a result for command id.
func (e *env) waitAcknowledged(t *testing.T, p *harness.Process, cmdID string) siteprotocol.CommandRecord {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := e.site.Command(cmdID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Result) > 0 {
			return rec
		}
		if p != nil && p.Exited() {
			t.Fatalf("the Runtime exited before %s was acknowledged:\n%s", cmdID, p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s not acknowledged within a minute", cmdID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkpoint reads the journal's checkpoint (the Runtime must not run).
func checkpoint(t *testing.T, dir string) domain.Checkpoint {
	t.Helper()
	j, err := journal.Open(t.Context(), dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	cp, err := j.Restore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// normalise closes a crashed journal set cleanly — the WAL is checkpointed
// into the main files and removed — as a backup or a clean shutdown leaves
// it.
func normalise(t *testing.T, dir string) {
	t.Helper()
	j, err := journal.Open(t.Context(), dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range domain.JournalFiles() {
		if _, err := os.Stat(filepath.Join(dir, f+"-wal")); err == nil {
			t.Fatalf("%s-wal left after a clean close", f)
		}
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := harness.Snapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// replaceDir makes dir hold exactly the files of from.
func replaceDir(t *testing.T, from, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	copyDir(t, from, dir)
}

var failpointLine = regexp.MustCompile(`failpoint ([a-z-]+): hit \d+, killing the process with SIGKILL`)

// killedAt returns the failpoint a killed Runtime died at.
func killedAt(p *harness.Process) string {
	if !p.Killed() {
		return ""
	}
	m := failpointLine.FindStringSubmatch(p.Output())
	if m == nil {
		return ""
	}
	return m[1]
}

// sqliteCheckpointTruncate checkpoints a live journal file's WAL into the
// main file from another connection (as any SQLite tool would).
func sqliteCheckpointTruncate(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, logFrames, done int
	if err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint %s: busy=%d err=%v", path, busy, err)
	}
}

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("%q does not contain %q", s, sub)
		}
	}
}

// waitMetric waits until the Runtime's admin listener reports value for
// series.
func waitMetric(t *testing.T, p *harness.Process, series string, value float64) {
	t.Helper()
	addr, err := harness.AdminAddr(p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		v, found, err := harness.Metric(addr, series)
		if err == nil && found && v == value {
			return
		}
		if p.Exited() {
			t.Fatalf("the Runtime exited while waiting for %s = %v:\n%s", series, value, p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (found %v, err %v) after a minute; want %v\n%s", series, v, found, err, value, p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func diffSnapshots(before, after map[string]string) string {
	return harness.SnapshotDiff(before, after)
}
