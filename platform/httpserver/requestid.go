package httpserver

import (
	"context"

	"go.uber.org/zap"
)

type requestIDKey struct{}

type operationKey struct{}

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
