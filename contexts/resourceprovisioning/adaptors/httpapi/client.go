package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// ReportsRequest is the body of POST /resource-provisioning/{site}/reports.
type ReportsRequest struct {
	Reports []ReportBody `json:"reports"`
}

// ReportFromDomain returns the wire form of r.
func ReportFromDomain(r domain.Report) ReportBody {
	return ReportBody{
		ProviderResourceID: r.ProviderResourceID, OfferingID: r.OfferingID, ProviderProjectID: r.ProviderProjectID,
		State: r.State, Paused: r.Paused, Limits: r.Limits, AppliedLimits: r.AppliedLimits,
		NativeScope: r.NativeScope, ObservedAt: r.ObservedAt,
	}
}

// NewReportsRequest returns the request body for reports.
func NewReportsRequest(reports []domain.Report) ReportsRequest {
	req := ReportsRequest{Reports: make([]ReportBody, 0, len(reports))}
	for _, r := range reports {
		req.Reports = append(req.Reports, ReportFromDomain(r))
	}
	return req
}

// ReportsURL returns the reports URL of site under base. A base whose path
// already ends in /reports is used as given; otherwise the route
// /resource-provisioning/<site>/reports is appended to it. base must be an
// absolute http or https URL.
func ReportsURL(base, site string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute URL", base)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q is not an http or https URL", base)
	}
	if strings.HasSuffix(u.Path, "/reports") {
		return u.String(), nil
	}
	return u.JoinPath("resource-provisioning", site, "reports").String(), nil
}

// ProblemError is a non-2xx answer of the API.
type ProblemError struct {
	Status int
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Body is the answer as received.
	Body []byte
}

func (e *ProblemError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Reason, e.Detail)
}

// PostReports posts one batch (1–100 reports) to reportsURL with the
// Site's bearer key and returns the raw JSON answer. A non-2xx answer is a
// *ProblemError.
func PostReports(ctx context.Context, client *http.Client, reportsURL, key string, reports []domain.Report) ([]byte, error) {
	body, err := json.Marshal(NewReportsRequest(reports))
	if err != nil {
		return nil, fmt.Errorf("encode reports: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, reportsURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post reports to %s: %w", reportsURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read answer of %s: %w", reportsURL, err)
	}
	if resp.StatusCode/100 != 2 {
		pe := &ProblemError{Status: resp.StatusCode, Body: out}
		_ = json.Unmarshal(out, pe)
		return nil, pe
	}
	return out, nil
}
