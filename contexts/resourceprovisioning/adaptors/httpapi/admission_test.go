package httpapi

import (
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver/routetest"
)

// TestNoHandlerRunsForAPrincipalItsOperationDoesNotAdmit sends every
// route's documented example with every principal the routes name (and
// one they do not), each handler stubbed: only the principals an
// operation documents reach its handler; every other is 403 forbidden
// before it (docs/testing.md#admission).
func TestNoHandlerRunsForAPrincipalItsOperationDoesNotAdmit(t *testing.T) {
	n := routetest.AdmitsOnlyDocumentedPrincipals(t, func(api huma.API) { Register(api, &Handlers{}) })
	t.Logf("%d requests", n)
}
