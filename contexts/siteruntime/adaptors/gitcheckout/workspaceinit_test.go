package gitcheckout_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/gitcheckout"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/gittest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
	"github.com/pharos-metallo/metallo/standins/githost"
	"github.com/pharos-metallo/metallo/standins/grantprovider"
)

const (
	memberID  = "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80"
	projectID = "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"
	runID     = "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10"
	attemptID = "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24"
	// limit is the size limit of the checkouts that must fit.
	limit = 64 << 20
)

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// fixture is the Git host with the test's repositories, the member's
// grant and the metallo binary.
type fixture struct {
	t        *testing.T
	host     *githost.Host
	bin      string
	member   githost.User
	provider *grantprovider.Provider
	grants   *grants.HTTP
	grant    domain.RepositoryGrant
	credDir  string

	model                 githost.Repo
	exact, head           string
	weights               []byte
	escape, dotgit, large githost.Repo
	bigPack, noLFS        githost.Repo
	escapeCommit          string
	dotgitCommit          string
	largeCommit           string
	bigPackCommit         string
	noLFSCommit           string
}

func newFixture(t *testing.T) *fixture {
	host := gittest.Start(t)
	f := &fixture{t: t, host: host, bin: testsetup.Binary(t)}
	lab := host.CreateUser("lab")
	f.member = host.CreateUser("member")
	push := func(name string, lfs bool, build func(w *githost.WorkTree)) (githost.Repo, string) {
		repo := host.CreateRepo(lab, name)
		host.AddReader(repo, f.member)
		w := host.NewWorkTree()
		build(w)
		commit := strings.TrimSpace(w.Git("rev-parse", "HEAD"))
		w.Push(repo, lfs)
		return repo, commit
	}
	// model: LFS weights, links that stay inside, and a later commit on
	// main, so the commit checked out is not a branch head.
	f.weights = random(t, 2<<20)
	f.model, f.head = push("model", true, func(w *githost.WorkTree) {
		w.TrackLFS("*.bin")
		w.Write("README.md", []byte("# model v1\n"))
		w.Write("train.py", []byte("print('train')\n"))
		w.Write("data/weights.bin", f.weights)
		w.Write("data/vocab.bin", random(t, 300<<10))
		w.Symlink("docs/readme", "../README.md")
		w.Symlink("latest", "data")
		w.Symlink("chain", "latest/vocab.bin")
		w.Symlink("dangling", "not/yet/there")
		f.exact = w.Commit("model v1")
		w.Write("README.md", []byte("# model v2\n"))
		w.Commit("model v2")
	})
	f.escape, f.escapeCommit = push("escape", false, func(w *githost.WorkTree) {
		w.Write("README.md", []byte("escape\n"))
		w.Symlink("sub/inner", "..")
		w.Symlink("data", "sub/inner/../../outside")
		w.Commit("a link leaving the tree through another link")
	})
	f.dotgit, f.dotgitCommit = push("dotgit", false, func(w *githost.WorkTree) {
		w.Write("README.md", []byte("dotgit\n"))
		w.Symlink("tools/hooks", "../.git/hooks")
		w.Commit("a link into .git")
	})
	f.large, f.largeCommit = push("large", true, func(w *githost.WorkTree) {
		w.TrackLFS("*.bin")
		w.Write("big.bin", random(t, 3<<20))
		w.Commit("3 MiB in LFS")
	})
	f.bigPack, f.bigPackCommit = push("bigpack", false, func(w *githost.WorkTree) {
		w.Write("blob.dat", random(t, 24<<20))
		w.Commit("24 MiB in the pack")
	})
	f.noLFS, f.noLFSCommit = push("nolfs", false, func(w *githost.WorkTree) {
		w.TrackLFS("*.bin")
		w.Write("README.md", []byte("its LFS object was never uploaded\n"))
		oid := sha256.Sum256([]byte("never uploaded"))
		w.Write("model.bin", []byte("version https://git-lfs.github.com/spec/v1\noid sha256:"+hex.EncodeToString(oid[:])+"\nsize 14\n"))
		w.Commit("a pointer without its object")
	})
	f.provider = grantprovider.New(t, host, map[string]githost.User{memberID: f.member})
	f.grants = grants.NewHTTP(grants.HTTPConfig{BaseURL: f.provider.URL, Bound: 10 * time.Second, BackoffInitial: 50 * time.Millisecond}, clock.System{})
	f.grant, f.credDir = f.issue(t, "workspace:"+attemptID)
	return f
}

// issue issues a grant through the HTTP adaptor and mounts it as the
// credential directory (a Secret's files, outside the workspace).
func (f *fixture) issue(t *testing.T, key string) (domain.RepositoryGrant, string) {
	t.Helper()
	g, err := f.grants.Issue(context.Background(), domain.GrantRequest{MemberID: memberID, ProjectID: projectID,
		RepositoryURL: f.model.URL, RunID: runID, AttemptID: attemptID, IdempotencyKey: key})
	if err != nil {
		t.Fatalf("issue the grant: %v", err)
	}
	return g, f.mount(t, g.Username, g.Token)
}

func (f *fixture) mount(t *testing.T, username, token string) string {
	dir := t.TempDir()
	for name, v := range map[string]string{"username": username, "token": token} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run is one workspace-init process.
type run struct {
	url, commit, credDir string
	lfs                  bool
	sizeLimit            int64
	timeout              time.Duration
	workspace            string // the workspace (dest's parent); a fresh one when empty
	// verifyOnly runs --verify-only without a credential (a serving Pod's
	// verification of its prepared workspace).
	verifyOnly bool
}

type ran struct {
	out       domain.CheckoutOutcome
	exit      int
	stderr    string
	workspace string
	dest      string
}

func (f *fixture) run(t *testing.T, r run) ran {
	t.Helper()
	if r.workspace == "" {
		r.workspace = t.TempDir()
	}
	if r.sizeLimit == 0 {
		r.sizeLimit = limit
	}
	if r.timeout == 0 {
		r.timeout = 2 * time.Minute
	}
	if r.credDir == "" {
		r.credDir = f.credDir
	}
	outcome := filepath.Join(t.TempDir(), "termination-log")
	dest := filepath.Join(r.workspace, "repo")
	args := []string{"workspace-init", "--url", r.url, "--commit", r.commit, "--dest", dest,
		"--size-limit", fmt.Sprint(r.sizeLimit), "--credential-dir", r.credDir, "--ca-file", f.host.CAFile,
		"--timeout", r.timeout.String(), "--outcome-file", outcome}
	if r.verifyOnly {
		args = []string{"workspace-init", "--url", r.url, "--commit", r.commit, "--dest", dest,
			"--size-limit", fmt.Sprint(r.sizeLimit), "--verify-only", "--timeout", r.timeout.String(), "--outcome-file", outcome}
	}
	if r.lfs {
		args = append(args, "--lfs")
	}
	cmd := exec.Command(f.bin, args...)
	// A Pod's environment: nothing of the test's git configuration.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	res := ran{stderr: stderr.String(), workspace: r.workspace, dest: dest}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("workspace-init: %v", err)
	}
	b, err := os.ReadFile(outcome)
	if err != nil {
		t.Fatalf("no outcome (exit %d): %v\n%s", res.exit, err, res.stderr)
	}
	if len(b) > domain.MaxTerminationMessageBytes {
		t.Errorf("the outcome is %d bytes, over the termination message's %d", len(b), domain.MaxTerminationMessageBytes)
	}
	if res.out, err = domain.ParseCheckoutOutcome(b); err != nil {
		t.Fatalf("outcome %s: %v", b, err)
	}
	return res
}

// succeeded checks a successful checkout of commit at r.dest.
func (f *fixture) succeeded(t *testing.T, r ran, commit string) {
	t.Helper()
	if r.exit != 0 || r.out.Outcome != siteprotocol.OutcomeSucceeded || r.out.Commit != commit {
		t.Fatalf("want a checkout of %s, got exit %d %+v\n%s", commit, r.exit, r.out, r.stderr)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", r.dest}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent"}
		out, err := cmd.Output()
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimSpace(string(out))
	}
	if got := git("rev-parse", "HEAD"); got != commit {
		t.Errorf("HEAD is %s, want %s", got, commit)
	}
	if got := git("symbolic-ref", "-q", "HEAD"); !strings.HasPrefix(got, "error") {
		t.Errorf("HEAD is the branch %s, want detached", got)
	}
	if _, err := os.Lstat(filepath.Join(r.workspace, ".repo.partial")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a staging directory is left: %v", err)
	}
}

// failed checks a failure with reason that leaves nothing a later run
// would accept: no destination, no staging directory.
func (f *fixture) failed(t *testing.T, r ran, reason siteprotocol.Reason) {
	t.Helper()
	want, _ := reason.Outcome()
	if r.exit == 0 || r.out.Outcome != want || r.out.Reason != reason {
		t.Fatalf("want %s / %s, got exit %d %+v\n%s", want, reason, r.exit, r.out, r.stderr)
	}
	entries, err := os.ReadDir(r.workspace)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the workspace holds %d entries after %s (%v)", len(entries), reason, err)
	}
}

// noFileHolds fails when any file under root (.git included) holds s.
func (f *fixture) noFileHolds(t *testing.T, root, s string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// workspace-init as a process against a real HTTPS Git host with LFS
// (Gitea), with a real scoped token minted by the grant provider double
// (docs/site-runtime.md#workspace-checkout-metallo-workspace-init).
func TestWorkspaceInitAgainstARealGitHost(t *testing.T) {
	f := newFixture(t)

	t.Run("the exact commit, detached, with its LFS content and no pointer", func(t *testing.T) {
		r := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true})
		f.succeeded(t, r, f.exact)
		if r.out.Verified || r.out.Fetch != "shallow" || r.out.LFSObjects != 2 || r.out.Bytes <= int64(len(f.weights)) {
			t.Errorf("outcome %+v", r.out)
		}
		if b, err := os.ReadFile(filepath.Join(r.dest, "data", "weights.bin")); err != nil || !bytes.Equal(b, f.weights) {
			t.Errorf("the LFS content is not checked out (%d bytes, %v)", len(b), err)
		}
		if b, _ := os.ReadFile(filepath.Join(r.dest, "README.md")); string(b) != "# model v1\n" {
			t.Errorf("README.md is %q: not the exact commit", b)
		}
		if b, err := os.ReadFile(filepath.Join(r.dest, "chain")); err != nil || len(b) != 300<<10 {
			t.Errorf("a link inside the checkout does not resolve: %v", err)
		}
		if n := f.noFileHolds(t, r.workspace, f.grant.Token); n < 10 {
			t.Errorf("grepped only %d files", n)
		}
		cfg, _ := os.ReadFile(filepath.Join(r.dest, ".git", "config"))
		if !bytes.Contains(cfg, []byte(f.model.URL)) || bytes.Contains(cfg, []byte("@127.0.0.1")) {
			t.Errorf(".git/config:\n%s", cfg)
		}

		// A second run over the complete checkout verifies it and fetches
		// nothing: with a credential the host refuses it still succeeds.
		before, _ := os.Stat(filepath.Join(r.dest, "data", "weights.bin"))
		again := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true, workspace: r.workspace, credDir: f.mount(t, f.member.Name, "not-a-token")})
		f.succeeded(t, again, f.exact)
		after, _ := os.Stat(filepath.Join(r.dest, "data", "weights.bin"))
		if !again.out.Verified || again.out.Fetch != "" || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("the second run: %+v", again.out)
		}
		// --verify-only, without a credential (a serving Pod's init
		// container), verifies the complete checkout.
		verified := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true, workspace: r.workspace, verifyOnly: true})
		f.succeeded(t, verified, f.exact)
		if !verified.out.Verified {
			t.Errorf("--verify-only: %+v", verified.out)
		}
		// As the serving Pod runs it: on a read-only mount of the
		// workspace. Git finds no racily clean entry, so it never runs the
		// LFS clean filter, which would write to .git/lfs/tmp.
		readOnly := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true, workspace: gitcheckout.ReadOnlyView(t, r.workspace), verifyOnly: true})
		if readOnly.exit != 0 || !readOnly.out.Verified {
			t.Errorf("--verify-only on a read-only mount: exit %d, %+v\n%s", readOnly.exit, readOnly.out, readOnly.stderr)
		}
		racyEntries(t, r.dest)

		// A partial checkout is never accepted: a staging directory is
		// removed, and a destination that does not verify is fetched anew.
		if err := os.WriteFile(filepath.Join(r.dest, "data", "weights.bin"), []byte("tampered"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(r.workspace, ".repo.partial", ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		// --verify-only refuses it and changes nothing.
		refused := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true, workspace: r.workspace, verifyOnly: true})
		if refused.out.Reason != siteprotocol.ReasonNativeError || refused.exit == 0 {
			t.Errorf("--verify-only of a tampered checkout: exit %d, %+v", refused.exit, refused.out)
		}
		if b, _ := os.ReadFile(filepath.Join(r.dest, "data", "weights.bin")); string(b) != "tampered" {
			t.Error("--verify-only changed the checkout")
		}
		if _, err := os.Stat(filepath.Join(r.workspace, ".repo.partial")); err != nil {
			t.Errorf("--verify-only removed the staging directory: %v", err)
		}
		third := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true, workspace: r.workspace})
		f.succeeded(t, third, f.exact)
		if third.out.Verified {
			t.Error("a tampered checkout was accepted")
		}
		if b, _ := os.ReadFile(filepath.Join(r.dest, "data", "weights.bin")); !bytes.Equal(b, f.weights) {
			t.Error("the tampered checkout was not replaced")
		}
	})

	t.Run("a checkout killed midway is never accepted", func(t *testing.T) {
		ws := t.TempDir()
		outcome := filepath.Join(t.TempDir(), "termination-log")
		cmd := exec.Command(f.bin, "workspace-init", "--url", f.model.URL, "--commit", f.exact, "--lfs", "--dest", filepath.Join(ws, "repo"),
			"--size-limit", fmt.Sprint(limit), "--credential-dir", f.credDir, "--ca-file", f.host.CAFile, "--outcome-file", outcome)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// SIGKILL once the commit is fetched and git-lfs is at work.
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := os.Stat(filepath.Join(ws, ".repo.partial", ".git", "lfs")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the fetch never started")
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if _, err := os.Lstat(filepath.Join(ws, "repo")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a killed checkout left its destination: %v", err)
		}
		r := f.run(t, run{url: f.model.URL, commit: f.exact, lfs: true, workspace: ws})
		f.succeeded(t, r, f.exact)
		if r.out.Verified {
			t.Fatal("the partial checkout was accepted")
		}
	})

	t.Run("a host refusing a shallow fetch of an unadvertised commit gets a full fetch", func(t *testing.T) {
		r := f.run(t, run{url: f.model.V0URL, commit: f.exact, lfs: true})
		f.succeeded(t, r, f.exact)
		if r.out.Fetch != "full" || r.out.LFSObjects != 2 {
			t.Errorf("outcome %+v", r.out)
		}
		// Without LFS the pointer files stay, as committed.
		plain := f.run(t, run{url: f.model.URL, commit: f.head})
		f.succeeded(t, plain, f.head)
		if b, _ := os.ReadFile(filepath.Join(plain.dest, "data", "weights.bin")); !bytes.HasPrefix(b, []byte("version https://git-lfs")) {
			t.Errorf("without --lfs: %d bytes", len(b))
		}
	})

	t.Run("the checkout waits within its deadline for the host to accept connections", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close() // nothing listens for the first two seconds
		var mu sync.Mutex
		var late net.Listener
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			if late != nil {
				_ = late.Close()
			}
		})
		go func() {
			time.Sleep(2 * time.Second)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return // the checkout then fails, and says so
			}
			mu.Lock()
			late = l
			mu.Unlock()
			forward(l, strings.TrimPrefix(f.host.URL, "https://"))
		}()
		url := strings.Replace(f.model.URL, strings.TrimPrefix(f.host.URL, "https://"), addr, 1)
		r := f.run(t, run{url: url, commit: f.exact, lfs: true, timeout: time.Minute, credDir: f.mount(t, f.grant.Username, f.grant.Token)})
		f.succeeded(t, r, f.exact)
	})

	t.Run("failures end with their reason and leave nothing", func(t *testing.T) {
		r := f.run(t, run{url: f.escape.URL, commit: f.escapeCommit})
		f.failed(t, r, siteprotocol.ReasonSymlinkEscape)
		if !strings.Contains(r.out.Message, "data") || !strings.Contains(r.out.Message, "leaves the checkout") {
			t.Errorf("escape: %s", r.out.Message)
		}
		f.failed(t, f.run(t, run{url: f.escape.URL, commit: f.escapeCommit}), siteprotocol.ReasonSymlinkEscape) // never accepted later
		r = f.run(t, run{url: f.dotgit.URL, commit: f.dotgitCommit})
		f.failed(t, r, siteprotocol.ReasonSymlinkEscape)
		if !strings.Contains(r.out.Message, "enters .git") {
			t.Errorf("dotgit: %s", r.out.Message)
		}
		r = f.run(t, run{url: f.large.URL, commit: f.largeCommit, lfs: true, sizeLimit: 2 << 20})
		f.failed(t, r, siteprotocol.ReasonSizeExceeded)
		t.Logf("LFS over the limit: %s", r.out.Message)
		r = f.run(t, run{url: f.bigPack.URL, commit: f.bigPackCommit, sizeLimit: 1 << 20})
		f.failed(t, r, siteprotocol.ReasonSizeExceeded)
		t.Logf("a pack over the limit: %s", r.out.Message)
		r = f.run(t, run{url: f.model.URL, commit: strings.Repeat("0123456789", 4), lfs: true})
		f.failed(t, r, siteprotocol.ReasonCommitMissing)
		r = f.run(t, run{url: f.noLFS.URL, commit: f.noLFSCommit, lfs: true})
		f.failed(t, r, siteprotocol.ReasonLFSMissing)
		r = f.run(t, run{url: f.host.URL + "/lab/absent.git", commit: f.exact})
		f.failed(t, r, siteprotocol.ReasonRepositoryUnavailable)
		closed := closedPort(t)
		began := time.Now()
		r = f.run(t, run{url: "https://" + closed + "/lab/model.git", commit: f.exact, timeout: 3 * time.Second})
		f.failed(t, r, siteprotocol.ReasonRepositoryUnavailable)
		if time.Since(began) < 2*time.Second || !strings.Contains(r.out.Message, "did not accept connections") {
			t.Errorf("unreachable host after %s: %s", time.Since(began), r.out.Message)
		}
		r = f.run(t, run{url: f.model.URL, commit: f.exact, credDir: f.mount(t, f.member.Name, "not-a-token")})
		f.failed(t, r, siteprotocol.ReasonCredentialUnavailable)
		r = f.run(t, run{url: f.model.URL, commit: f.exact, credDir: t.TempDir()})
		f.failed(t, r, siteprotocol.ReasonCredentialUnavailable)
	})

	t.Run("a grant issued twice with one idempotency key is one grant", func(t *testing.T) {
		key := "workspace:idempotent"
		one, _ := f.issue(t, key)
		two, _ := f.issue(t, key)
		if one != two || one.Token != two.Token {
			t.Fatalf("two grants for one key: %v, %v", one, two)
		}
		tokens, err := f.host.Tokens(context.Background(), f.member)
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, tok := range tokens {
			if tok.Name == grantprovider.TokenName(key) {
				named++
				if strings.Join(tok.Scopes, ",") != "read:repository" {
					t.Errorf("the token's scopes are %v", tok.Scopes)
				}
			}
		}
		if named != 1 {
			t.Fatalf("the host holds %d tokens for the key: %+v", named, tokens)
		}
		if other, _ := f.issue(t, "workspace:another"); other.GrantID == one.GrantID || other.Token == one.Token {
			t.Fatal("another key answered the same grant")
		}
	})

	t.Run("after revoke the grant's token is refused by the Git host", func(t *testing.T) {
		g, dir := f.issue(t, "workspace:revoked")
		lsRemote := func(token string) error {
			cmd := exec.Command("git", "-c", "credential.helper=", "-c", "http.extraHeader=Authorization: Basic "+basic(g.Username, token), "ls-remote", f.model.URL)
			cmd.Env = f.host.GitEnv()
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
		if err := lsRemote(g.Token); err != nil {
			t.Fatalf("before revoke: %v", err)
		}
		if err := f.grants.Revoke(context.Background(), g.GrantID); err != nil {
			t.Fatal(err)
		}
		if err := f.grants.Revoke(context.Background(), g.GrantID); err != nil {
			t.Fatalf("a second revoke: %v", err)
		}
		if err := lsRemote(g.Token); err == nil {
			t.Fatal("after revoke git ls-remote succeeded with the token")
		}
		req, _ := http.NewRequest(http.MethodGet, f.model.URL+"/info/refs?service=git-upload-pack", nil)
		req.SetBasicAuth(g.Username, g.Token)
		resp, err := f.host.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("after revoke the host answered the token with %d, want 401", resp.StatusCode)
		}
		f.failed(t, f.run(t, run{url: f.model.URL, commit: f.exact, credDir: dir}), siteprotocol.ReasonCredentialUnavailable)
	})
}

func basic(user, token string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + token))
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// forward relays the connections l accepts to target until l is closed.
func forward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c) }()
			_, _ = io.Copy(c, u)
		}()
	}
}

// racyEntries fails when a regular file of the checkout at dest is not
// older, in whole seconds, than its index (Git would re-hash it).
func racyEntries(t *testing.T, dest string) {
	t.Helper()
	index, err := os.Stat(filepath.Join(dest, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() == ".git" {
			if err == nil {
				return filepath.SkipDir
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.ModTime().Unix() >= index.ModTime().Unix() {
			t.Errorf("%s (mtime %s) is not older than the index (%s): racily clean", p, fi.ModTime(), index.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
