package executionports_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
)

// The binding deliveries read (docs/execution-ports.md#delivery-of-member-bindings)
// refuses what it must before it reads anything, and never answers an owner
// it cannot read with an empty list.
func TestTheBindingDeliveriesReadIsServicesOnlyAndUnavailableWithoutItsOwner(t *testing.T) {
	s := startServer(t, options{}) // the owner is unreachable
	const path = "/execution/v1/streams/alpha-k8s/bindings"
	executiontest.Want(t, s.Call(t, http.MethodGet, path, "", "", nil), http.StatusUnauthorized, "")
	executiontest.Want(t, s.Call(t, http.MethodGet, path, s.alphaKey, "", nil), http.StatusForbidden, "forbidden")
	executiontest.Want(t, s.Call(t, http.MethodGet, "/execution/v1/streams/gamma-k8s/bindings", s.serviceKey, "", nil), http.StatusNotFound, "unknown-environment")
	r := s.Call(t, http.MethodGet, path, s.serviceKey, "", nil)
	executiontest.Want(t, r, http.StatusServiceUnavailable, "unavailable")
	if got := r.Body; len(got) == 0 || strings.Contains(string(got), "127.0.0.1") || strings.Contains(string(got), "connection refused") {
		t.Fatalf("503 carries the cause: %s", got)
	}
}
