package githost

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// WorkTree is a local Git repository a test builds content in before
// pushing it to the host (a scratch repository of the test, never a
// checkout under test).
type WorkTree struct {
	h *Host
	// Dir is its directory.
	Dir string
}

// NewWorkTree initialises an empty repository on branch main, with
// git-lfs's filters installed in it.
func (h *Host) NewWorkTree() *WorkTree {
	h.tb.Helper()
	w := &WorkTree{h: h, Dir: h.tb.TempDir()}
	w.Git("init", "--quiet", "--initial-branch=main")
	w.Git("lfs", "install", "--local", "--skip-repo")
	w.Git("config", "lfs.locksverify", "false")
	return w
}

// Git runs git in the work tree and returns its standard output; a
// failure fails the test.
func (w *WorkTree) Git(args ...string) string {
	w.h.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=Metallo Tests", "-c", "user.email=tests@metallo.invalid",
		"-c", "core.hooksPath=/dev/null", "-c", "filter.lfs.clean=git-lfs clean -- %f", "-c", "filter.lfs.smudge=git-lfs smudge -- %f",
		"-c", "filter.lfs.process=git-lfs filter-process", "-c", "filter.lfs.required=true"}, args...)...)
	cmd.Dir, cmd.Env = w.Dir, w.h.GitEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.h.tb.Fatalf("githost: git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// Write writes a file of the work tree (directories created).
func (w *WorkTree) Write(path string, content []byte) {
	w.h.tb.Helper()
	p := filepath.Join(w.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.h.tb.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		w.h.tb.Fatal(err)
	}
}

// Symlink makes path a symbolic link to target.
func (w *WorkTree) Symlink(path, target string) {
	w.h.tb.Helper()
	p := filepath.Join(w.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.h.tb.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		w.h.tb.Fatal(err)
	}
}

// TrackLFS stores files matching pattern in LFS (.gitattributes).
func (w *WorkTree) TrackLFS(pattern string) { w.Git("lfs", "track", pattern) }

// Commit adds everything and commits; it returns the commit hash.
func (w *WorkTree) Commit(message string) string {
	w.Git("add", "--all")
	w.Git("commit", "--quiet", "--allow-empty", "-m", message)
	return strings.TrimSpace(w.Git("rev-parse", "HEAD"))
}

// Push pushes the current branch to repo's main as the administrator;
// with lfs its LFS objects first. Without lfs, pointer files whose
// objects exist nowhere reach the host as they are.
func (w *WorkTree) Push(repo Repo, lfs bool) {
	w.h.tb.Helper()
	u, _ := url.Parse(repo.URL)
	u.User = url.UserPassword(w.h.Admin.Name, w.h.Admin.Password)
	if lfs {
		w.Git("lfs", "push", "--all", u.String())
	}
	w.Git("push", "--quiet", "--no-verify", u.String(), "HEAD:refs/heads/main")
}
