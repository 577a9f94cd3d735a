package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// checkout narrates `metallo workspace-init`, the program of an Attempt's
// helper Pod, run here as a process against a public repository that
// git http-backend serves on loopback (plain http, no credential, no LFS:
// the batch prepare above checked a private repository out over HTTPS
// with LFS and a scoped token, in the helper Pod): what the batch Run does
// not show, a second run that verifies a complete checkout without
// fetching, and a commit whose link leaves the tree, refused.
func (d *demo) checkout(ctx context.Context) error {
	d.section("metallo workspace-init, the helper Pod's program, run here as a process: a verified replay and a link out of the tree")
	root := d.path("git")
	bare, work := filepath.Join(root, "srv", "model.git"), filepath.Join(root, "work")
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=Demo", "-c", "user.email=demo@metallo.invalid", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		return err
	}
	if _, err := git(root, "init", "--quiet", "--bare", bare); err != nil {
		return err
	}
	if _, err := git(root, "init", "--quiet", work); err != nil {
		return err
	}
	commit := func(message string, files map[string]string, links map[string]string) (string, error) {
		for name, content := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
				return "", err
			}
		}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
				return "", err
			}
		}
		if _, err := git(work, "add", "--all"); err != nil {
			return "", err
		}
		if _, err := git(work, "commit", "--quiet", "-m", message); err != nil {
			return "", err
		}
		return git(work, "rev-parse", "HEAD")
	}
	exact, err := commit("train v1", map[string]string{"train.py": "print('epoch 1')\n", "README.md": "# model\n"}, map[string]string{"readme": "README.md"})
	if err != nil {
		return err
	}
	if _, err := commit("train v2", map[string]string{"train.py": "print('epoch 2')\n"}, nil); err != nil {
		return err
	}
	escape, err := commit("a link out of the tree", nil, map[string]string{"secrets": "../../../etc"})
	if err != nil {
		return err
	}
	if _, err := git(work, "push", "--quiet", bare, "HEAD:refs/heads/main"); err != nil {
		return err
	}
	execPath, err := git(root, "--exec-path")
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &cgi.Handler{Path: filepath.Join(execPath, "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1"}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	url := "http://" + l.Addr().String() + "/model.git"
	d.say("a repository at %s (git http-backend on loopback): main is at \"train v2\"; the Run asks for \"train v1\", %s, which is no branch head", url, exact[:12])

	workspace := d.path("workspace")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return err
	}
	initArgs := func(commit string) []string {
		return []string{"workspace-init", "--url", url, "--commit", commit, "--dest", filepath.Join(workspace, "repo"),
			"--size-limit", fmt.Sprint(64 << 20), "--timeout", "1m", "--outcome-file", d.path("termination-log")}
	}
	run := func(commit string) (domain.CheckoutOutcome, error) {
		out, err := exec.CommandContext(ctx, d.bin, initArgs(commit)...).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return domain.CheckoutOutcome{}, fmt.Errorf("metallo workspace-init: %v: %s", err, out)
		}
		b, rerr := os.ReadFile(d.path("termination-log"))
		if rerr != nil {
			return domain.CheckoutOutcome{}, fmt.Errorf("no outcome: %v (%s)", rerr, out)
		}
		return domain.ParseCheckoutOutcome(b)
	}
	first, err := run(exact)
	if err != nil {
		return err
	}
	if first.Outcome != siteprotocol.OutcomeSucceeded || first.Commit != exact {
		return fmt.Errorf("workspace-init: %+v", first)
	}
	head, err := git(filepath.Join(workspace, "repo"), "rev-parse", "HEAD")
	if err != nil || head != exact {
		return fmt.Errorf("the checkout's HEAD is %q (%v), want %s", head, err, exact)
	}
	if _, err := git(filepath.Join(workspace, "repo"), "symbolic-ref", "-q", "HEAD"); err == nil {
		return errors.New("the checkout's HEAD is a branch, not detached")
	}
	d.say("metallo workspace-init --url %s --commit %s… --dest %s --size-limit %d --outcome-file %s",
		url, exact[:12], rel(filepath.Join(workspace, "repo")), 64<<20, rel(d.path("termination-log")))
	d.say("outcome (the Pod's termination message): %s, %s fetch, %d bytes; HEAD detached at %s", first.Outcome, first.Fetch, first.Bytes, head[:12])
	again, err := run(exact)
	if err != nil {
		return err
	}
	if !again.Verified {
		return fmt.Errorf("the second run fetched again: %+v", again)
	}
	d.say("run again (a replayed prepare): %s, verified the complete checkout, nothing fetched", again.Outcome)
	if err := os.RemoveAll(filepath.Join(workspace, "repo")); err != nil {
		return err
	}
	bad, err := run(escape)
	if err != nil {
		return err
	}
	if bad.Reason != siteprotocol.ReasonSymlinkEscape {
		return fmt.Errorf("a link out of the tree: %+v", bad)
	}
	if entries, _ := os.ReadDir(workspace); len(entries) != 0 {
		return fmt.Errorf("a refused checkout left %d entries in the workspace", len(entries))
	}
	d.say("the commit with a link out of the tree: %s / %s (%s); the workspace is left empty", bad.Outcome, bad.Reason, bad.Message)
	return nil
}
