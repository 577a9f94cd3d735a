package kubetest

import (
	"context"
	"time"

	"github.com/pharos-metallo/metallo/platform/kube/auditlog"
)

// AuditLog, AuditEvent and AuditObjectRef are platform/kube/auditlog's
// reader and its events, under the names the tests use.
type (
	AuditLog       = auditlog.Log
	AuditEvent     = auditlog.Event
	AuditObjectRef = auditlog.ObjectRef
)

// WhoCreated returns who created the object (the Actor of its create request), waiting up to
// 30 seconds for the audit event; it fails the test when there is none.
func (e *Env) WhoCreated(resource, namespace, name string) AuditEvent {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := e.AuditLog().Creation(ctx, resource, namespace, name)
	if err != nil {
		e.T.Fatalf("kubetest: who created %s %s/%s: %v", resource, namespace, name, err)
	}
	return ev
}
