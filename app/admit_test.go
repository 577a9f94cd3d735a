package app

import (
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// TestEveryBearerOperationCarriesItsAdmitRule registers every role's
// operations as a process serves them and requires each operation that
// needs a bearer credential to carry an admit rule, so no route is left to
// check its principal in its handler (or not at all): the authentication
// middleware runs the rule before the body is read.
func TestEveryBearerOperationCarriesItsAdmitRule(t *testing.T) {
	api := httpserver.NewAPI(http.NewServeMux(), "admit")
	for _, r := range DefaultRoles() {
		if r.OpenAPI != nil {
			r.OpenAPI(api)
		}
	}
	bearer := 0
	for path, item := range api.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{
			http.MethodGet: item.Get, http.MethodPut: item.Put, http.MethodPost: item.Post,
			http.MethodDelete: item.Delete, http.MethodPatch: item.Patch,
		} {
			if !httpserver.RequiresBearer(op) {
				continue
			}
			bearer++
			if _, ok := httpserver.AdmitOf(op); !ok {
				t.Errorf("%s %s (%s) needs a bearer credential but carries no admit rule", method, path, op.OperationID)
			}
		}
	}
	if bearer == 0 {
		t.Fatal("no bearer operation registered")
	}
}
