package permissions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// DefaultBound is how long the HTTP adaptor keeps asking an unavailable
// provider before the check is unavailable
// (docs/site-runtime.md#access-before-every-native-start: 2 minutes).
const DefaultBound = 2 * time.Minute

// RequestTimeout bounds one request to the provider (10 s); a try that
// runs past it is unavailable and retried within the bound.
const RequestTimeout = 10 * time.Second

// HTTPConfig configures the HTTP adaptor.
type HTTPConfig struct {
	// BaseURL is the provider's base URL; checks go to
	// <BaseURL>/v1/access-checks.
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

// HTTP is the permission provider's HTTP client
// (docs/site-runtime.md#permission-providers): POST <base>/v1/access-checks with
// {member_id, project_id, action, run_id, attempt_id} → 200 {allowed,
// reason, evidence_id, valid_until}. Any other answer — a transport
// error, another status, a body that is not exactly that shape, a
// valid_until already past — is unavailable: asked again with capped
// exponential backoff until Bound has passed since the first try, then
// the check fails wrapping application.ErrPermissionUnavailable. Answers
// are never cached.
type HTTP struct {
	cfg   HTTPConfig
	url   string
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
	return &HTTP{cfg: cfg, url: strings.TrimRight(cfg.BaseURL, "/") + "/v1/access-checks", clock: clock}
}

type checkRequest struct {
	MemberID  string `json:"member_id"`
	ProjectID string `json:"project_id"`
	Action    string `json:"action"`
	RunID     string `json:"run_id"`
	AttemptID string `json:"attempt_id"`
}

type checkAnswer struct {
	Allowed    *bool   `json:"allowed"`
	Reason     *string `json:"reason"`
	EvidenceID *string `json:"evidence_id"`
	ValidUntil *string `json:"valid_until"`
}

// Check asks the provider; see HTTP.
func (h *HTTP) Check(ctx context.Context, q domain.PermissionQuery) (domain.Permission, error) {
	body, err := json.Marshal(checkRequest{MemberID: q.MemberID, ProjectID: q.ProjectID, Action: string(q.Action), RunID: q.RunID, AttemptID: q.AttemptID})
	if err != nil {
		return domain.Permission{}, fmt.Errorf("encode the access check: %w", err)
	}
	deadline := h.clock.Now().Add(h.cfg.Bound)
	steps := wait.Backoff{Duration: h.cfg.BackoffInitial, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: h.cfg.BackoffMax}
	for attempt := 0; ; attempt++ {
		p, err := h.ask(ctx, body)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return domain.Permission{}, ctx.Err()
		}
		pause := steps.Step()
		if !h.clock.Now().Add(pause).Before(deadline) {
			return domain.Permission{}, fmt.Errorf("%w: %s gave no usable answer within %s (%d tries); last: %v",
				application.ErrPermissionUnavailable, h.url, h.cfg.Bound, attempt+1, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return domain.Permission{}, ctx.Err()
		case <-t.C:
		}
	}
}

// ask makes one try; any error means "unavailable this time".
func (h *HTTP) ask(ctx context.Context, body []byte) (domain.Permission, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return domain.Permission{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return domain.Permission{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return domain.Permission{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return domain.Permission{}, fmt.Errorf("answered %d: %.200s", resp.StatusCode, raw)
	}
	var a checkAnswer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return domain.Permission{}, fmt.Errorf("answer is not the contract's shape: %w", err)
	}
	if a.Allowed == nil || a.Reason == nil || a.EvidenceID == nil || a.ValidUntil == nil {
		return domain.Permission{}, errors.New("answer lacks one of allowed, reason, evidence_id, valid_until")
	}
	until, err := time.Parse(time.RFC3339, *a.ValidUntil)
	if err != nil {
		return domain.Permission{}, fmt.Errorf("valid_until: %w", err)
	}
	if !h.clock.Now().Before(until) {
		return domain.Permission{}, fmt.Errorf("answer already expired at %s", *a.ValidUntil)
	}
	return domain.Permission{Allowed: *a.Allowed, Reason: *a.Reason, EvidenceID: *a.EvidenceID, ValidUntil: until}, nil
}

var _ application.RuntimePermissions = (*HTTP)(nil)
