package gitcheckout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// git runs the git CLI in a closed environment: no system or global
// configuration, a private empty HOME, no terminal prompts, no hooks, no
// submodules, no protocol but https (http only to loopback without a
// credential), the host's CA bundle, and the credential helper as the only
// source of credentials — all given as GIT_CONFIG_* variables, so nothing
// of it is written into the checkout's .git/config.
type git struct {
	bin  string
	home string
	env  []string
}

// searchPath is where git and git-lfs are looked for after PATH: images
// install git-lfs under /usr/local/bin, which a minimal PATH lacks.
const searchPath = "/usr/local/bin:/usr/bin:/bin"

func newGit(o Options) (*git, error) {
	path := os.Getenv("PATH")
	if path == "" {
		path = searchPath
	} else {
		path += ":" + searchPath
	}
	bin := o.Git
	if bin == "" {
		for _, dir := range filepath.SplitList(path) {
			if fi, err := os.Stat(filepath.Join(dir, "git")); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				bin = filepath.Join(dir, "git")
				break
			}
		}
		if bin == "" {
			return nil, fmt.Errorf("git is not installed (looked in %s)", path)
		}
	}
	home, err := os.MkdirTemp("", "metallo-workspace-init-")
	if err != nil {
		return nil, fmt.Errorf("a private HOME for git: %w", err)
	}
	config := [][2]string{
		{"credential.helper", ""}, // forget every helper configured elsewhere
		{"core.hooksPath", "/dev/null"},
		{"core.symlinks", "true"},
		{"core.fsmonitor", "false"},
		{"core.askPass", ""},
		{"submodule.recurse", "false"},
		{"fetch.recurseSubmodules", "false"},
		{"protocol.allow", "never"},
		{"protocol.https.allow", "always"},
		{"http.sslVerify", "true"},
		{"advice.detachedHead", "false"},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
		{"lfs.locksverify", "false"},
		{"lfs.skipdownloaderrors", "false"},
		{"lfs.fetchrecentalways", "false"},
		{"lfs.fetchrecentrefsdays", "0"},
		{"lfs.fetchrecentcommitsdays", "0"},
	}
	if strings.HasPrefix(o.URL, "http:") {
		config = append(config, [2]string{"protocol.http.allow", "always"})
	}
	if o.CAFile != "" {
		config = append(config, [2]string{"http.sslCAInfo", o.CAFile})
	}
	if o.CredentialDir != "" {
		config = append(config, [2]string{"credential.helper", o.HelperCommand})
	}
	if o.LFS {
		config = append(config,
			[2]string{"filter.lfs.clean", "git-lfs clean -- %f"},
			[2]string{"filter.lfs.smudge", "git-lfs smudge -- %f"},
			[2]string{"filter.lfs.process", "git-lfs filter-process"},
			[2]string{"filter.lfs.required", "true"})
	} else {
		// Without lfs, pointer files stay as they are committed.
		config = append(config, [2]string{"filter.lfs.required", "false"}, [2]string{"filter.lfs.smudge", "cat"},
			[2]string{"filter.lfs.clean", "cat"}, [2]string{"filter.lfs.process", ""})
	}
	env := []string{
		"PATH=" + path, "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"LC_ALL=C", "LANG=C", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ASKPASS=", "SSH_ASKPASS=", "GIT_LFS_SKIP_PUSH=1", "GIT_LFS_PROGRESS=", "GIT_LFS_FORCE_PROGRESS=0",
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(config)),
	}
	for i, kv := range config {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	// Proxies configured for the Pod apply to Git too.
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return &git{bin: bin, home: home, env: env}, nil
}

func (g *git) close() { _ = os.RemoveAll(g.home) }

// result is one git command's end.
type result struct {
	args           []string
	stdout, stderr string
	err            error
	// oversize is true when the command was stopped because the checkout
	// passed the size limit; size is what was measured then.
	oversize bool
	size     int64
	// ctxErr is set when the deadline ended the command.
	ctxErr error
}

func (r result) describe() string {
	msg := strings.TrimSpace(r.stderr)
	if len(msg) > 1500 {
		msg = "…" + msg[len(msg)-1500:]
	}
	if msg == "" && r.err != nil {
		msg = r.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(r.args, " "), msg)
}

// run runs git with args in dir.
func (g *git) run(ctx context.Context, dir string, extraEnv []string, args ...string) result {
	return g.runWatched(ctx, dir, nil, extraEnv, args...)
}

// runWatched runs git in its own process group; with w, the checkout's
// size is measured every w.interval and the whole group is killed when it
// passes the limit.
func (g *git) runWatched(ctx context.Context, dir string, w *watch, extraEnv []string, args ...string) result {
	cmd := exec.Command(g.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, g.env...), extraEnv...)
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r := result{args: args}
	if err := cmd.Start(); err != nil {
		r.err = err
		return r
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var tick <-chan time.Time
	if w != nil {
		t := time.NewTicker(w.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-done:
			r.err, r.stdout, r.stderr = err, stdout.String(), stderr.String()
			// A child left behind (git-lfs, git-remote-https) goes too.
			kill()
			if w != nil && r.err == nil {
				if size, err := w.measure(); err == nil && size > w.limit {
					r.err, r.oversize, r.size = errors.New("over the size limit"), true, size
				}
			}
			return r
		case <-ctx.Done():
			kill()
			waited := <-done
			r.err, r.ctxErr, r.stdout, r.stderr = fmt.Errorf("%w (git: %v)", ctx.Err(), waited), ctx.Err(), stdout.String(), stderr.String()
			return r
		case <-tick:
			size, err := w.measure()
			if err == nil && size > w.limit {
				kill()
				waited := <-done
				r.err, r.oversize, r.size, r.stdout, r.stderr = fmt.Errorf("over the size limit (git: %v)", waited), true, size, stdout.String(), stderr.String()
				return r
			}
		}
	}
}

// fetchRetrying runs a fetch, again with capped backoff while it fails on
// the transport (a connection reset, a 5xx answer) and the deadline
// allows; any other failure is returned at once.
func (g *git) fetchRetrying(ctx context.Context, dir string, w *watch, args ...string) result {
	steps := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 5 * time.Second}
	for {
		r := g.runWatched(ctx, dir, w, nil, args...)
		if r.err == nil || r.oversize || r.ctxErr != nil || credentialRefused(r.stderr) || repositoryMissing(r.stderr) || !transportFailed(r.stderr) {
			return r
		}
		pause := steps.Step()
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < pause {
			return r
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return r
		case <-t.C:
		}
	}
}
