package app

import (
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver/routetest"
)

// TestNoHandlerOfAnyRoleRunsForAPrincipalItsOperationDoesNotAdmit
// registers every role's routes as a process serves them, each handler
// stubbed, and sends every operation's documented example with every
// principal the roles name: only the principals an operation documents
// reach its handler, every other is 403 forbidden before it, and every
// operation comes from its context's route table with an admit rule in
// its metadata (docs/testing.md#admission).
func TestNoHandlerOfAnyRoleRunsForAPrincipalItsOperationDoesNotAdmit(t *testing.T) {
	n := routetest.AdmitsOnlyDocumentedPrincipals(t, func(api huma.API) {
		for _, r := range DefaultRoles() {
			if r.OpenAPI != nil {
				r.OpenAPI(api)
			}
		}
	})
	t.Logf("%d requests", n)
}
