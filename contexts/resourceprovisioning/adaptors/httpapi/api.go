// Package httpapi serves Resource Provisioning's routes under
// /resource-provisioning on the process's Huma API (tag
// resource_provisioning): report, account report and Beto event intake, the
// agent's account lookup, and the reads (snapshot, a Project's allocations
// and accounts, the change feed, binding conflicts, an environment's desired
// bindings, an allocation's accounts; members.go).
// Errors are RFC 9457 problem details with a reason: the snake_case
// domain reasons (stale_report, allocation_retired, report_conflict,
// event_conflict, allocation_unknown, binding_mismatch) and the platform's
// kebab-case generic ones (validation-failed, malformed, invalid-cursor,
// unknown-environment, forbidden, unavailable); bad input is
// always a 4xx and stores nothing. Each operation declares the principals
// it admits (httpserver.AdmitMetadata), so a wrong credential is 403 before
// the body is read; the handlers check again (docs/resource-provisioning.md#routes,
// #report-intake, #the-project-view).
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

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// Tag is the OpenAPI tag of every operation.
const Tag = "resource_provisioning"

// betoPrincipal is the only principal allowed to post Beto events.
func betoPrincipal() auth.Principal { return auth.Principal{Kind: auth.KindService, ID: "beto"} }

// bodyRules documents guardJSONBody's checks of a posted body.
const bodyRules = "The body must be declared `application/json` (or a `+json` type; none or another is 415). " +
	"A body that is not one I-JSON value (not JSON, invalid UTF-8, an escaped lone surrogate, a member " +
	"name repeated in one object, data after the value) is 400 `malformed`; a null anywhere (leave optional members " +
	"out) or a control character such as NUL in any string is 422 `validation-failed` naming the member. One 422 names " +
	"every bad field at once: numbers that do not fit their integer field (a fraction, an exponent, beyond 64 bits), " +
	"schema failures and the intake's own rules. Nothing is stored."

// ReasonInvalidCursor is the problem reason of a cursor this API never
// issued (400).
const ReasonInvalidCursor = "invalid-cursor"

// ReasonUnavailable is the problem reason (503) of a request the store
// could not serve now (the database unreachable, dropped, refusing logins,
// shutting down, or a SQLite file locked or unreadable). The answer carries
// Retry-After and never the driver's text.
const ReasonUnavailable = "unavailable"

// RetryAfterSeconds is the Retry-After of a 503 unavailable answer.
const RetryAfterSeconds = "5"

// reporterOperation completes the document of a Site agent's route
// (…/{site}/…): it admits exactly site:<site>, checked before the body is
// read.
func reporterOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	admit := httpserver.AdmitMetadata(httpserver.AdmitPathPrincipal(auth.KindSite, "site"))
	return operation(op, httpserver.WithPrincipals(admit, auth.KindSite+":{site}"), reasons)
}

// betoOperation completes the document of the Beto event intake: it
// admits only service:beto, checked before the body is read.
func betoOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	admit := httpserver.AdmitMetadata(func(p auth.Principal, _ func(string) string) error { return admitOnly(p, betoPrincipal()) })
	return operation(op, httpserver.WithPrincipals(admit, betoPrincipal().String()), reasons)
}

// readerOperation completes the document of a read: it admits any
// service principal (service:*).
func readerOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	admit := httpserver.AdmitMetadata(httpserver.AdmitKinds(auth.KindService))
	return operation(op, httpserver.WithPrincipals(admit, auth.KindService+":*"), reasons)
}

// operation completes op with what every operation here shares: the tag,
// bearer security, the admit metadata with its principals, the reasons
// answered per problem status (httpserver.WithReasons, which adds 401,
// 403, 500 and 503 unavailable) and the errors declared: every status of
// those reasons. The route sweep fails on a reason answered but not listed
// (docs/testing.md#the-route-sweep).
func operation(op huma.Operation, admit map[string]any, reasons map[int][]string) huma.Operation {
	op.Tags = []string{Tag}
	op.Security = httpserver.Bearer()
	op.Metadata = httpserver.WithReasons(admit, reasons)
	op.Errors = slices.Sorted(maps.Keys(httpserver.ReasonsOf(&op)))
	return op
}

// readReasons are the reasons of a read per problem status beyond those
// every operation shares: a parameter that breaks its schema or is not
// text is 422 validation-failed; a cancelled request is 503 cancelled.
func readReasons() map[int][]string {
	return map[int][]string{
		http.StatusUnprocessableEntity: {domain.ReasonValidation},
		http.StatusServiceUnavailable:  {ReasonCancelled},
	}
}

// cursorReasons are readReasons and 400 invalid-cursor: the reasons of a
// paginated read.
func cursorReasons() map[int][]string {
	r := readReasons()
	r[http.StatusBadRequest] = []string{ReasonInvalidCursor}
	return r
}

// intakeReasons are the reasons of a posted body (guardJSONBody and Huma's
// own body checks) and the intake's 409 conflicts: 400 malformed (not one
// I-JSON value) or invalid-request (an empty or unreadable body), 408
// request-timeout (the body did not arrive within the read deadline), 413
// payload-too-large, 415 unsupported-media-type and 422 validation-failed.
func intakeReasons(conflicts ...string) map[int][]string {
	r := readReasons()
	r[http.StatusBadRequest] = []string{ReasonMalformed, httpserver.DefaultReason(http.StatusBadRequest)}
	r[http.StatusRequestTimeout] = []string{httpserver.ReasonRequestTimeout}
	r[http.StatusConflict] = conflicts
	r[http.StatusRequestEntityTooLarge] = []string{httpserver.DefaultReason(http.StatusRequestEntityTooLarge)}
	r[http.StatusUnsupportedMediaType] = []string{httpserver.DefaultReason(http.StatusUnsupportedMediaType)}
	return r
}

// ReasonCancelled is the problem reason (503) of a request cancelled
// before it finished.
const ReasonCancelled = "cancelled"

// API registers the routes. A nil service registers them for the OpenAPI
// document only.
type API struct {
	svc *application.Service
	log *zap.Logger
}

// New returns the routes of svc; log receives unexpected errors.
func New(svc *application.Service, log *zap.Logger) *API {
	if log == nil {
		log = zap.NewNop()
	}
	return &API{svc: svc, log: log}
}

// Register implements httpserver.Registrar.
func (a *API) Register(api huma.API) {
	reg := api.OpenAPI().Components.Schemas
	huma.Register(api, reporterOperation(huma.Operation{
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
		Middlewares: huma.Middlewares{guardJSONBody(reg, a.reportsBody)}}, intakeReasons(domain.ReasonStaleReport, domain.ReasonAllocationRetired, domain.ReasonReportConflict)), a.submitReports)
	huma.Register(api, betoOperation(huma.Operation{
		OperationID: "receive-beto-event",
		Method:      http.MethodPost,
		Path:        "/resource-provisioning/events/beto",
		Summary:     "Receive one encoded Beto event",
		Description: "`project.ProjectChanged` builds the Project view (a canonical Project's Waldur provider " +
			"Projects); `party.PartyProviderBindingChanged` the Party binding view. A receipt per event_id: an " +
			"identical duplicate answers `duplicate`, the same event_id with other content is 409 `event_conflict`. " +
			"An event whose revision is not newer than the view's is recorded and answers `ignored`. Events never " +
			"rewrite allocations: the next report of an allocation resolves its Project. Canonical IDs " +
			"(`project.id`, `memberships[].party_id`, `binding.id`, `binding.party_id`) are lower-case UUIDs; " +
			"`occurred_at` has at most microsecond precision. " + bodyRules + " Only `service:beto` may post (any other " +
			"key is 403 `forbidden` before the body is read).",
		Middlewares: huma.Middlewares{guardJSONBody(reg, a.betoEventBody)}}, intakeReasons(domain.ReasonEventConflict)), a.receiveBetoEvent)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "list-allocations",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/allocations",
		Summary:     "The complete allocation snapshot, paginated",
		Description: "Every allocation in a stable order (by ID) with an opaque cursor. The first page carries " +
			"`changes_cursor`, the change feed position captured before paging began: after the last page, " +
			"follow `GET /resource-provisioning/changes?after=<changes_cursor>` and apply only newer revisions. " +
			"Lifecycle and freshness are computed at read time. A cursor this API did not issue is 400 " +
			"`invalid-cursor`."}, cursorReasons()), a.listAllocations)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "project-allocations",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/projects/{project}/allocations",
		Summary:     "A Project's allocations, with lifecycle and freshness",
		Description: "The allocations bound to a canonical Project (a lower-case UUID), at one Site (`site`) or all. An allocation " +
			"not seen within the freshness bound (default 15 minutes) reads `fresh: false` and, unless suspended " +
			"or retired, `pending` with reason `stale`. A store that cannot be read is 503, never a guess."}, readReasons()), a.projectAllocations)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "allocation-changes",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/changes",
		Summary:     "AllocationChanged and MemberBindingChanged events in commit order after a cursor",
		Description: "The change feed: one AllocationChanged per material change of an allocation (in `allocation`) " +
			"and one MemberBindingChanged per material change of a Runtime member binding (in `binding`), in " +
			"commit order; `type` says which. A change " +
			"that commits late is never skipped: positions are taken under one lock held until commit. Pass " +
			"`next_cursor` as `after` to continue. A cursor this API did not issue (malformed, or a position beyond " +
			"the feed head) is 400 `invalid-cursor`."}, cursorReasons()), a.changes)
	huma.Register(api, readerOperation(huma.Operation{
		OperationID: "project-binding-conflicts",
		Method:      http.MethodGet,
		Path:        "/resource-provisioning/project-binding-conflicts",
		Summary:     "Provider Projects claimed by several canonical Projects",
		Description: "Conflicts are kept visible, never resolved by guessing: allocations of these provider " +
			"Projects stay `pending` with `project_unbound`."}, readReasons()), a.bindingConflicts)
	a.registerInconsistencies(api)
	a.registerMembers(api, reg)
	documentExamples(api)
}

// problem maps an application error to a problem; unexpected errors are
// logged and answered 500 without detail.
func (a *API) problem(op string, err error) error {
	var (
		ve *domain.ValidationError
		ce *domain.ConflictError
	)
	switch {
	case errors.As(err, &ve):
		details := make([]*huma.ErrorDetail, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			details = append(details, &huma.ErrorDetail{Location: p.Location, Message: p.Message, Value: p.Value})
		}
		return httpserver.NewProblem(http.StatusUnprocessableEntity, domain.ReasonValidation, "the request breaks a validation rule; nothing was stored", details...)
	case errors.As(err, &ce):
		details := make([]*huma.ErrorDetail, 0, len(ce.Refusals))
		for _, r := range ce.Refusals {
			details = append(details, &huma.ErrorDetail{Location: r.Location, Message: r.Reason + ": " + r.Detail})
		}
		return httpserver.NewProblem(http.StatusConflict, ce.Reason(), "refused; nothing was stored: "+ce.Refusals[0].Detail, details...)
	case errors.Is(err, application.ErrUnknownEnvironment):
		return httpserver.NewProblem(http.StatusNotFound, ReasonUnknownEnvironment, err.Error())
	case errors.Is(err, application.ErrUnknownCursor):
		return httpserver.NewProblem(http.StatusBadRequest, ReasonInvalidCursor, "the cursor was not issued by this API: "+err.Error())
	case errors.Is(err, application.ErrUnavailable):
		// The detail never carries the driver's text (it can name the
		// database's host, user or file); the log does.
		a.log.Warn("resource provisioning store unavailable", zap.String("operation", op), zap.Error(err), zap.String("cause", database.LogCause(err)))
		return huma.ErrorWithHeaders(
			httpserver.NewProblem(http.StatusServiceUnavailable, ReasonUnavailable, "the allocation store cannot be reached now; retry later"),
			http.Header{"Retry-After": {RetryAfterSeconds}})
	case errors.Is(err, context.Canceled):
		return httpserver.NewProblem(http.StatusServiceUnavailable, ReasonCancelled, "the request was cancelled before it finished; nothing was stored")
	}
	a.log.Error("resource provisioning request failed", zap.String("operation", op), zap.Error(err))
	return httpserver.NewProblem(http.StatusInternalServerError, "internal-error", "internal error")
}

// requireSite admits only site:<site>.
func requireSite(ctx context.Context, site string) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return httpserver.NewProblem(http.StatusUnauthorized, "unauthenticated", "a bearer credential is required")
	}
	if !p.Is(auth.KindSite, site) {
		return httpserver.NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not report for Site %s", p, site))
	}
	return nil
}

// requireKind admits any principal of kind (e.g. service:*).
func requireKind(ctx context.Context, kind string) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return httpserver.NewProblem(http.StatusUnauthorized, "unauthenticated", "a bearer credential is required")
	}
	if p.Kind != kind {
		return httpserver.NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not read allocations; a %s:* key is required", p, kind))
	}
	return nil
}

// requirePrincipal admits only want.
func requirePrincipal(ctx context.Context, want auth.Principal) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return httpserver.NewProblem(http.StatusUnauthorized, "unauthenticated", "a bearer credential is required")
	}
	return admitOnly(p, want)
}

// admitOnly is 403 unless p is want.
func admitOnly(p, want auth.Principal) error {
	if p != want {
		return httpserver.NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not post here; only %s may", p, want))
	}
	return nil
}
