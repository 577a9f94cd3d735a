package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
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
	case u.Scheme != "https" && (u.Scheme != "http" || !isLoopback(u.Hostname())):
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

// MaxTerminationMessageBytes is the most Kubernetes keeps of a container's
// termination message; a checkout outcome always fits in it.
const MaxTerminationMessageBytes = 4096

// CheckoutOutcome is the machine-readable outcome of `metallo
// workspace-init`, written where the helper Pod's termination message is
// read (docs/site-runtime.md#workspace-checkout-metallo-workspace-init).
// A succeeded outcome carries no reason; a failed or refused one carries
// a reason of the protocol's vocabulary whose outcome it is.
type CheckoutOutcome struct {
	Outcome siteprotocol.Outcome `json:"outcome"`
	Reason  siteprotocol.Reason  `json:"reason,omitempty"`
	Message string               `json:"message"`
	// Commit is the checked-out commit (succeeded only).
	Commit string `json:"commit,omitempty"`
	// Bytes is what the checkout occupies: Git objects, LFS objects and
	// the working tree, in bytes.
	Bytes int64 `json:"bytes,omitempty"`
	// LFSObjects is the number of LFS objects fetched and verified.
	LFSObjects int `json:"lfs_objects,omitempty"`
	// Verified is true when a complete checkout of the commit was already
	// in place and was verified without fetching.
	Verified bool `json:"verified,omitempty"`
	// Fetch is "shallow" or "full" (the fallback for a host that refuses
	// a shallow fetch of an unadvertised commit); empty when verified.
	Fetch string `json:"fetch,omitempty"`
}

// CheckoutFailed returns the outcome of reason (its protocol outcome) with
// the message.
func CheckoutFailed(reason siteprotocol.Reason, format string, args ...any) CheckoutOutcome {
	o, _ := reason.Outcome()
	return CheckoutOutcome{Outcome: o, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Encode returns the outcome as one JSON line of at most
// MaxTerminationMessageBytes, shortening the message when needed.
func (o CheckoutOutcome) Encode() []byte {
	for {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(o) // strings and numbers always encode; Encode ends the line
		if buf.Len() <= MaxTerminationMessageBytes || o.Message == "" {
			return buf.Bytes()
		}
		b := buf.Bytes()
		o.Message = truncate(o.Message, len(o.Message)-(len(b)-MaxTerminationMessageBytes)-16)
	}
}

func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ParseCheckoutOutcome reads a termination message written by
// workspace-init: exactly the CheckoutOutcome shape, a succeeded outcome
// without a reason, or a reason of the vocabulary with its outcome.
func ParseCheckoutOutcome(b []byte) (CheckoutOutcome, error) {
	var o CheckoutOutcome
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return CheckoutOutcome{}, fmt.Errorf("checkout outcome: %w", err)
	}
	switch want, known := o.Reason.Outcome(); {
	case o.Outcome == siteprotocol.OutcomeSucceeded && o.Reason == "":
	case !known || want != o.Outcome || o.Outcome == siteprotocol.OutcomeSucceeded:
		return CheckoutOutcome{}, fmt.Errorf("checkout outcome: %s with reason %q is not an outcome of the vocabulary", o.Outcome, o.Reason)
	}
	return o, nil
}
