package httpserver

import (
	"context"

	"github.com/danielgtaylor/huma/v2"
)

// Route is one entry of a context's route table: the operation's document
// (method, path, principals and admit rule, reasons, middlewares, examples)
// and its handler, typed by the handler's input and output. A context
// lists every route it serves in one table and registers the table with
// Register (docs/architecture.md#the-http-edge).
type Route struct {
	// Operation is the route's document as it is registered.
	Operation huma.Operation
	register  func(api huma.API, op huma.Operation, stub Stub)
}

// Stub answers a request in place of a route's handler on an API made by
// StubHandlers: it runs where the handler would, after every middleware
// (authentication, the admit rule, body guards) and Huma's own checks of
// the input, and its error is the answer. op is the route's operation.
type Stub func(ctx context.Context, op *huma.Operation) error

// NewRoute returns the route of op answered by handler.
func NewRoute[I, O any](op huma.Operation, handler func(context.Context, *I) (*O, error)) Route {
	return Route{Operation: op, register: func(api huma.API, op huma.Operation, stub Stub) {
		if stub == nil {
			huma.Register(api, op, handler)
			return
		}
		registered := op
		huma.Register(api, op, func(ctx context.Context, _ *I) (*O, error) { return nil, stub(ctx, &registered) })
	}}
}

// routeKey is the operation metadata marking an operation registered from
// a route table (Register), so a test can tell that no operation of a
// context bypasses its table (RegisteredAsRoute).
const routeKey = "httpserver.route"

// Register adds routes to api, each operation with its handler (on an API
// made by StubHandlers, with the stub instead).
func Register(api huma.API, routes ...Route) {
	var stub Stub
	if s, ok := api.(stubbedAPI); ok {
		stub = s.stub
	}
	for _, r := range routes {
		op := r.Operation
		op.Metadata = withMetadata(op.Metadata, routeKey, true)
		r.register(api, op, stub)
	}
}

// RegisteredAsRoute reports whether op was registered from a route table
// (Register).
func RegisteredAsRoute(op *huma.Operation) bool {
	ok, _ := op.Metadata[routeKey].(bool)
	return ok
}

// StubHandlers returns api such that every route later registered on it
// with Register answers with stub instead of its handler: a test registers
// a context's routes exactly as a process serves them and sees which
// requests reach a handler (docs/testing.md#admission).
func StubHandlers(api huma.API, stub Stub) huma.API { return stubbedAPI{API: api, stub: stub} }

type stubbedAPI struct {
	huma.API
	stub Stub
}

// withMetadata returns a copy of m with key set to v.
func withMetadata(m map[string]any, key string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	out[key] = v
	return out
}
