package httpapi

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// TestEveryOperationDocumentsItsPrincipalAndTheReasonsOfEachProblemStatus
// reads the document as registered (no service: the routes are documented,
// not served) and requires every operation to name the principals it
// admits and every problem status it declares to list its reasons, as the
// execution routes do (httpserver.WithPrincipals, httpserver.WithReasons).
func TestEveryOperationDocumentsItsPrincipalAndTheReasonsOfEachProblemStatus(t *testing.T) {
	api := httpserver.NewAPI(http.NewServeMux(), "provisioning")
	Register(api, &Handlers{})
	ops := 0
	for path, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post} {
			if op == nil {
				continue
			}
			ops++
			if p, ok := op.Extensions["x-principal"].([]string); !ok || len(p) == 0 {
				t.Errorf("%s (%s) names no principal", op.OperationID, path)
			}
			for status, resp := range op.Responses {
				code, err := strconv.Atoi(status)
				if err != nil || code < 400 {
					continue
				}
				if r, ok := resp.Extensions["x-reasons"].([]string); !ok || len(r) == 0 {
					t.Errorf("%s %s lists no reason", op.OperationID, status)
				}
			}
		}
	}
	if ops == 0 {
		t.Fatal("no operation documented")
	}
}
