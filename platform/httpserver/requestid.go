package httpserver

import (
	"context"
	"regexp"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// RequestIDHeader carries a request's ID both ways: a client or a proxy may
// send one, and every answer of the public API carries the request's
// (docs/operations.md#request-ids).
const RequestIDHeader = "X-Request-Id"

// requestIDShape is a well-formed incoming request ID: the shape of the
// platform's IDs (IDPattern: 1 to 128 letters, digits, '.', '_' or '-'),
// which the UUIDs and hex IDs proxies send fit.
var requestIDShape = regexp.MustCompile(IDPattern)

// requestInstancePrefix starts the instance of every problem: the request's
// ID as a URI (RFC 9457 section 3.1.5), e.g.
// "urn:metallo:request:0b8e4c6a-5e0f-4b8e-9d2a-3c1f7e6a9b10".
const requestInstancePrefix = "urn:metallo:request:"

type requestIDKey struct{}

type operationKey struct{}

// requestIDFor returns incoming when it is a well-formed request ID, else a
// new random one (a UUID).
func requestIDFor(incoming string) string {
	if requestIDShape.MatchString(incoming) {
		return incoming
	}
	return uuid.NewString()
}

// WithRequestID returns ctx carrying the request ID id: the edge gives each
// request its own; a test or a background job may give one to the calls it
// makes.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the ID of the request ctx belongs to, "" outside a
// request of the public API.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withOperation returns ctx carrying the ID of the operation answering it.
func withOperation(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, operationKey{}, id)
}

// RequestLog returns log with the fields that tie a line to the request
// ctx belongs to: request_id (the X-Request-Id answered) and operation (the
// operation ID), each when known. Every line a handler or a middleware
// logs about a request goes through it.
func RequestLog(ctx context.Context, log *zap.Logger) *zap.Logger {
	if log == nil {
		log = zap.NewNop()
	}
	var fields []zap.Field
	if id := RequestID(ctx); id != "" {
		fields = append(fields, zap.String("request_id", id))
	}
	if op, _ := ctx.Value(operationKey{}).(string); op != "" {
		fields = append(fields, zap.String("operation", op))
	}
	return log.With(fields...)
}

// instanceOf is the problem instance of the request ctx belongs to, ""
// when it has no ID.
func instanceOf(ctx context.Context) string {
	if id := RequestID(ctx); id != "" {
		return requestInstancePrefix + id
	}
	return ""
}
