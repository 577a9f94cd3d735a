package domain

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// GrantRequest asks the repository grant provider for a read credential
// of one repository, for one member's Attempt
// (docs/site-runtime.md#repository-grants).
type GrantRequest struct {
	MemberID      string
	ProjectID     string
	RepositoryURL string
	RunID         string
	AttemptID     string
	// IdempotencyKey makes the issue repeatable: the provider answers the
	// same grant for the same key, so a Runtime that crashed between
	// issuing and recording asks again and orphans nothing. 1-255
	// printable ASCII characters.
	IdempotencyKey string
}

// Validate checks the request before it is sent: UUID-shaped identities
// are the caller's; here the repository URL must be absolute http(s)
// without credentials, and the key 1-255 printable ASCII characters.
func (r GrantRequest) Validate() error {
	if err := CheckRepositoryURL(r.RepositoryURL); err != nil {
		return err
	}
	if r.MemberID == "" || r.ProjectID == "" || r.RunID == "" || r.AttemptID == "" {
		return fmt.Errorf("a grant request names the member, the Project, the Run and the Attempt")
	}
	if !PrintableKey(r.IdempotencyKey) {
		return fmt.Errorf("the idempotency key must be 1-255 printable ASCII characters")
	}
	return nil
}

// PrintableKey reports whether k is 1-255 printable ASCII characters
// (no space), the shape of an idempotency key and of a grant ID.
func PrintableKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

// CheckRepositoryURL accepts an absolute https URL with a host and a
// path, without user information, query or fragment (plain http only
// to a loopback host; a credential never travels in the URL).
func CheckRepositoryURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("repository URL: %w", err)
	case u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname())):
		return fmt.Errorf("repository URL %q: must be https (plain http only to a loopback host)", raw)
	case u.Host == "" || u.Path == "" || u.Path == "/":
		return fmt.Errorf("repository URL %q: needs a host and a repository path", raw)
	case u.User != nil:
		return fmt.Errorf("repository URL: must not carry credentials (they would persist in .git/config)")
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, " \n\r\t"):
		return fmt.Errorf("repository URL %q: no query, fragment or white space", raw)
	}
	return nil
}

func isLoopback(host string) bool {
	return host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.")
}

// RepositoryGrant is an issued read credential: Git authenticates as
// Username with Token (HTTP basic) until ExpiresAt. Token is a secret:
// String and GoString never show it.
type RepositoryGrant struct {
	GrantID   string
	Username  string
	Token     string
	ExpiresAt time.Time
}

// String describes the grant without its token.
func (g RepositoryGrant) String() string {
	return fmt.Sprintf("grant %s for %s until %s", g.GrantID, g.Username, g.ExpiresAt.UTC().Format(time.RFC3339))
}

// GoString is String: %#v must not print the token either.
func (g RepositoryGrant) GoString() string { return g.String() }
