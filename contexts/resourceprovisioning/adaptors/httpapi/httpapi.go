// Package httpapi serves Resource Provisioning's routes under
// /resource-provisioning on the process's Huma API (tag
// resource_provisioning): report, account report and Beto event intake, the
// agent's account lookup, and the reads (snapshot, a Project's allocations
// and accounts, the change feed, binding conflicts, inconsistencies, an
// environment's desired bindings, an allocation's accounts), one file per
// use case, registered from one route table (routes). Errors are RFC 9457
// problem details with a reason: the context's snake_case domain reasons
// (stale_report, allocation_retired, report_conflict, event_conflict,
// allocation_unknown, binding_mismatch) and the platform's kebab-case ones
// (validation-failed, malformed, invalid-cursor, unknown-environment,
// forbidden, unavailable); bad input is always a 4xx and stores nothing.
// Admission is each operation's metadata alone (admit.go): the
// authentication middleware runs it before the body is read, and no
// handler checks the principal again (docs/resource-provisioning.md#routes,
// #report-intake, #the-project-view).
package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// Tag is the OpenAPI tag of every operation.
const Tag = "resource_provisioning"

// Handlers holds what the routes call. Registering with a zero Handlers
// documents the routes without serving them (metallo openapi).
type Handlers struct {
	Service *application.Service
	// Log receives unexpected errors.
	Log *zap.Logger
}

// Register adds the resource_provisioning operations to api: the routes of
// the context's one route table (routes), each its operation (the route's
// document: path, principal, statuses, examples) and its named handler,
// one file per use case.
func Register(api huma.API, h *Handlers) {
	if h.Log == nil {
		h.Log = zap.NewNop()
	}
	httpserver.Register(api, h.routes(api.OpenAPI().Components.Schemas)...)
}

// routes is the context's one route table: every route it serves, each its
// operation (with its documented examples, examples.json) and its handler.
func (h *Handlers) routes(reg huma.Registry) []httpserver.Route {
	ex := examplesByOperation()
	return []httpserver.Route{
		// The Site agent's routes (principal site:<site>).
		httpserver.NewRoute(withExamples(h.submitReportsOperation(reg), ex), h.submitReports),
		httpserver.NewRoute(withExamples(h.submitAccountsOperation(reg), ex), h.submitAccounts),
		httpserver.NewRoute(withExamples(h.accountLookupOperation(), ex), h.accountLookup),

		// Beto's event intake (principal service:beto).
		httpserver.NewRoute(withExamples(h.receiveBetoEventOperation(reg), ex), h.receiveBetoEvent),

		// The reads (any service principal).
		httpserver.NewRoute(withExamples(h.listAllocationsOperation(), ex), h.listAllocations),
		httpserver.NewRoute(withExamples(h.projectAllocationsOperation(), ex), h.projectAllocations),
		httpserver.NewRoute(withExamples(h.changesOperation(), ex), h.changes),
		httpserver.NewRoute(withExamples(h.bindingConflictsOperation(), ex), h.bindingConflicts),
		httpserver.NewRoute(withExamples(h.inconsistenciesOperation(), ex), h.inconsistencies),
		httpserver.NewRoute(withExamples(h.desiredBindingsOperation(), ex), h.desiredBindings),
		httpserver.NewRoute(withExamples(h.projectAccountsOperation(), ex), h.projectAccounts),
		httpserver.NewRoute(withExamples(h.allocationAccountsOperation(), ex), h.allocationAccounts),
	}
}

// withExamples returns op with its documented examples (examples.json, by
// operation ID), written into the document by httpserver.DocumentExamples.
func withExamples(op huma.Operation, byOperation map[string][]httpserver.Example) huma.Operation {
	op.Metadata = httpserver.WithExamples(op.Metadata, byOperation[op.OperationID]...)
	return op
}

// operation completes the document of one route with what every operation
// of the central roles shares (httpserver.BearerOperation), under Tag: the
// admit rule with its principals (admit.go) and the reasons per problem
// status.
func operation(op huma.Operation, admit map[string]any, reasons map[int][]string) huma.Operation {
	return httpserver.BearerOperation(op, Tag, admit, reasons)
}

// reporterOperation is the document of a Site agent's route (…/{site}/…),
// admitting exactly site:<site> (reporterAdmit).
func reporterOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	return operation(op, reporterAdmit(), reasons)
}

// betoOperation is the document of the Beto event intake, admitting only
// service:beto (betoAdmit).
func betoOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	return operation(op, betoAdmit(), reasons)
}

// readerOperation is the document of a read, admitting any service
// principal (readerAdmit).
func readerOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	return operation(op, readerAdmit(), reasons)
}

// bodyRules documents guardJSONBody's checks of a posted body.
const bodyRules = "The body must be declared JSON: `application/json` or a `+json` type, in any case, UTF-8 (none, " +
	"another type or another charset is 415). A body shorter than its Content-Length is 400 `invalid-request`. " +
	"A body that is not one I-JSON value (not JSON, invalid UTF-8, an escaped lone surrogate, a member " +
	"name repeated in one object, data after the value, nesting deeper than 32 levels) is 400 `malformed`; a null " +
	"anywhere (leave optional members out) or a control character such as NUL in any string is 422 " +
	"`validation-failed` naming the member. One 422 names every bad field at once: numbers that do not fit their " +
	"integer field (a fraction, an exponent, beyond 64 bits), schema failures and the intake's own rules. Nothing is stored."

// MaxIntakeBodyBytes bounds a report batch's and a Beto event's body (413
// payload-too-large beyond it; a body of exactly this many bytes is read).
const MaxIntakeBodyBytes = 1 << 20

// ReasonInvalidCursor is the problem reason of a cursor this API never
// issued (400).
const ReasonInvalidCursor = "invalid-cursor"

// ReasonUnknownEnvironment is the problem reason (404) of an environment
// that is not configured (environments.yaml).
const ReasonUnknownEnvironment = "unknown-environment"

// readReasons are the reasons of a read per problem status beyond those
// every operation shares (httpserver.WithReasons): a parameter that breaks
// its schema or is not text is 422 validation-failed.
func readReasons() map[int][]string {
	return map[int][]string{
		http.StatusUnprocessableEntity: {domain.ReasonValidation},
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
// I-JSON value) or invalid-request (a body that could not be read whole), 408
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

// problem maps an application error to its answer: the context's own
// errors here, then the platform's tail (httpserver.Failure): a store that
// cannot be reached (down, dropped, refusing logins, shutting down, a
// SQLite file locked or unreadable) is 503 unavailable with Retry-After,
// whose detail never carries the driver's text (it can name the database's
// host, user or file; the log line does), a cancelled request 503
// cancelled, anything else 500.
func (h *Handlers) problem(ctx context.Context, err error) error {
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
	}
	return httpserver.Failure(ctx, h.Log, err, httpserver.Unavailable{
		Err: application.ErrUnavailable, Detail: "the allocation store cannot be reached now; retry later", Log: "resource provisioning store unavailable",
	})
}
