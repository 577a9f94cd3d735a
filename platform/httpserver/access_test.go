package httpserver

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
)

// TestDocumentAccessWritesThePrincipalsAndTheReasonsOfEachStatus registers
// one operation with principals and reasons and reads its document: the
// principals as x-principal and in the description, each declared status's
// reasons (the shared ones added, none twice) as x-reasons and in its
// description.
func TestDocumentAccessWritesThePrincipalsAndTheReasonsOfEachStatus(t *testing.T) {
	api := NewAPI(http.NewServeMux(), "test")
	meta := WithReasons(WithPrincipals(AdmitMetadata(AdmitKinds("service")), "service:*"),
		map[int][]string{http.StatusBadRequest: {"invalid-cursor"}, http.StatusServiceUnavailable: {"cancelled", "unavailable"}})
	huma.Register(api, huma.Operation{
		OperationID: "read", Method: http.MethodGet, Path: "/read", Description: "A read.",
		Security: Bearer(), Metadata: meta, Errors: []int{400, 401, 403, 503},
	}, func(context.Context, *struct{}) (*struct{}, error) { return nil, nil })
	op := api.OpenAPI().Paths["/read"].Get
	if got := op.Extensions["x-principal"]; !slices.Equal(got.([]string), []string{"service:*"}) {
		t.Errorf("x-principal = %v", got)
	}
	if !strings.HasSuffix(op.Description, "Principal: service:* (403 forbidden for any other).") {
		t.Errorf("description = %q", op.Description)
	}
	for status, want := range map[string][]string{"400": {"invalid-request", "invalid-cursor"}, "401": {"unauthenticated"}, "403": {"forbidden"}, "503": {"unavailable", "cancelled"}} {
		resp := op.Responses[status]
		got, _ := resp.Extensions["x-reasons"].([]string)
		if !slices.Equal(got, want) {
			t.Errorf("%s x-reasons = %v, want %v", status, got, want)
		}
		if !strings.Contains(resp.Description, "reason: "+strings.Join(want, ", ")+".") {
			t.Errorf("%s description = %q", status, resp.Description)
		}
	}
}
