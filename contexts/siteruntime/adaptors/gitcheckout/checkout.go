// Package gitcheckout is `metallo workspace-init`: the trusted checkout of
// a member's repository at an exact commit into the Attempt's workspace,
// with the git CLI and git-lfs (docs/site-runtime.md#workspace-checkout-metallo-workspace-init).
//
// The checkout is built in a staging directory beside its destination and
// renamed into place only once it is complete and verified: the exact
// commit checked out detached, no symbolic link leaving the checkout or
// entering .git, every LFS object fetched and its content verified with no
// pointer file left, and the whole within the size limit, which is also
// enforced while Git and git-lfs fetch. A destination that already holds a
// complete checkout of the commit is verified and nothing is fetched.
// Failures end with a reason of the Site protocol's vocabulary and leave
// no destination and no staging directory.
package gitcheckout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Options is one checkout.
type Options struct {
	// URL is the repository (https; plain http only to loopback and only
	// without a credential). It never carries credentials.
	URL string
	// Commit is the full commit hash (40 or 64 lower-case hex digits).
	Commit string
	// LFS fetches, checks out and verifies every LFS object of the commit.
	LFS bool
	// Dest is the checkout directory; its parent must exist and be on the
	// same file system (the workspace volume). Dest itself is created by
	// the rename of a complete checkout.
	Dest string
	// SizeLimit is the most the checkout may occupy, in bytes: Git's
	// objects, the LFS objects and the working tree.
	SizeLimit int64
	// CredentialDir holds the files "username" and "token" (the mounted
	// grant); empty for a public repository. The token reaches Git only
	// through the credential helper, which reads the file.
	CredentialDir string
	// CAFile is a PEM bundle of the repository host's CA (system roots
	// when empty).
	CAFile string
	// HelperCommand is the credential helper Git runs (a shell command
	// line, e.g. `'/usr/bin/metallo' workspace-init credential-helper
	// --credential-dir … --url …`); required with CredentialDir.
	HelperCommand string
	// Git is the git binary (default: "git" on PATH, /usr/local/bin,
	// /usr/bin or /bin).
	Git string
	// PollInterval is how often the size is measured while Git runs
	// (default 100 ms).
	PollInterval time.Duration
	// VerifyOnly verifies the checkout at Dest and never fetches, writes
	// or removes anything: a serving Pod's read-only verification of its
	// prepared workspace (docs/site-runtime.md#services-and-the-prepared-workspace).
	VerifyOnly bool
}

var commitRe = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// validate refuses options no checkout can be made from.
func (o *Options) validate() error {
	if err := domain.CheckRepositoryURL(o.URL); err != nil {
		return err
	}
	if !commitRe.MatchString(o.Commit) {
		return errors.New("the commit must be a full lower-case hash (40 or 64 hex digits)")
	}
	if o.SizeLimit < 1 {
		return errors.New("the size limit must be a positive number of bytes")
	}
	if o.Dest == "" || !filepath.IsAbs(o.Dest) || filepath.Clean(o.Dest) != o.Dest || filepath.Dir(o.Dest) == o.Dest {
		return errors.New("the destination must be a clean absolute path below a directory")
	}
	if fi, err := os.Stat(filepath.Dir(o.Dest)); err != nil || !fi.IsDir() {
		return fmt.Errorf("the destination's parent %s must be an existing directory", filepath.Dir(o.Dest))
	}
	if o.CredentialDir != "" {
		if strings.HasPrefix(o.URL, "http:") {
			return errors.New("a credential is sent only over https")
		}
		if o.HelperCommand == "" {
			return errors.New("a credential needs the credential helper command")
		}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	return nil
}

// staging is the directory a checkout is built in, beside Dest.
func (o Options) staging() string {
	return filepath.Join(filepath.Dir(o.Dest), "."+filepath.Base(o.Dest)+".partial")
}

// recordName is the completion record inside the checkout's .git.
const recordName = "metallo-checkout.json"

// Run performs the checkout and returns its outcome; it never returns an
// error: every failure is an outcome with its reason (native-error for
// what is neither the repository's nor the credential's fault, such as a
// missing git-lfs or a full disk). ctx's deadline bounds everything,
// waiting for the host included.
func Run(ctx context.Context, o Options) domain.CheckoutOutcome {
	if err := o.validate(); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonInvalidPayload, "%v", err)
	}
	if o.CredentialDir != "" {
		if err := CheckCredentialDir(o.CredentialDir); err != nil {
			return domain.CheckoutFailed(siteprotocol.ReasonCredentialUnavailable, "the mounted credential cannot be used: %v", err)
		}
	}
	g, err := newGit(o)
	if err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "%v", err)
	}
	defer g.close()
	if o.VerifyOnly {
		return verifyOnly(ctx, g, o)
	}
	// A staging directory is never accepted: it is what a killed run left.
	if err := os.RemoveAll(o.staging()); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "remove the partial checkout %s: %v", o.staging(), err)
	}
	if _, err := os.Lstat(o.Dest); err == nil {
		out, ok := verifyExisting(ctx, g, o)
		if ok {
			return out
		}
		// Not a complete checkout of this commit: never accepted.
		if err := os.RemoveAll(o.Dest); err != nil {
			return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "remove %s, which is not a complete checkout of %s (%s): %v", o.Dest, o.Commit, out.Message, err)
		}
	}
	out := fetchAndCheckout(ctx, g, o)
	if out.Outcome != siteprotocol.OutcomeSucceeded {
		_ = os.RemoveAll(o.staging())
	}
	return out
}

// verifyOnly verifies Dest as a replayed checkout would, and fails
// native-error, leaving everything as it is, when it is missing or not a
// complete checkout of the commit.
func verifyOnly(ctx context.Context, g *git, o Options) domain.CheckoutOutcome {
	if _, err := os.Lstat(o.Dest); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "no prepared checkout at %s: %v", o.Dest, err)
	}
	out, ok := verifyExisting(ctx, g, o)
	if !ok {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "%s is not the complete checkout of %s: %s", o.Dest, o.Commit, out.Message)
	}
	return out
}

// fetchAndCheckout builds the checkout in the staging directory and
// renames it to Dest when complete.
func fetchAndCheckout(ctx context.Context, g *git, o Options) domain.CheckoutOutcome {
	stage := o.staging()
	if err := os.Mkdir(stage, 0o755); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "create %s: %v", stage, err)
	}
	w := &watch{root: stage, limit: o.SizeLimit, interval: o.PollInterval}
	if r := g.run(ctx, stage, nil, "init", "--quiet", "--template=", "--initial-branch=checkout"); r.err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "git init: %s", r.describe())
	}
	if r := g.run(ctx, stage, nil, "remote", "add", "origin", o.URL); r.err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "git remote add: %s", r.describe())
	}
	if err := waitForHost(ctx, o.URL); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonRepositoryUnavailable, "%v", err)
	}
	fetch, out := fetchCommit(ctx, g, o, w)
	if out != nil {
		return *out
	}
	// The object must be the commit asked for.
	if r := g.run(ctx, stage, nil, "cat-file", "-t", o.Commit); r.err != nil || strings.TrimSpace(r.stdout) != "commit" {
		return domain.CheckoutFailed(siteprotocol.ReasonCommitMissing, "%s is not a commit of %s", o.Commit, o.URL)
	}
	// Check out without LFS content: pointer files only, so nothing is
	// written through a link before the links are checked.
	if r := g.runWatched(ctx, stage, w, []string{"GIT_LFS_SKIP_SMUDGE=1"}, "checkout", "--quiet", "--detach", "--no-recurse-submodules", o.Commit); r.err != nil {
		if r.oversize {
			return sizeExceeded(o, w.last)
		}
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "git checkout %s: %s", o.Commit, r.describe())
	}
	if link, err := findEscapingLink(stage); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "check symbolic links: %v", err)
	} else if link != "" {
		return domain.CheckoutFailed(siteprotocol.ReasonSymlinkEscape, "%s", link)
	}
	objects := 0
	if o.LFS {
		n, out := fetchLFS(ctx, g, o, w)
		if out != nil {
			return *out
		}
		objects = n
	}
	// Before the first verification, so the one here runs as a later
	// --verify-only on a read-only mount does.
	if err := settleIndex(ctx, g, stage); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "refresh the index: %v", err)
	}
	if out := verifyTree(ctx, g, o, stage); out != nil {
		return *out
	}
	size, err := w.measure()
	if err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "measure the checkout: %v", err)
	}
	if size > o.SizeLimit {
		return sizeExceeded(o, size)
	}
	rec := record{Commit: o.Commit, LFS: o.LFS, LFSObjects: objects}
	if err := writeRecord(stage, rec); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "record the checkout: %v", err)
	}
	if err := os.Rename(stage, o.Dest); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "move the checkout into place: %v", err)
	}
	if err := syncDir(filepath.Dir(o.Dest)); err != nil {
		return domain.CheckoutFailed(siteprotocol.ReasonNativeError, "sync %s: %v", filepath.Dir(o.Dest), err)
	}
	return domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Commit: o.Commit, Bytes: size, LFSObjects: objects, Fetch: fetch,
		Message: fmt.Sprintf("checked out %s of %s at %s (detached, %d bytes, %d LFS objects, %s fetch)", o.Commit, o.URL, o.Dest, size, objects, fetch)}
}

func sizeExceeded(o Options, size int64) domain.CheckoutOutcome {
	return domain.CheckoutFailed(siteprotocol.ReasonSizeExceeded, "the checkout of %s at %s reached %d bytes, over the limit of %d bytes (Git objects, LFS objects and working tree count)",
		o.URL, o.Commit, size, o.SizeLimit)
}

// fetchCommit fetches the commit at depth 1, or the whole repository when
// the host refuses a shallow fetch of an unadvertised commit. It returns
// "shallow" or "full", or the failed outcome.
func fetchCommit(ctx context.Context, g *git, o Options, w *watch) (string, *domain.CheckoutOutcome) {
	stage := o.staging()
	r := g.fetchRetrying(ctx, stage, w, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--depth=1", "origin", o.Commit)
	if r.err == nil {
		return "shallow", nil
	}
	if out := r.failure(o, false); out != nil {
		return "", out
	}
	// Refused or not found at depth 1: every ref of the repository.
	r = g.fetchRetrying(ctx, stage, w, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "origin", "+refs/*:refs/fetched/*")
	if r.err != nil {
		if out := r.failure(o, true); out != nil {
			return "", out
		}
		out := domain.CheckoutFailed(siteprotocol.ReasonRepositoryUnavailable, "fetch %s: %s", o.URL, r.describe())
		return "", &out
	}
	if c := g.run(ctx, stage, nil, "cat-file", "-e", o.Commit+"^{commit}"); c.err != nil {
		out := domain.CheckoutFailed(siteprotocol.ReasonCommitMissing, "%s has no commit %s (fetched in full)", o.URL, o.Commit)
		return "", &out
	}
	return "full", nil
}

// failure classifies a failed fetch: the size limit, the credential, a
// missing repository, or — for the full fetch only — an unreachable host.
// nil means "try the full fetch" (a shallow fetch refused or not found).
func (r result) failure(o Options, full bool) *domain.CheckoutOutcome {
	var out domain.CheckoutOutcome
	switch {
	case r.oversize:
		out = sizeExceeded(o, r.size)
	case noSpaceRe.MatchString(r.stderr):
		// The workspace volume filled up before the next measurement.
		out = domain.CheckoutFailed(siteprotocol.ReasonSizeExceeded, "the workspace is full before the checkout of %s at %s is (limit %d bytes): %s", o.URL, o.Commit, o.SizeLimit, r.describe())
	case r.ctxErr != nil:
		out = domain.CheckoutFailed(siteprotocol.ReasonRepositoryUnavailable, "fetch %s did not finish within the deadline: %s", o.URL, r.describe())
	case credentialRefused(r.stderr):
		out = domain.CheckoutFailed(siteprotocol.ReasonCredentialUnavailable, "%s refused the credential: %s", o.URL, r.describe())
	case repositoryMissing(r.stderr):
		out = domain.CheckoutFailed(siteprotocol.ReasonRepositoryUnavailable, "%s has no such repository: %s", o.URL, r.describe())
	case transportFailed(r.stderr):
		out = domain.CheckoutFailed(siteprotocol.ReasonRepositoryUnavailable, "fetch %s: %s", o.URL, r.describe())
	case !full:
		return nil
	case commitNotFound(r.stderr):
		out = domain.CheckoutFailed(siteprotocol.ReasonCommitMissing, "%s has no commit %s: %s", o.URL, o.Commit, r.describe())
	default:
		return nil
	}
	return &out
}

// Patterns of git's and git-lfs's messages (English: the helper runs Git
// with LC_ALL=C).
var (
	credentialRe = regexp.MustCompile(`(?i)authentication failed|could not read (username|password)|terminal prompts disabled|returned error: 40[13]\b|\[40[13]\]|authorization error|credentials for .* not found|bad credentials`)
	missingRe    = regexp.MustCompile(`(?i)repository .*not found|returned error: 404\b|does not appear to be a git repository|not a git repository`)
	transportRe  = regexp.MustCompile(`(?i)could not resolve host|failed to connect|connection refused|connection reset|timed out|server certificate verification failed|ssl certificate problem|unable to access|returned error: 5\d\d\b|rpc failed|early eof|unexpected disconnect`)
	noSpaceRe    = regexp.MustCompile(`(?i)no space left on device|disk quota exceeded`)
	notFoundRe   = regexp.MustCompile(`(?i)not our ref|unadvertised object|couldn't find remote ref|no such remote ref|not a valid object`)
)

func credentialRefused(stderr string) bool { return credentialRe.MatchString(stderr) }
func repositoryMissing(stderr string) bool { return missingRe.MatchString(stderr) }
func transportFailed(stderr string) bool   { return transportRe.MatchString(stderr) }
func commitNotFound(stderr string) bool    { return notFoundRe.MatchString(stderr) }
