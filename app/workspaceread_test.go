package app

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// workspace-read writes exactly its one line to standard output and
// nothing to standard error, exit 0, for a read and for a refusal alike
// (the reader Pod's log is the line the Runtime parses). The reads
// themselves are tested in contexts/siteruntime/adaptors/workspaceread.
func TestWorkspaceReadWritesOnlyItsLine(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "out.txt"), []byte("hello\x00world"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "etc")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path    string
		outcome siteprotocol.Outcome
		content string
	}{
		{"out.txt", siteprotocol.OutcomeSucceeded, "hello"},
		{"etc/passwd", siteprotocol.OutcomeRefused, ""},
		{"../x", siteprotocol.OutcomeRefused, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), []string{"workspace-read", "--root", ws, "--max-bytes", "5", "--path", c.path}, Env{Stdout: &stdout, Stderr: &stderr})
		if code != 0 || stderr.Len() != 0 {
			t.Fatalf("%s: exit %d, stderr %q", c.path, code, stderr.String())
		}
		r, content, err := domain.ParseFileRead(stdout.Bytes(), 5)
		if err != nil || r.Outcome != c.outcome || string(content) != c.content {
			t.Fatalf("%s: %q → %+v %q %v", c.path, stdout.String(), r, content, err)
		}
	}
	if code, stderr := runMain(t, nil, "workspace-read", "--path", "x"); code == 0 || stderr == "" {
		t.Fatalf("without --root: exit %d, %s", code, stderr)
	}
}
