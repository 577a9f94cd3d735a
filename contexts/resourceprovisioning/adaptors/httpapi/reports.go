package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// ReportBody is one resource report, in the agent's Waldur vocabulary.
type ReportBody struct {
	ProviderResourceID string           `json:"provider_resource_id" minLength:"1" maxLength:"256" doc:"Waldur marketplace resource UUID." example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
	OfferingID         string           `json:"offering_id" minLength:"1" maxLength:"256" doc:"Waldur offering UUID." example:"9b8e7d6c5b4a43219f8e7d6c5b4a3210"`
	ProviderProjectID  string           `json:"provider_project_id" minLength:"1" maxLength:"256" doc:"Waldur Project UUID; resolved to a canonical Project through the Project view." example:"0a1b2c3d4e5f40718293a4b5c6d7e8f9"`
	State              string           `json:"state" enum:"Creating,OK,Erred,Updating,Terminating,Terminated" doc:"Waldur resource state." example:"OK"`
	Paused             bool             `json:"paused" doc:"Waldur's paused flag (a paused allocation is suspended)."`
	Limits             map[string]int64 `json:"limits" doc:"Configured limits in canonical units: cpu (millicores), memory and storage (bytes), gpu.<vendor> (devices)." example:"{\"cpu\":32000,\"memory\":137438953472,\"storage\":536870912000,\"gpu.nvidia\":2}"`
	AppliedLimits      map[string]int64 `json:"applied_limits,omitempty" doc:"What the Site enforces (the namespace quota read back), same units; omit until confirmed." example:"{\"cpu\":32000,\"memory\":137438953472,\"storage\":536870912000,\"gpu.nvidia\":2}"`
	NativeScope        string           `json:"native_scope,omitempty" maxLength:"256" doc:"The namespace at the Site; empty until created." example:"waldur-alpha-gpu-ns"`
	ObservedAt         time.Time        `json:"observed_at" doc:"When the agent read these facts (orders the reports of one allocation; microsecond precision)." example:"2026-08-20T10:15:02.123456Z"`
}

// ToDomain converts the wire report.
func (b ReportBody) ToDomain() domain.Report {
	return domain.Report{
		ProviderResourceID: b.ProviderResourceID, OfferingID: b.OfferingID, ProviderProjectID: b.ProviderProjectID,
		State: b.State, Paused: b.Paused, Limits: b.Limits, AppliedLimits: b.AppliedLimits,
		NativeScope: b.NativeScope, ObservedAt: b.ObservedAt,
	}
}

type submitReportsInput struct {
	Site string `path:"site" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" doc:"The Site; must match the caller's site:<id> key." example:"alpha"`
	Body struct {
		Reports []ReportBody `json:"reports" minItems:"1" maxItems:"100" doc:"1 to 100 reports, applied all or nothing."`
	}
}

// ReportResultBody is the outcome of one accepted report.
type ReportResultBody struct {
	ProviderResourceID string `json:"provider_resource_id" example:"3f1c9a0e6b2d4c0f9a7e5d1b2c3a4f50"`
	AllocationID       string `json:"allocation_id" doc:"UUIDv5 of <site>/<provider resource ID>." example:"6c3d1f0e-8f7b-5a55-9d43-0c2f3e1b9a77"`
	Outcome            string `json:"outcome" enum:"created,changed,renewed,duplicate" example:"created"`
	Revision           int64  `json:"revision" doc:"The allocation's revision after this report." example:"1"`
	Lifecycle          string `json:"lifecycle" enum:"pending,ready,changing,suspended,retired" example:"ready"`
}

type submitReportsOutput struct {
	Body struct {
		Results []ReportResultBody `json:"results" doc:"One result per report, in request order."`
	}
}

func (h *Handlers) submitReportsOperation(reg huma.Registry) huma.Operation {
	return reporterOperation(huma.Operation{
		OperationID: "submit-reports",
		Method:      http.MethodPost,
		Path:        "/resource-provisioning/{site}/reports",
		Summary:     "Report a Site's provider resources",
		Description: "The Site's agent reports 1–100 Waldur resources, applied all or nothing in one transaction. " +
			"The caller must be the key of `site:<site>`; another Site's key is 403. Each report answers `created`, " +
			"`changed` (a material change: revision + 1, a receipt and an AllocationChanged), `renewed` (newer " +
			"observed_at, nothing changed: only last_seen_at moves) or `duplicate` (same observed_at and content: " +
			"nothing moves). 409 with reason `stale_report` (older observed_at), `allocation_retired` (a " +
			"non-retiring report after Terminated) or `report_conflict` (same observed_at, other content) refuses " +
			"the whole batch. Limits are in canonical units: `cpu` millicores, `memory` and `storage` bytes, " +
			"`gpu.<vendor>` devices; any other key or a negative amount is 422 naming it. `observed_at` has at most " +
			"microsecond precision (finer is 422: both engines store microseconds) and may lie at most the configured " +
			"clock skew (--report-clock-skew, default 5m) beyond the server clock (later is 422 naming " +
			"`body.reports[i].observed_at`). " + bodyRules + " Only the key of `site:<site>` is admitted (any other " +
			"key is 403 `forbidden` before the body is read).",
		MaxBodyBytes: MaxIntakeBodyBytes + 1, // guardJSONBody reads at most MaxIntakeBodyBytes
		Middlewares:  huma.Middlewares{guardJSONBody(reg, h.reportsBody)}}, intakeReasons(domain.ReasonStaleReport, domain.ReasonAllocationRetired, domain.ReasonReportConflict))
}

// submitReports applies a batch of the Site agent's reports, all or nothing.
func (h *Handlers) submitReports(ctx context.Context, in *submitReportsInput) (*submitReportsOutput, error) {
	res, err := h.Service.SubmitReports(ctx, in.Site, reportsOf(in))
	if err != nil {
		return nil, h.problem(ctx, err)
	}
	out := &submitReportsOutput{}
	out.Body.Results = make([]ReportResultBody, len(res))
	for i, r := range res {
		out.Body.Results[i] = ReportResultBody{ProviderResourceID: r.ProviderResourceID, AllocationID: r.AllocationID, Outcome: r.Outcome, Revision: r.Revision, Lifecycle: r.Lifecycle}
	}
	return out, nil
}
