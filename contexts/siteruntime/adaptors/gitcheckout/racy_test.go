package gitcheckout

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// racyCheckout commits README.md and the LFS file weights.bin into a new
// repository (git-lfs's clean filter runs for real) and leaves every
// index entry "racily clean": the stat data matches the files, and the
// files' mtime equals the index file's. It returns the working tree, the
// commit and the git the checkout runs with.
func racyCheckout(t *testing.T) (string, string, *git) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := newGit(Options{LFS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	ctx := context.Background()
	must := func(args ...string) string {
		t.Helper()
		r := g.run(ctx, dir, []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org"}, args...)
		if r.err != nil {
			t.Fatal(r.describe())
		}
		return strings.TrimSpace(r.stdout)
	}
	weights := make([]byte, 256<<10)
	if _, err := rand.Read(weights); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{".gitattributes": []byte("*.bin filter=lfs diff=lfs merge=lfs -text\n"),
		"README.md": []byte("# model v1\n"), "weights.bin": weights} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must("init", "--quiet", "--template=", "--initial-branch=checkout")
	must("add", "-A")
	must("commit", "--quiet", "-m", "model v1")
	commit := must("rev-parse", "HEAD")
	must("checkout", "--quiet", "--detach", commit)
	if pointer := must("cat-file", "blob", "HEAD:weights.bin"); !strings.HasPrefix(pointer, "version https://git-lfs") {
		t.Fatalf("weights.bin is not committed as an LFS pointer: %.80q", pointer)
	}
	// The files and then the index at one fixed time: the stat data the
	// refresh records matches, and the files are not older than the index.
	racy := time.Unix(1_700_000_000, 0)
	for _, name := range []string{".gitattributes", "README.md", "weights.bin"} {
		if err := os.Chtimes(filepath.Join(dir, name), racy, racy); err != nil {
			t.Fatal(err)
		}
	}
	must("update-index", "-q", "--refresh")
	if err := os.Chtimes(filepath.Join(dir, ".git", "index"), racy, racy); err != nil {
		t.Fatal(err)
	}
	return dir, commit, g
}

// ReadOnlyView bind-mounts dir read-only at a new path, unmounted when
// the test ends (the tests run as root, who ignores permission bits: only
// a read-only mount refuses writes, as the serving Pod's volume does).
// Exported for the package's external tests.
func ReadOnlyView(t *testing.T, dir string) string {
	t.Helper()
	view := t.TempDir()
	if out, err := exec.Command("mount", "--bind", dir, view).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", view).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", view, err, out)
		}
	})
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", view).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(view, "probe"), nil, 0o644); err == nil {
		t.Fatal("the read-only view accepts writes")
	}
	return view
}

// A racily clean LFS entry makes git status run the clean filter, which
// writes to .git/lfs/tmp: on a read-only view the verification fails
// (the failure workspace-verify crash-looped on). After settleIndex — what
// the writable checkout does before it is renamed into place — the same
// read-only verification passes, and a changed file, a changed LFS file
// and a pointer left in place are still refused
// (docs/site-runtime.md#workspace-checkout-metallo-workspace-init).
func TestARacyIndexVerifiesReadOnlyOnceSettled(t *testing.T) {
	ctx := context.Background()
	t.Run("racy: the read-only verification needs to write", func(t *testing.T) {
		dir, commit, g := racyCheckout(t)
		out := verifyTree(ctx, g, Options{Commit: commit, LFS: true}, ReadOnlyView(t, dir))
		if out == nil || !strings.Contains(out.Message, "read-only file system") {
			t.Fatalf("want git status to fail on .git/lfs/tmp, got %+v", out)
		}
	})
	settled := func(t *testing.T) (string, string, *git) {
		dir, commit, g := racyCheckout(t)
		if err := settleIndex(ctx, g, dir); err != nil {
			t.Fatal(err)
		}
		return dir, commit, g
	}
	t.Run("settled: verifies read-only", func(t *testing.T) {
		dir, commit, g := settled(t)
		if out := verifyTree(ctx, g, Options{Commit: commit, LFS: true}, ReadOnlyView(t, dir)); out != nil {
			t.Fatalf("%+v", out)
		}
	})
	for name, c := range map[string]struct {
		file, content string
		reason        siteprotocol.Reason
		says          string
	}{
		"settled: a changed file is refused":     {"README.md", "# model v2\n", siteprotocol.ReasonNativeError, "differs"},
		"settled: a changed LFS file is refused": {"weights.bin", "other weights", siteprotocol.ReasonNativeError, ""},
		"settled: a pointer left is refused":     {"weights.bin", "", siteprotocol.ReasonLFSMissing, "LFS pointer"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, commit, g := settled(t)
			content := c.content
			if content == "" { // the committed pointer
				r := g.run(ctx, dir, nil, "cat-file", "blob", "HEAD:"+c.file)
				if r.err != nil {
					t.Fatal(r.describe())
				}
				content = r.stdout
			}
			if err := os.WriteFile(filepath.Join(dir, c.file), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			out := verifyTree(ctx, g, Options{Commit: commit, LFS: true}, ReadOnlyView(t, dir))
			if out == nil || out.Reason != c.reason || !strings.Contains(out.Message, c.says) {
				t.Fatalf("want %s (%q), got %+v", c.reason, c.says, out)
			}
		})
	}
}

// A checkout an earlier workspace-init left with racily clean entries (a
// past time) is accepted by the next writable run, whose git status
// re-hashes them and rewrites the index, now later than the files: the
// read-only verification after it passes.
func TestAnAcceptedRacyCheckoutIsSettledWhileWritable(t *testing.T) {
	ctx := context.Background()
	dir, commit, _ := racyCheckout(t)
	if err := writeRecord(dir, record{Commit: commit, LFS: true, LFSObjects: 1}); err != nil {
		t.Fatal(err)
	}
	// The host is never contacted: the checkout at Dest is verified.
	o := Options{URL: "http://127.0.0.1:9/lab/model.git", Commit: commit, LFS: true, Dest: dir, SizeLimit: 1 << 30}
	if out := Run(ctx, o); !out.Verified || out.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("the writable run: %+v", out)
	}
	o.Dest, o.VerifyOnly = filepath.Join(ReadOnlyView(t, filepath.Dir(dir)), filepath.Base(dir)), true
	if out := Run(ctx, o); !out.Verified || out.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("--verify-only on a read-only mount: %+v", out)
	}
}
