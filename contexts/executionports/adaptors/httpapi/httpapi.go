// Package httpapi serves the execution_ports routes on the process's Huma
// API (tag execution_ports): the Site protocol routes a Runtime calls
// (/site/v1/…, principal environment:<id> of the path's environment, header
// Metallo-Installation on every request) and Execution's routes
// (/execution/v1/…, a service principal from the configured set). Route
// table: docs/site-protocol.md#routes; planning:
// docs/execution-ports.md#capacity-planning. Every
// 4xx is RFC 9457 problem details with the protocol's kebab-case reason.
package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/ijson"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Tag is the OpenAPI tag of every operation here (the context's name).
const Tag = "execution_ports"

// DefaultService is the service principal ID that may call Execution's
// routes unless configured otherwise: keys.yaml's "service:execution".
const DefaultService = "execution"

// MaxResultBytes bounds a result body (the protocol's siteprotocol.MaxResultBytes): a read detail carries
// up to 1 MiB base64-encoded plus the envelope.
const MaxResultBytes = siteprotocol.MaxResultBytes

// MaxRequestBytes bounds the other JSON request bodies (rebind, plans).
const MaxRequestBytes = 1 << 20

// Handlers holds what the routes call. Registering with a zero Handlers
// documents the routes without serving them (metallo openapi).
type Handlers struct {
	Streams *application.Streams
	Planner *application.Planner
	// Deliverer answers the binding deliveries read (deliveries.go).
	Deliverer *application.Deliverer
	// Services are the service principal IDs allowed on /execution/v1
	// routes (default DefaultService).
	Services []string
	Log      *zap.Logger
}

// Register adds the execution_ports operations to api: the routes of the
// context's one route table (routes), each its operation (the route's
// document: path, principal, statuses) and its named handler, one file per
// use case. The document is complete as registered: the principals and
// reasons are documented by httpserver.DocumentAccess, the raw bodies by
// documentOperation, as Huma adds each operation.
func Register(api huma.API, h *Handlers) {
	if h.Log == nil {
		h.Log = zap.NewNop()
	}
	if len(h.Services) == 0 {
		h.Services = []string{DefaultService}
	}
	api.OpenAPI().OnAddOperation = append(api.OpenAPI().OnAddOperation, documentOperation)
	httpserver.Register(api, h.routes(api.OpenAPI().Components.Schemas)...)
}

// routes is the context's one route table: every route it serves, each its
// operation (with its documented examples) and its handler. Admission is
// the operation's metadata alone (admit.go): the authentication middleware
// runs it before the body is read, and no handler checks the principal
// again.
func (h *Handlers) routes(reg huma.Registry) []httpserver.Route {
	return []httpserver.Route{
		// Site protocol routes (principal environment:<id>).
		httpserver.NewRoute(withExamples(h.getStreamStateOperation(), streamStateExamples()), h.getStreamState),
		httpserver.NewRoute(withExamples(h.pullCommandsOperation(), pullExamples()), h.pullCommands),
		httpserver.NewRoute(withExamples(h.recordResultOperation(reg), resultExamples()), h.recordResult),
		httpserver.NewRoute(withExamples(h.reportStopOperation(), stopExamples()), h.reportStop),

		// Execution's routes (a configured service principal).
		httpserver.NewRoute(withExamples(h.appendCommandOperation(reg), appendExamples()), h.appendCommand),
		httpserver.NewRoute(withExamples(h.getCommandOperation(), commandExamples()), h.getCommand),
		httpserver.NewRoute(withExamples(h.rebindStreamOperation(), rebindExamples()), h.rebindStream),
		httpserver.NewRoute(withExamples(h.planCapacityOperation(), planExamples()), h.planCapacity),
		httpserver.NewRoute(withExamples(h.getBindingDeliveriesOperation(), deliveriesExamples()), h.getBindingDeliveries),

		// The operator's reads (an operator:<name> or a service principal).
		httpserver.NewRoute(withExamples(h.listEnvironmentsOperation(), environmentsExamples()), h.listEnvironments),
		httpserver.NewRoute(withExamples(h.listCommandsOperation(), commandsExamples()), h.listCommands),
		httpserver.NewRoute(withExamples(h.bindingHistoryOperation(), bindingHistoryExamples()), h.bindingHistory),
	}
}

// withExamples returns op with its documented examples (examples.go),
// written into the document by httpserver.DocumentExamples.
func withExamples(op huma.Operation, ex []httpserver.Example) huma.Operation {
	op.Metadata = httpserver.WithExamples(op.Metadata, ex...)
	return op
}

// operation completes the document of one route with what every operation
// of the central roles shares (httpserver.BearerOperation), under Tag: the
// admit rule with its principals (admit.go) and the reasons per problem
// status.
func operation(op huma.Operation, admit map[string]any, reasons map[int][]string) huma.Operation {
	return httpserver.BearerOperation(op, Tag, admit, reasons)
}

// streamOperation is operation for a route of a stream
// (…/streams/{environment}…): an environment that is not configured is 404
// before anything else runs (knownEnvironment, ahead of op's own
// middlewares).
func (h *Handlers) streamOperation(op huma.Operation, admit map[string]any, reasons map[int][]string) huma.Operation {
	op.Middlewares = append(huma.Middlewares{h.knownEnvironment}, op.Middlewares...)
	return operation(op, admit, reasons)
}

// siteOperation is the document of a Site protocol route: a stream route
// admitting the principal environment:<id> (siteAdmit) and documenting the
// Metallo-Installation header (installationParameters).
func (h *Handlers) siteOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	op.Parameters = installationParameters()
	return h.streamOperation(op, h.siteAdmit(), reasons)
}

// serviceOperation is the document of one of Execution's stream routes,
// admitting a configured service principal (serviceAdmit).
func (h *Handlers) serviceOperation(op huma.Operation, reasons map[int][]string) huma.Operation {
	return h.streamOperation(op, h.serviceAdmit(), reasons)
}

// siteReadReasons are the reasons of a Site read (the stream's state, a
// pull) per problem status.
func siteReadReasons() map[int][]string {
	return map[int][]string{
		400: {siteprotocol.ProblemInstallationRequired}, 404: {siteprotocol.ProblemUnknownEnvironment},
		409: {siteprotocol.ProblemInstallationMismatch}, 422: {httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	}
}

func principalOf(ctx context.Context) string {
	p, _ := auth.FromContext(ctx)
	return p.String()
}

func prefixed(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, auth.KindService+":"+id)
	}
	return out
}

// problem maps a service error to problem details: the protocol's own
// errors here (invalidReason is the reason for a malformed or invalid body:
// invalid-command / invalid-result), then the platform's tail
// (httpserver.Failure): the stream store, or what unavailable names, that
// cannot be reached now is 503 unavailable with Retry-After and a fixed
// detail (the cause is logged, never answered), a cancelled request 503
// cancelled, anything else 500, logged once.
func (h *Handlers) problem(ctx context.Context, err error, invalidReason string, unavailable ...httpserver.Unavailable) error {
	type mapping struct {
		target error
		status int
		reason string
	}
	for _, m := range []mapping{
		{domain.ErrUnknownEnvironment, http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment},
		{domain.ErrUnknownCommand, http.StatusNotFound, siteprotocol.ProblemUnknownCommand},
		{domain.ErrConflictingRetry, http.StatusConflict, siteprotocol.ProblemConflictingRetry},
		{domain.ErrOutOfOrder, http.StatusConflict, siteprotocol.ProblemOutOfOrder},
		{domain.ErrIdentityMismatch, http.StatusConflict, siteprotocol.ProblemIdentityMismatch},
		{domain.ErrResultConflict, http.StatusConflict, siteprotocol.ProblemResultConflict},
		{domain.ErrInstallationMismatch, http.StatusConflict, siteprotocol.ProblemInstallationMismatch},
		{siteprotocol.ErrTooLarge, http.StatusRequestEntityTooLarge, httpserver.DefaultReason(http.StatusRequestEntityTooLarge)},
		{siteprotocol.ErrMalformed, http.StatusBadRequest, invalidReason},
		{siteprotocol.ErrDigestMismatch, http.StatusUnprocessableEntity, invalidReason},
		{siteprotocol.ErrInvalid, http.StatusUnprocessableEntity, invalidReason},
		{application.ErrInvalidRequest, http.StatusUnprocessableEntity, httpserver.DefaultReason(http.StatusUnprocessableEntity)},
	} {
		if errors.Is(err, m.target) {
			if m.target == siteprotocol.ErrMalformed {
				m.status = httpserver.JSONStatus(err)
			}
			return httpserver.NewProblem(m.status, m.reason, err.Error(), fieldErrors(err)...)
		}
	}
	return httpserver.Failure(ctx, h.Log, err, append(unavailable, httpserver.Unavailable{
		Err: application.ErrUnavailable, Detail: "the stream store cannot be reached now; retry later", Log: "execution_ports store unavailable",
	})...)
}

// fieldErrors locates a codec error: each field of a
// *siteprotocol.ValidationError, the member of a *siteprotocol.DecodeError,
// or where an *ijson.Error breaks a strictness rule ("body" for the whole
// text). Values are never echoed.
func fieldErrors(err error) []*huma.ErrorDetail {
	var ve *siteprotocol.ValidationError
	var de *siteprotocol.DecodeError
	var je *ijson.Error
	switch {
	case errors.As(err, &de):
		loc := "body"
		if de.Field != "" {
			loc += "." + de.Field
		}
		return []*huma.ErrorDetail{{Location: loc, Message: de.Message}}
	case errors.As(err, &je):
		return []*huma.ErrorDetail{{Location: je.Path.Location("body"), Message: je.Description()}}
	case !errors.As(err, &ve):
		return nil
	}
	out := make([]*huma.ErrorDetail, 0, len(ve.Fields))
	for _, f := range ve.Fields {
		out = append(out, &huma.ErrorDetail{Location: "body." + f.Field, Message: f.Message})
	}
	return out
}
