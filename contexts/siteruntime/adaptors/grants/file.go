package grants

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// DefaultFileValidity is how long a file-issued grant is said to be valid
// when its entry names no valid_for.
const DefaultFileValidity = time.Hour

// Credential is one entry of a grants file: the Site's read credential
// for the repositories under Repository, handed to the members of Project.
type Credential struct {
	// Project is the Project UUID the credential serves.
	Project string `json:"project"`
	// Members are the member (Party) UUIDs that may use it; empty means
	// every member of the Project (whose binding and permission the
	// Runtime has checked already).
	Members []string `json:"members,omitempty"`
	// Repository is a repository URL, or a prefix ending in '/' that
	// covers every repository under it.
	Repository string `json:"repository"`
	// Username and TokenFile are the HTTP basic credential Git uses; the
	// token file is read at every issue, so a rotated token is used next.
	Username  string `json:"username"`
	TokenFile string `json:"token_file"`
	// ValidFor is the validity the grant states (default 1h), a Go
	// duration such as "30m".
	ValidFor string `json:"valid_for,omitempty"`
}

// File issues grants from a YAML list of Credential entries, for
// standalone Sites without a grant provider:
//
//   - project: 0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9
//     members: [9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80]   # optional
//     repository: https://git.example.org/lab/           # a URL or a prefix ending in /
//     username: metallo-reader
//     token_file: /var/run/secrets/metallo/git/lab-token
//     valid_for: 1h                                      # optional
//
// The first entry whose Project, members and repository match answers;
// none is ErrGrantDenied. The grant ID is derived from the idempotency key,
// so the same key is always the same grant (the process remembers the
// first answer; after a restart the same key answers the same ID and
// token with a new expiry). Revoke forgets the grant and is idempotent,
// but cannot withdraw the Site's credential at the repository host: that
// credential outlives every grant, which is why a Site that needs
// revocation at the host uses the HTTP provider. The file is read at
// every call and parsed again when its bytes change; a file or token file
// that cannot be read or parsed makes the call unavailable
// (ErrGrantUnavailable), never an old answer.
type File struct {
	path  string
	clock application.Clock

	mu      sync.Mutex
	digest  string
	entries []Credential
	issued  map[string]domain.RepositoryGrant // by idempotency key
}

// NewFile loads path; it fails when the file cannot be read or parsed, or
// an entry's token file cannot be read.
func NewFile(path string, clock application.Clock) (*File, error) {
	f := &File{path: path, clock: clock, issued: map[string]domain.RepositoryGrant{}}
	entries, err := f.load()
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if _, err := readToken(e.TokenFile); err != nil {
			return nil, fmt.Errorf("grants file %s: entry %d: %w", path, i, err)
		}
	}
	return f, nil
}

// ParseCredentials reads a grants file's content and validates every entry.
func ParseCredentials(b []byte) ([]Credential, error) {
	var entries []Credential
	if err := yaml.UnmarshalStrict(b, &entries); err != nil {
		return nil, fmt.Errorf("want a YAML list of {project, members, repository, username, token_file, valid_for}: %w", err)
	}
	for i, e := range entries {
		switch {
		case !siteprotocol.IsUUID(e.Project):
			return nil, fmt.Errorf("entry %d: project must be a lower-case UUID", i)
		case slices.ContainsFunc(e.Members, func(m string) bool { return !siteprotocol.IsUUID(m) }):
			return nil, fmt.Errorf("entry %d: every member must be a lower-case UUID", i)
		case domain.CheckRepositoryURL(strings.TrimSuffix(e.Repository, "/")+"/x") != nil || domain.CheckRepositoryURL(e.Repository) != nil:
			return nil, fmt.Errorf("entry %d: repository: %v", i, domain.CheckRepositoryURL(e.Repository))
		case e.Username == "" || strings.ContainsAny(e.Username, ":\n\r\x00"):
			return nil, fmt.Errorf("entry %d: username must be non-empty, without ':' or control characters", i)
		case e.TokenFile == "":
			return nil, fmt.Errorf("entry %d: token_file is required", i)
		}
		if e.ValidFor != "" {
			if d, err := time.ParseDuration(e.ValidFor); err != nil || d <= 0 {
				return nil, fmt.Errorf("entry %d: valid_for must be a positive duration such as 30m", i)
			}
		}
	}
	return entries, nil
}

// covers reports whether entry e's repository covers url: equal, or a
// prefix ending in '/'.
func (e Credential) covers(url string) bool {
	return url == e.Repository || (strings.HasSuffix(e.Repository, "/") && strings.HasPrefix(url, e.Repository))
}

func (f *File) load() ([]Credential, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("grants file: %w", err)
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	f.mu.Lock()
	defer f.mu.Unlock()
	if digest == f.digest {
		return f.entries, nil
	}
	entries, err := ParseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("grants file %s: %w", f.path, err)
	}
	f.digest, f.entries = digest, entries
	return entries, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimRight(string(b), "\r\n")
	if tok == "" || strings.ContainsAny(tok, "\n\r\x00") {
		return "", fmt.Errorf("token file %s: must hold one non-empty line", path)
	}
	return tok, nil
}

// Issue answers from the file's first matching entry; see File.
func (f *File) Issue(_ context.Context, req domain.GrantRequest) (domain.RepositoryGrant, error) {
	if err := req.Validate(); err != nil {
		return domain.RepositoryGrant{}, err
	}
	entries, err := f.load()
	if err != nil {
		return domain.RepositoryGrant{}, fmt.Errorf("%w: %v", application.ErrGrantUnavailable, err)
	}
	i := slices.IndexFunc(entries, func(e Credential) bool {
		return e.Project == req.ProjectID && (len(e.Members) == 0 || slices.Contains(e.Members, req.MemberID)) && e.covers(req.RepositoryURL)
	})
	if i < 0 {
		return domain.RepositoryGrant{}, fmt.Errorf("%w: %s has no credential for %s to member %s in Project %s",
			application.ErrGrantDenied, f.path, req.RepositoryURL, req.MemberID, req.ProjectID)
	}
	e := entries[i]
	tok, err := readToken(e.TokenFile)
	if err != nil {
		return domain.RepositoryGrant{}, fmt.Errorf("%w: %v", application.ErrGrantUnavailable, err)
	}
	sum := sha256.Sum256([]byte(req.IdempotencyKey))
	id := "file-" + hex.EncodeToString(sum[:16])
	f.mu.Lock()
	defer f.mu.Unlock()
	if g, ok := f.issued[req.IdempotencyKey]; ok && g.Token == tok && g.Username == e.Username {
		return g, nil
	}
	validFor := DefaultFileValidity
	if e.ValidFor != "" {
		validFor, _ = time.ParseDuration(e.ValidFor)
	}
	g := domain.RepositoryGrant{GrantID: id, Username: e.Username, Token: tok, ExpiresAt: f.clock.Now().Add(validFor)}
	f.issued[req.IdempotencyKey] = g
	return g, nil
}

// Revoke forgets the grant; see File.
func (f *File) Revoke(_ context.Context, grantID string) error {
	if !domain.PrintableKey(grantID) {
		return errors.New("grant ID must be 1-255 printable ASCII characters")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, g := range f.issued {
		if g.GrantID == grantID {
			delete(f.issued, k)
		}
	}
	return nil
}

var _ application.RepositoryGrants = (*File)(nil)
