package httpserver

import (
	"context"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
)

// AuditLogger is the name of the audit log's logger: its lines carry
// "logger":"audit" (docs/operations.md#the-audit-log).
const AuditLogger = "audit"

// Audit outcomes: how a mutating call ended, by its status.
const (
	// AuditSucceeded: answered below 400, the change made (or an
	// idempotent retry answered).
	AuditSucceeded = "succeeded"
	// AuditRefused: answered 4xx; nothing changed.
	AuditRefused = "refused"
	// AuditFailed: answered 5xx; nothing is known to have changed.
	AuditFailed = "failed"
)

type auditKey struct{}

// auditRecord collects what the audit line of one request needs from the
// middlewares after UseAudit's: the authenticated principal.
type auditRecord struct{ principal string }

// noteAuditPrincipal records p as the principal of the audited request
// ctx belongs to, if it is one.
func noteAuditPrincipal(ctx context.Context, p auth.Principal) {
	if r, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		r.principal = p.String()
	}
}

// UseAudit logs one structured line on log (named AuditLogger) for every
// call of an operation whose method changes something (every method but
// GET, HEAD and OPTIONS), once it is answered, whatever the answer: the
// principal ("" when none was authenticated), the method, the route (the
// operation's path template) and operation ID, the target (the path
// parameters, name=value in the operation's order), the status, the
// outcome (AuditSucceeded, AuditRefused, AuditFailed) and the request ID
// (docs/operations.md#the-audit-log). Call it before UseAuthentication so
// that calls refused there are audited too.
func UseAudit(api huma.API, log *zap.Logger) {
	log = log.Named(AuditLogger)
	api.UseMiddleware(func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		if op == nil || op.Method == http.MethodGet || op.Method == http.MethodHead || op.Method == http.MethodOptions {
			next(ctx)
			return
		}
		rec := &auditRecord{}
		next(huma.WithContext(ctx, context.WithValue(ctx.Context(), auditKey{}, rec)))
		status := ctx.Status()
		if status == 0 {
			status = http.StatusOK
		}
		outcome := AuditSucceeded
		switch {
		case status >= 500:
			outcome = AuditFailed
		case status >= 400:
			outcome = AuditRefused
		}
		log.Info("audit",
			zap.String("principal", rec.principal),
			zap.String("method", op.Method),
			zap.String("route", op.Path),
			zap.String("operation", op.OperationID),
			zap.String("target", auditTarget(ctx, op)),
			zap.Int("status", status),
			zap.String("outcome", outcome),
			zap.String("request_id", RequestID(ctx.Context())),
		)
	})
}

// auditTarget is op's path parameters as name=value, space-separated, in
// the operation's order, each value bounded and printable.
func auditTarget(ctx huma.Context, op *huma.Operation) string {
	var parts []string
	for _, p := range op.Parameters {
		if p.In == "path" {
			parts = append(parts, p.Name+"="+Printable(Bounded(ctx.Param(p.Name))))
		}
	}
	return strings.Join(parts, " ")
}
