package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// UnavailableDetail is the detail of every "unavailable" plan: a fixed
// sentence naming the owner. The cause is logged, never answered.
const UnavailableDetail = "the " + application.ResourcesOwner + " owner cannot be reached now; retry later"

// PlanRequest asks whether a demand fits a Project's allocation at an
// environment.
type PlanRequest struct {
	Project     string           `json:"project" pattern:"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" doc:"Canonical Project ID (lower-case UUID)."`
	Environment string           `json:"environment" minLength:"1" maxLength:"128" doc:"Execution environment ID; it maps to its Site through environments.yaml."`
	Demand      map[string]int64 `json:"demand" doc:"Demand in canonical units: cpu (millicores), memory and storage (bytes), gpu.<vendor> (devices). Values must not be negative."`
}

// Excess is one resource of a too_large demand.
type Excess struct {
	Resource string `json:"resource" doc:"The resource key, e.g. cpu, memory, gpu.nvidia."`
	Unit     string `json:"unit" enum:"cores,bytes,devices" doc:"The unit compared: cpu in whole cores (demand rounded up, limit rounded down), the rest exactly."`
	Demand   int64  `json:"demand" doc:"The demand in unit (cpu: whole cores, rounded up)."`
	Limit    int64  `json:"limit" doc:"The limit in unit (cpu: whole cores, rounded down); 0 when the allocation has no limit for the resource."`
	// The same demand and limit as given, in the canonical unit.
	CanonicalUnit   string `json:"canonical_unit" enum:"millicores,bytes,devices" doc:"The canonical unit of canonical_demand and canonical_limit: cpu in millicores, the rest as unit."`
	CanonicalDemand int64  `json:"canonical_demand" doc:"The demand as requested, in canonical_unit (e.g. 32001 millicores, compared as 33 cores)."`
	CanonicalLimit  int64  `json:"canonical_limit" doc:"The applied limit as set, in canonical_unit (e.g. 32000 millicores, compared as 32 cores)."`
}

// PlanBody is the planning answer.
type PlanBody struct {
	Answer      string `json:"answer" enum:"admissible,refused,unavailable" doc:"admissible: the demand fits the whole allocation's applied limits (it may still wait at the Site, whose quota decides); refused: see reason; unavailable: the owner could not be read."`
	Reason      string `json:"reason,omitempty" enum:"too_large,resource_suspended,not_ready,no_allocation,resource_ambiguous" doc:"Why the plan is refused."`
	Project     string `json:"project"`
	Environment string `json:"environment"`
	Site        string `json:"site"`
	// AllocationID is the allocation planned against or concerned.
	AllocationID     string           `json:"allocation_id,omitempty" doc:"The allocation planned against, or the one the refusal concerns."`
	Candidates       []string         `json:"candidates,omitempty" doc:"The allocations that made the plan ambiguous, or that are not ready or suspended."`
	LifecycleReasons []string         `json:"lifecycle_reasons,omitempty" doc:"The lifecycle reasons of a not_ready refusal (e.g. provisioning, limits_not_applied, stale)."`
	TooLarge         []Excess         `json:"too_large,omitempty" doc:"Every resource whose demand exceeds its limit."`
	Limits           map[string]int64 `json:"limits,omitempty" doc:"The applied limits planned against (canonical units)."`
	Detail           string           `json:"detail,omitempty" doc:"With unavailable: the fixed sentence 'the resource_provisioning owner cannot be reached now; retry later' (the cause is in the server log, never in the answer)."`
}

type planInput struct {
	Body PlanRequest
}

type planOutput struct {
	Body PlanBody
}

func (h *Handlers) planCapacityOperation() huma.Operation {
	// Not a stream route: no environment path, and an unreadable owner
	// is the answer unavailable, not 503.
	return operation(huma.Operation{
		OperationID: "plan-capacity", Method: http.MethodPost, Path: "/execution/v1/plans",
		Summary:      "Plan a demand against a Project's allocation",
		Description:  "Reads the Project's allocations at the environment's Site from their owner (resource_provisioning) live and answers admissible, refused (too_large with each resource's demand and limit, resource_suspended, not_ready with the lifecycle reasons, no_allocation, resource_ambiguous) or unavailable. CPU limits round down and CPU demands round up to whole cores; memory, storage and devices compare exactly; a demanded key without a limit has limit 0; a changing allocation plans against the applied limits still in force. Validation errors are 422 with each errors[].location naming the body field (body.project, body.environment, body.demand.<key>); the body must be declared JSON (application/json or a +json type, in any case, UTF-8; 415 otherwise), arrive whole (a body shorter than its Content-Length is 400 invalid-request) and be one I-JSON text: bytes that are not (not JSON, invalid UTF-8, a member twice, data after the value, nested deeper than 32 levels) are 400 invalid-request; a null or a NUL, a value of the wrong type and a number that does not fit its field are 422 validation-failed naming the member.",
		MaxBodyBytes: MaxRequestBytes + 1, // jsonBody enforces MaxRequestBytes itself
		Middlewares:  huma.Middlewares{jsonBody(MaxRequestBytes, "project", "environment", "demand"), bodyShape([]string{"project", "environment", "demand"}, "demand")},
	}, h.serviceAdmit(), map[int][]string{
		400: {httpserver.DefaultReason(http.StatusBadRequest)}, 408: {httpserver.ReasonRequestTimeout}, 413: {httpserver.DefaultReason(http.StatusRequestEntityTooLarge)}, 415: {httpserver.DefaultReason(http.StatusUnsupportedMediaType)}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity), siteprotocol.ProblemUnknownEnvironment},
	})
}

// planCapacity answers whether a demand fits a Project's allocation at an
// environment (docs/execution-ports.md#capacity-planning).
func (h *Handlers) planCapacity(ctx context.Context, in *planInput) (*planOutput, error) {
	if err := validateDemand(in.Body.Demand); err != nil {
		return nil, err
	}
	body := PlanBody{Project: in.Body.Project, Environment: in.Body.Environment}
	if env, err := h.Streams.Environment(in.Body.Environment); err == nil {
		body.Site = env.Site
	}
	plan, err := h.Planner.Plan(ctx, in.Body.Project, in.Body.Environment, in.Body.Demand)
	switch {
	case errors.Is(err, domain.ErrUnknownEnvironment):
		return nil, httpserver.NewProblem(http.StatusUnprocessableEntity, siteprotocol.ProblemUnknownEnvironment, err.Error(),
			&huma.ErrorDetail{Location: "body.environment", Message: "no such environment is configured", Value: in.Body.Environment})
	case errors.Is(err, application.ErrResourceLookupUnavailable):
		// The cause (a driver's or the remote owner's text, which can
		// name hosts, users and databases) is logged here, once; the
		// answer carries only the fixed UnavailableDetail.
		httpserver.RequestLog(ctx, h.Log).Warn("planning: the allocation owner cannot be read", zap.String("owner", application.ResourcesOwner), zap.Error(err), zap.String("cause", database.LogCause(err)))
		body.Answer, body.Detail = string(domain.PlanUnavailable), UnavailableDetail
		return &planOutput{Body: body}, nil
	case err != nil:
		return nil, h.problem(ctx, err, "")
	}
	fillPlan(&body, plan)
	return &planOutput{Body: body}, nil
}

func fillPlan(body *PlanBody, p domain.Plan) {
	body.Answer = string(p.Answer)
	body.Reason = string(p.Reason)
	body.AllocationID = p.AllocationID
	body.Candidates = p.Candidates
	body.LifecycleReasons = p.LifecycleReasons
	body.Limits = p.Limits
	for _, e := range p.TooLarge {
		body.TooLarge = append(body.TooLarge, Excess{Resource: e.Resource, Unit: e.Unit, Demand: e.Demand, Limit: e.Limit,
			CanonicalUnit: e.CanonicalUnit, CanonicalDemand: e.CanonicalDemand, CanonicalLimit: e.CanonicalLimit})
	}
}

// validateDemand refuses unknown resource keys and negative values (422,
// each error naming its key).
func validateDemand(demand map[string]int64) error {
	keys := slices.Sorted(maps.Keys(demand))
	var errs []*huma.ErrorDetail
	for _, k := range keys {
		v := demand[k]
		switch {
		case k != "storage" && !siteprotocol.ValidDemandKey(k):
			errs = append(errs, &huma.ErrorDetail{Location: "body.demand." + k, Message: "unknown resource key: use cpu (millicores), memory or storage (bytes), gpu.<vendor> (devices)", Value: v})
		case v < 0:
			errs = append(errs, &huma.ErrorDetail{Location: "body.demand." + k, Message: "must not be negative", Value: v})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return httpserver.NewProblem(http.StatusUnprocessableEntity, httpserver.DefaultReason(http.StatusUnprocessableEntity),
		fmt.Sprintf("%d demand value(s) refused", len(errs)), errs...)
}
