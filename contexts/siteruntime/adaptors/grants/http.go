// Package grants holds the Site Runtime's RepositoryGrants adaptors
// (docs/site-runtime.md#repository-grants): an HTTP client of the grant
// provider contract, and a file of Site credentials for standalone Sites.
// Composition chooses one explicitly (--repository-grants http:<url> or
// file:<file>); there is no default.
package grants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// DefaultBound is how long the HTTP adaptor keeps asking an unavailable
// provider before the grant is unavailable (2 minutes, the permission
// provider's bound).
const DefaultBound = 2 * time.Minute

// IdempotencyKeyHeader carries the request's idempotency key.
const IdempotencyKeyHeader = "Idempotency-Key"

// RequestTimeout bounds one request to the provider (10 s); a try that
// runs past it is unavailable and retried within the bound.
const RequestTimeout = 10 * time.Second

// HTTPConfig configures the HTTP adaptor.
type HTTPConfig struct {
	// BaseURL is the provider's base URL; grants live under
	// <BaseURL>/v1/repository-grants.
	BaseURL string
	// Bound is how long an unavailable provider is retried (default
	// DefaultBound).
	Bound time.Duration
	// BackoffInitial and BackoffMax bound the capped exponential backoff
	// between tries (defaults 200 ms and 10 s); each wait gets up to 50 % jitter.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// Client is the HTTP client (default: the system roots and
	// RequestTimeout per request).
	Client *http.Client
}

// HTTP is the grant provider's HTTP client
// (docs/site-runtime.md#repository-grants):
//
//	POST <base>/v1/repository-grants
//	Idempotency-Key: <key>
//	{"member_id", "project_id", "repository_url", "run_id", "attempt_id"}
//	→ 200 or 201 {"grant_id", "username", "token", "expires_at": RFC 3339}
//	→ 403 {"reason"}: denied (ErrGrantDenied), not retried
//
//	DELETE <base>/v1/repository-grants/<grant_id>
//	→ 204, also for a grant already revoked or unknown
//
// Any other answer — a transport error, another status, a body that is
// not exactly that shape, an expiry already past — is unavailable: asked
// again (with the same idempotency key) with capped exponential backoff
// until Bound has passed since the first try, then the call fails
// wrapping application.ErrGrantUnavailable.
type HTTP struct {
	cfg   HTTPConfig
	base  string
	clock application.Clock
}

// NewHTTP returns the HTTP adaptor.
func NewHTTP(cfg HTTPConfig, clock application.Clock) *HTTP {
	if cfg.Bound <= 0 {
		cfg.Bound = DefaultBound
	}
	if cfg.BackoffInitial <= 0 {
		cfg.BackoffInitial = 200 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffInitial {
		cfg.BackoffMax = max(cfg.BackoffInitial, 10*time.Second)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: RequestTimeout}
	}
	return &HTTP{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/") + "/v1/repository-grants", clock: clock}
}

type issueRequest struct {
	MemberID      string `json:"member_id"`
	ProjectID     string `json:"project_id"`
	RepositoryURL string `json:"repository_url"`
	RunID         string `json:"run_id"`
	AttemptID     string `json:"attempt_id"`
}

type grantAnswer struct {
	GrantID   *string `json:"grant_id"`
	Username  *string `json:"username"`
	Token     *string `json:"token"`
	ExpiresAt *string `json:"expires_at"`
}

type denial struct {
	Reason string `json:"reason"`
}

// errDenied is a provider's refusal: final, never retried.
type errDenied struct{ reason string }

func (e *errDenied) Error() string { return e.reason }

// Issue asks the provider for the grant; see HTTP.
func (h *HTTP) Issue(ctx context.Context, req domain.GrantRequest) (domain.RepositoryGrant, error) {
	if err := req.Validate(); err != nil {
		return domain.RepositoryGrant{}, err
	}
	body, err := json.Marshal(issueRequest{MemberID: req.MemberID, ProjectID: req.ProjectID, RepositoryURL: req.RepositoryURL, RunID: req.RunID, AttemptID: req.AttemptID})
	if err != nil {
		return domain.RepositoryGrant{}, fmt.Errorf("encode the grant request: %w", err)
	}
	var g domain.RepositoryGrant
	err = h.retry(ctx, "issue a grant at "+h.base, func() error {
		var err error
		g, err = h.issue(ctx, req.IdempotencyKey, body)
		return err
	})
	return g, err
}

// Revoke withdraws the grant; see HTTP.
func (h *HTTP) Revoke(ctx context.Context, grantID string) error {
	if !domain.PrintableKey(grantID) {
		return fmt.Errorf("grant ID %q: must be 1-255 printable ASCII characters", grantID)
	}
	u := h.base + "/" + url.PathEscape(grantID)
	return h.retry(ctx, "revoke grant "+grantID+" at "+h.base, func() error { return h.revoke(ctx, u) })
}

// retry runs try until it succeeds, is denied, ctx ends, or the bound
// passes.
func (h *HTTP) retry(ctx context.Context, what string, try func() error) error {
	deadline := h.clock.Now().Add(h.cfg.Bound)
	steps := wait.Backoff{Duration: h.cfg.BackoffInitial, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: h.cfg.BackoffMax}
	for attempt := 1; ; attempt++ {
		err := try()
		var denied *errDenied
		switch {
		case err == nil:
			return nil
		case errors.As(err, &denied):
			return fmt.Errorf("%w: %s", application.ErrGrantDenied, denied.reason)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		pause := steps.Step()
		if !h.clock.Now().Add(pause).Before(deadline) {
			return fmt.Errorf("%w: %s: no usable answer within %s (%d tries); last: %v", application.ErrGrantUnavailable, what, h.cfg.Bound, attempt, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// do sends one request and reads at most 64 KiB of the answer.
func (h *HTTP) do(req *http.Request) (int, []byte, error) {
	req.Header.Set("Accept", "application/json")
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, raw, err
}

func (h *HTTP) issue(ctx context.Context, key string, body []byte) (domain.RepositoryGrant, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base, bytes.NewReader(body))
	if err != nil {
		return domain.RepositoryGrant{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, key)
	status, raw, err := h.do(req)
	if err != nil {
		return domain.RepositoryGrant{}, err
	}
	switch status {
	case http.StatusOK, http.StatusCreated:
	case http.StatusForbidden:
		var d denial
		if json.Unmarshal(raw, &d) != nil || d.Reason == "" {
			return domain.RepositoryGrant{}, fmt.Errorf("answered 403 without a reason: %.200s", raw)
		}
		return domain.RepositoryGrant{}, &errDenied{reason: d.Reason}
	default:
		return domain.RepositoryGrant{}, fmt.Errorf("answered %d: %.200s", status, raw)
	}
	var a grantAnswer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return domain.RepositoryGrant{}, fmt.Errorf("answer is not the contract's shape: %w", err)
	}
	if a.GrantID == nil || a.Username == nil || a.Token == nil || a.ExpiresAt == nil {
		return domain.RepositoryGrant{}, errors.New("answer lacks one of grant_id, username, token, expires_at")
	}
	g := domain.RepositoryGrant{GrantID: *a.GrantID, Username: *a.Username, Token: *a.Token}
	if err := checkGrant(g); err != nil {
		return domain.RepositoryGrant{}, err
	}
	if g.ExpiresAt, err = time.Parse(time.RFC3339, *a.ExpiresAt); err != nil {
		return domain.RepositoryGrant{}, fmt.Errorf("expires_at: %w", err)
	}
	if !h.clock.Now().Before(g.ExpiresAt) {
		return domain.RepositoryGrant{}, fmt.Errorf("grant %s already expired at %s", g.GrantID, *a.ExpiresAt)
	}
	return g, nil
}

// checkGrant refuses a grant Git could not use: a grant ID that is not
// 1-255 printable ASCII characters, an empty username or one holding ':'
// (HTTP basic), an empty token or one holding a control character.
func checkGrant(g domain.RepositoryGrant) error {
	switch {
	case !domain.PrintableKey(g.GrantID):
		return errors.New("grant_id must be 1-255 printable ASCII characters")
	case g.Username == "" || strings.ContainsAny(g.Username, ":\n\r\x00"):
		return errors.New("username must be non-empty, without ':' or control characters")
	case g.Token == "" || strings.ContainsAny(g.Token, "\n\r\x00"):
		return errors.New("token must be non-empty, on one line")
	}
	return nil
}

func (h *HTTP) revoke(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return err
	}
	status, raw, err := h.do(req)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("answered %d: %.200s", status, raw)
	}
	return nil
}

var _ application.RepositoryGrants = (*HTTP)(nil)
