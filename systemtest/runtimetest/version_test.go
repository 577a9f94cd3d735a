package runtimetest

import (
	"bufio"
	"database/sql"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// buildInfoLabels scrapes addr's /metrics and returns the labels of its
// metallo_build_info series (whose value must be 1).
func buildInfoLabels(t *testing.T, addr string) map[string]string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		labels, ok := strings.CutPrefix(sc.Text(), "metallo_build_info{")
		if !ok {
			continue
		}
		if !strings.HasSuffix(labels, "} 1") {
			t.Fatalf("metallo_build_info is not 1: %s", sc.Text())
		}
		out := map[string]string{}
		for _, m := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(labels, -1) {
			out[m[1]] = m[2]
		}
		return out
	}
	t.Fatalf("no metallo_build_info on %s/metrics (%v)", addr, sc.Err())
	return nil
}

// recordedVersion reads the execution role's record of the environment's
// Runtime version from its database file (read-only, beside the running
// server), with the installation the stream is bound to.
func recordedVersion(t *testing.T, e *env) (version, installation, bound string, ok bool) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.site.Dir, "execution.sqlite")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.QueryRow(`SELECT v.version, v.installation_id, s.installation_id FROM runtime_versions v JOIN streams s USING (environment) WHERE v.environment = ?`,
		e.site.Environment).Scan(&version, &installation, &bound)
	if err == sql.ErrNoRows {
		return "", "", "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return version, installation, bound, true
}

// The Runtime's pulls carry its build's version (Metallo-Runtime-Version),
// and the execution role records it for the environment with the
// installation that pulled: the version recorded is the one the Runtime's
// own /metrics names in metallo_build_info. A read-only `runtime check`
// records nothing (docs/site-protocol.md#the-runtimes-version).
func TestTheExecutionRoleRecordsTheVersionTheRuntimesPullsCarry(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	if out, err := e.rt.Check(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if v, _, _, ok := recordedVersion(t, e); ok {
		t.Fatalf("a read-only check recorded the version %q", v)
	}
	p := e.start(t, "")
	waitMetric(t, p, "metallo_runtime_acknowledged_sequence", 1)
	addr, err := harness.AdminAddr(p)
	if err != nil {
		t.Fatal(err)
	}
	build := buildInfoLabels(t, addr)
	if build["version"] == "" || build["revision"] == "" || !strings.HasPrefix(build["go_version"], "go") {
		t.Fatalf("metallo_build_info labels %v", build)
	}
	version, installation, bound, ok := recordedVersion(t, e)
	if !ok || version != build["version"] || installation == "" || installation != bound {
		t.Fatalf("recorded version %q of installation %q (stream bound to %q, recorded %v); want %q of the bound installation",
			version, installation, bound, ok, build["version"])
	}
}
