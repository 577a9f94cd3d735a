package gitcheckout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// watch measures what a checkout occupies.
type watch struct {
	root     string
	limit    int64
	interval time.Duration
	last     int64
}

// measure sums the sizes of every regular file under root (each inode
// once; links are not followed), in bytes.
func (w *watch) measure() (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(w.root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed while walking (git's temporary files)
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	w.last = total
	return total, err
}

// waitForHost waits, within ctx's deadline, until the repository host (or
// the proxy the environment names for it) accepts TCP connections: a new
// Pod's network may be admitted seconds after it starts.
func waitForHost(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	target := u
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err == nil && p != nil {
		target = p
	}
	port := target.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[target.Scheme]
	}
	addr := net.JoinHostPort(target.Hostname(), port)
	var d net.Dialer
	pause := 200 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := d.DialContext(attempt, "tcp", addr)
		cancel()
		if err == nil {
			_ = c.Close()
			return nil
		}
		wait := pause
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-10*time.Millisecond)
		}
		if ctx.Err() != nil || wait <= 0 {
			return fmt.Errorf("the repository host %s did not accept connections within the deadline: %v", addr, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("the repository host %s did not accept connections within the deadline: %v", addr, err)
		case <-t.C:
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// maxLinkHops bounds how many symbolic links one resolution follows (the
// kernel's ELOOP limit).
const maxLinkHops = 40

// findEscapingLink walks the checkout and resolves every symbolic link
// for real — component by component on the file system, following links
// inside the checkout — as a path inside root. It returns a description
// of the first link whose target leaves root (an absolute target, or ".."
// above it) or enters .git, or "" when none does.
func findEscapingLink(root string) (string, error) {
	var found string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, _ := os.Readlink(p)
		resolved, why := resolveInside(root, filepath.ToSlash(rel))
		if why != "" {
			found = fmt.Sprintf("the symbolic link %s -> %s %s", rel, target, why)
			return fs.SkipAll
		}
		if resolved == ".git" || strings.HasPrefix(resolved, ".git/") {
			found = fmt.Sprintf("the symbolic link %s -> %s enters .git (%s)", rel, target, resolved)
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}

// resolveInside resolves the path rel (slash-separated, relative to
// root) the way the kernel would with root as the checkout: each
// component is looked up with Lstat and a symbolic link's target is
// spliced in. It returns the resolved path relative to root, or why it
// escapes ("leaves the checkout", or a loop). Components that do not
// exist resolve lexically (a dangling link inside the tree is harmless).
func resolveInside(root, rel string) (string, string) {
	var done []string // resolved components so far
	todo := strings.Split(rel, "/")
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", "leaves the checkout"
			}
			done = done[:len(done)-1]
			continue
		}
		cur := append(append([]string{}, done...), c)
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(strings.Join(cur, "/"))))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = cur
			continue
		}
		hops++
		if hops > maxLinkHops {
			return "", "loops (more than 40 links)"
		}
		target, err := os.Readlink(filepath.Join(root, filepath.FromSlash(strings.Join(cur, "/"))))
		if err != nil {
			return "", "cannot be read"
		}
		if strings.HasPrefix(target, "/") {
			return "", "leaves the checkout (an absolute target)"
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	return strings.Join(done, "/"), ""
}

// lfsFile is one entry of `git lfs ls-files --json`.
type lfsFile struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	OIDType string `json:"oid_type"`
	OID     string `json:"oid"`
}

// lfsFiles lists the commit's LFS files.
func lfsFiles(ctx context.Context, g *git, dir, commit string) ([]lfsFile, error) {
	r := g.run(ctx, dir, nil, "lfs", "ls-files", "--long", "--json", commit)
	if r.err != nil {
		return nil, errors.New(r.describe())
	}
	var out struct {
		Files []lfsFile `json:"files"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		return nil, fmt.Errorf("git lfs ls-files --json: %w", err)
	}
	return out.Files, nil
}

// fetchLFS fetches the commit's LFS objects and checks them out. Their
// declared sizes are counted first (each object is stored twice: in
// .git/lfs and in the working tree), so a checkout that cannot fit fails
// before downloading; the watch stops a fetch that grows past the limit
// anyway.
func fetchLFS(ctx context.Context, g *git, o Options, w *watch) (int, *domain.CheckoutOutcome) {
	fail := func(r siteprotocol.Reason, format string, args ...any) (int, *domain.CheckoutOutcome) {
		out := domain.CheckoutFailed(r, format, args...)
		return 0, &out
	}
	stage := o.staging()
	if r := g.run(ctx, stage, nil, "lfs", "version"); r.err != nil {
		return fail(siteprotocol.ReasonNativeError, "git-lfs is not installed: %s", r.describe())
	}
	files, err := lfsFiles(ctx, g, stage, o.Commit)
	if err != nil {
		return fail(siteprotocol.ReasonNativeError, "list the LFS files: %v", err)
	}
	if len(files) == 0 {
		return 0, nil
	}
	size, err := w.measure()
	if err != nil {
		return fail(siteprotocol.ReasonNativeError, "measure the checkout: %v", err)
	}
	var declared int64
	for _, f := range files {
		declared += 2 * f.Size
	}
	if size+declared > o.SizeLimit {
		out := sizeExceeded(o, size+declared)
		out.Message += fmt.Sprintf(" (counting the %d LFS objects the commit declares, before fetching them)", len(files))
		return 0, &out
	}
	r := g.fetchRetrying(ctx, stage, w, "lfs", "fetch", "origin", o.Commit)
	if r.err != nil {
		switch out := r.failure(o, true); {
		case out != nil && out.Reason != siteprotocol.ReasonCommitMissing:
			return 0, out
		default:
			return fail(siteprotocol.ReasonLFSMissing, "fetch the LFS objects of %s: %s", o.Commit, r.describe())
		}
	}
	if r := g.runWatched(ctx, stage, w, nil, "lfs", "checkout"); r.err != nil {
		if r.oversize {
			out := sizeExceeded(o, r.size)
			return 0, &out
		}
		return fail(siteprotocol.ReasonLFSMissing, "check out the LFS objects: %s", r.describe())
	}
	for _, f := range files {
		if err := verifyLFSFile(stage, f); err != nil {
			return fail(siteprotocol.ReasonLFSMissing, "%v", err)
		}
	}
	return len(files), nil
}

// verifyLFSFile checks that f is a regular file in the working tree whose
// content has f's size and SHA-256.
func verifyLFSFile(root string, f lfsFile) error {
	if f.OIDType != "sha256" {
		return fmt.Errorf("LFS file %s: object type %q cannot be verified", f.Name, f.OIDType)
	}
	p := filepath.Join(root, filepath.FromSlash(f.Name))
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("LFS file %s is not a regular file of the checkout", f.Name)
	}
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("LFS file %s: %w", f.Name, err)
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return fmt.Errorf("LFS file %s: %w", f.Name, err)
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.OID {
		return fmt.Errorf("LFS file %s does not hold its object %s (%d bytes): a pointer or other content is left (%d bytes)", f.Name, f.OID, f.Size, n)
	}
	return nil
}

// pointerPrefix starts every LFS pointer file.
var pointerPrefix = []byte("version https://git-lfs.github.com/spec/v1\n")

// findPointer returns the first file of the working tree that is an LFS
// pointer (at most 1024 bytes, starting with the pointer's version line),
// or "".
func findPointer(root string) (string, error) {
	var found string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > 1024 || fi.Size() < int64(len(pointerPrefix)) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(b, pointerPrefix) {
			found = rel
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}

// verifyTree checks the working tree in dir: HEAD is the commit,
// detached; with LFS no pointer file is left; the tree is clean.
func verifyTree(ctx context.Context, g *git, o Options, dir string) *domain.CheckoutOutcome {
	fail := func(r siteprotocol.Reason, format string, args ...any) *domain.CheckoutOutcome {
		out := domain.CheckoutFailed(r, format, args...)
		return &out
	}
	if r := g.run(ctx, dir, nil, "rev-parse", "--verify", "HEAD^{commit}"); r.err != nil || strings.TrimSpace(r.stdout) != o.Commit {
		return fail(siteprotocol.ReasonNativeError, "HEAD is %q, not %s", strings.TrimSpace(r.stdout), o.Commit)
	}
	if r := g.run(ctx, dir, nil, "symbolic-ref", "--quiet", "HEAD"); r.err == nil {
		return fail(siteprotocol.ReasonNativeError, "HEAD is the branch %s, not detached", strings.TrimSpace(r.stdout))
	}
	if o.LFS {
		if p, err := findPointer(dir); err != nil {
			return fail(siteprotocol.ReasonNativeError, "look for LFS pointer files: %v", err)
		} else if p != "" {
			return fail(siteprotocol.ReasonLFSMissing, "%s is an LFS pointer file, not its content", p)
		}
	}
	if r := g.run(ctx, dir, nil, "status", "--porcelain=v1", "--untracked-files=all", "--ignore-submodules=all"); r.err != nil {
		return fail(siteprotocol.ReasonNativeError, "git status: %s", r.describe())
	} else if s := strings.TrimSpace(r.stdout); s != "" {
		return fail(siteprotocol.ReasonNativeError, "the working tree differs from %s: %.300s", o.Commit, s)
	}
	return nil
}

// settleIndex makes no index entry of the checkout in dir "racily
// clean" (docs/site-runtime.md#workspace-checkout-metallo-workspace-init).
// Git trusts an entry whose file has the stat data it recorded only when
// the file's mtime is older than the index file's; otherwise it re-hashes
// the file, and for an LFS file that runs git-lfs's clean filter, which
// writes to .git/lfs/tmp and fails on the read-only mount
// `--verify-only` runs on. A checkout writes its files and its index in
// the same second, so which entries are racy depends on timing. Here,
// while the checkout is still writable, every regular file of the working
// tree gets the mtime one whole second before the index's, and `git
// update-index --refresh` re-hashes each file (through the clean filter,
// so a changed file keeps not matching) and rewrites the index with the
// matching stat data and a later mtime. Later verifications then compare
// stat data only, and a file changed afterwards has a new mtime or size,
// so Git re-hashes it and reports it.
func settleIndex(ctx context.Context, g *git, dir string) error {
	fi, err := os.Stat(filepath.Join(dir, ".git", "index"))
	if err != nil {
		return err
	}
	past := fi.ModTime().Truncate(time.Second).Add(-time.Second)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p == filepath.Join(dir, ".git") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil // a link's racy check reads the link: no filter
		}
		return os.Chtimes(p, past, past)
	})
	if err != nil {
		return err
	}
	if r := g.run(ctx, dir, nil, "update-index", "-q", "--refresh"); r.err != nil {
		return errors.New(r.describe())
	}
	return nil
}

// record marks a complete checkout (in .git, outside the working tree).
type record struct {
	Commit     string `json:"commit"`
	LFS        bool   `json:"lfs"`
	LFSObjects int    `json:"lfs_objects"`
}

func writeRecord(root string, rec record) error {
	b, _ := json.Marshal(rec)
	p := filepath.Join(root, ".git", recordName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// verifyExisting checks a checkout already at Dest: its record names the
// commit and the LFS choice, HEAD is the commit detached, no link escapes,
// every LFS file holds its object, the tree is clean and within the size
// limit. ok false means it is not accepted (the outcome says why).
func verifyExisting(ctx context.Context, g *git, o Options) (domain.CheckoutOutcome, bool) {
	notAccepted := func(format string, args ...any) (domain.CheckoutOutcome, bool) {
		return domain.CheckoutOutcome{Message: fmt.Sprintf(format, args...)}, false
	}
	b, err := os.ReadFile(filepath.Join(o.Dest, ".git", recordName))
	if err != nil {
		return notAccepted("no completion record: %v", err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Commit != o.Commit || rec.LFS != o.LFS {
		return notAccepted("the completion record %s is for another checkout", b)
	}
	if out := verifyTree(ctx, g, o, o.Dest); out != nil {
		return notAccepted("%s", out.Message)
	}
	if link, err := findEscapingLink(o.Dest); err != nil || link != "" {
		return notAccepted("links: %s %v", link, err)
	}
	if o.LFS {
		files, err := lfsFiles(ctx, g, o.Dest, o.Commit)
		if err != nil {
			return notAccepted("%v", err)
		}
		for _, f := range files {
			if err := verifyLFSFile(o.Dest, f); err != nil {
				return notAccepted("%v", err)
			}
		}
	}
	w := &watch{root: o.Dest}
	size, err := w.measure()
	if err != nil || size > o.SizeLimit {
		return notAccepted("%d bytes over the limit of %d (%v)", size, o.SizeLimit, err)
	}
	return domain.CheckoutOutcome{Outcome: siteprotocol.OutcomeSucceeded, Commit: o.Commit, Bytes: size, LFSObjects: rec.LFSObjects, Verified: true,
		Message: fmt.Sprintf("verified the complete checkout of %s at %s (%d bytes, %d LFS objects); nothing fetched", o.Commit, o.Dest, size, rec.LFSObjects)}, true
}
