// Package httpowners is the HTTP owner adaptor of execution_ports
// (docs/execution-ports.md#owner-adaptors): ProjectResources read from the provisioning
// role's API, GET /resource-provisioning/projects/{project}/allocations?site=;
// MemberAccounts from GET /resource-provisioning/projects/{project}/accounts
// and MemberBindings from GET /resource-provisioning/environments/{environment}/bindings,
// with a service key. Reads are live: the owner judges freshness when it
// answers. Any failure to get a well-formed answer is
// application.ErrResourceLookupUnavailable, never a guess.
package httpowners

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// DefaultTimeout bounds one owner read.
const DefaultTimeout = 10 * time.Second

// maxAnswerBytes bounds an owner answer.
const maxAnswerBytes = 16 << 20

// Resources implements application.ProjectResources over HTTP.
type Resources struct {
	base   *url.URL
	key    string
	client *http.Client
}

var (
	_ application.ProjectResources = (*Resources)(nil)
	_ application.MemberAccounts   = (*Resources)(nil)
	_ application.MemberBindings   = (*Resources)(nil)
)

// New returns the adaptor for the provisioning role at baseURL (scheme and
// host, optionally a path prefix) authenticating with key. client nil means
// a client with DefaultTimeout.
func New(baseURL, key string, client *http.Client) (*Resources, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provisioning URL %q: want an absolute http(s) URL", baseURL)
	}
	if key == "" {
		return nil, fmt.Errorf("provisioning key is empty")
	}
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	return &Resources{base: u, key: key, client: client}, nil
}

// ReadKeyFile reads a bearer key from path (surrounding whitespace
// removed); it fails on an empty file.
func ReadKeyFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read provisioning key file: %w", err)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" {
		return "", fmt.Errorf("provisioning key file %s is empty", path)
	}
	return key, nil
}

// AllocationJSON is one allocation in the owner's answer.
type AllocationJSON struct {
	ID                 string           `json:"id"`
	Site               string           `json:"site"`
	ProjectID          string           `json:"project_id"`
	ProviderResourceID string           `json:"provider_resource_id"`
	OfferingID         string           `json:"offering_id"`
	ProviderProjectID  string           `json:"provider_project_id"`
	NativeScope        string           `json:"native_scope"`
	Lifecycle          string           `json:"lifecycle"`
	Reasons            []string         `json:"reasons"`
	ConfiguredLimits   map[string]int64 `json:"configured_limits"`
	AppliedLimits      map[string]int64 `json:"applied_limits"`
	WaldurState        string           `json:"waldur_state"`
	Paused             bool             `json:"paused"`
	Revision           int64            `json:"revision"`
	ObservedAt         time.Time        `json:"observed_at"`
	LastSeenAt         time.Time        `json:"last_seen_at"`
	Fresh              *bool            `json:"fresh"`
}

type answer struct {
	Allocations []AllocationJSON `json:"allocations"`
}

// ProjectAllocations implements application.ProjectResources.
func (r *Resources) ProjectAllocations(ctx context.Context, projectID, site string) ([]domain.Allocation, error) {
	u := r.base.JoinPath("resource-provisioning", "projects", projectID, "allocations")
	u.RawQuery = url.Values{"site": {site}}.Encode()
	var a answer
	if err := r.get(ctx, u, &a); err != nil {
		return nil, err
	}
	if a.Allocations == nil {
		return nil, fmt.Errorf("%w: answer of GET %s has no allocations member", application.ErrResourceLookupUnavailable, u.Redacted())
	}
	out := make([]domain.Allocation, 0, len(a.Allocations))
	for i, v := range a.Allocations {
		if v.ID == "" || v.Lifecycle == "" || v.Fresh == nil {
			return nil, fmt.Errorf("%w: answer of GET %s: allocations[%d] lacks id, lifecycle or fresh", application.ErrResourceLookupUnavailable, u.Redacted(), i)
		}
		out = append(out, domain.Allocation{
			ID: v.ID, Site: v.Site, ProjectID: v.ProjectID,
			Lifecycle: domain.Lifecycle(v.Lifecycle), Reasons: v.Reasons,
			AppliedLimits: v.AppliedLimits, ConfiguredLimits: v.ConfiguredLimits,
			LastSeenAt: v.LastSeenAt, Fresh: *v.Fresh,
		})
	}
	return out, nil
}

// get reads u with the service key and decodes a 200 answer into out; any
// other outcome is an error wrapping application.ErrResourceLookupUnavailable.
func (r *Resources) get(ctx context.Context, u *url.URL, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", application.ErrResourceLookupUnavailable, err)
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Accept", "application/json")
	if id := httpserver.RequestID(ctx); id != "" {
		// The provisioning role logs its side under the same request ID
		// (docs/operations.md#request-ids).
		req.Header.Set(httpserver.RequestIDHeader, id)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %w", application.ErrResourceLookupUnavailable, u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%w: read answer of GET %s: %w", application.ErrResourceLookupUnavailable, u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s answered %s: %s", application.ErrResourceLookupUnavailable, u.Redacted(), resp.Status, truncate(body, 512))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%w: decode answer of GET %s: %w", application.ErrResourceLookupUnavailable, u.Redacted(), err)
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
