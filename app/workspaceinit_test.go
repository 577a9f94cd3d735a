package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// workspace-init refuses what no checkout can be made from, writing the
// outcome (invalid-payload) where the termination message is read, and
// names the flag it cannot run without. The checkouts themselves are
// tested against a real Git host in contexts/siteruntime/adaptors/gitcheckout.
func TestWorkspaceInitRefusesWhatNoCheckoutCanBeMadeFrom(t *testing.T) {
	dir := t.TempDir()
	outcome := filepath.Join(dir, "termination-log")
	base := []string{"workspace-init", "--url", "https://git.example.org/lab/model.git", "--commit", strings.Repeat("ab", 20),
		"--dest", filepath.Join(dir, "ws", "repo"), "--size-limit", "1048576", "--outcome-file", outcome}
	for name, args := range map[string][]string{
		"a short commit":          with(base, "--commit", "abc123"),
		"credentials in the URL":  with(base, "--url", "https://u:p@git.example.org/lab/model.git"),
		"plain http off loopback": with(base, "--url", "http://git.example.org/lab/model.git"),
		"no size limit":           without(base, "--size-limit"),
		"a relative destination":  with(base, "--dest", "ws/repo"),
		"no workspace":            base, // dir/ws does not exist
	} {
		_ = os.Remove(outcome)
		code, stderr := runMain(t, nil, args...)
		b, err := os.ReadFile(outcome)
		if err != nil {
			t.Fatalf("%s: no outcome (exit %d, %s)", name, code, stderr)
		}
		out, err := domain.ParseCheckoutOutcome(b)
		if code == 0 || err != nil || out.Reason != siteprotocol.ReasonInvalidPayload || out.Outcome != siteprotocol.OutcomeRefused {
			t.Errorf("%s: exit %d, outcome %s (%v)", name, code, b, err)
		}
	}
	if code, stderr := runMain(t, nil, with(base, "--timeout", "0s")...); code == 0 || !strings.Contains(stderr, "--timeout") {
		t.Errorf("--timeout 0: exit %d, %s", code, stderr)
	}
	if code, stderr := runMain(t, map[string]string{"METALLO_OUTCOME_FILE": filepath.Join(dir, "absent", "x")}, without(base, "--outcome-file")...); code == 0 || !strings.Contains(stderr, "METALLO_OUTCOME_FILE") && !strings.Contains(stderr, "outcome-file") {
		t.Errorf("an unwritable outcome file: exit %d, %s", code, stderr)
	}
}
