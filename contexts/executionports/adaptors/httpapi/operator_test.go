package httpapi

import (
	"net/http"
	"slices"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver/routetest"
)

// TestAnOperatorKeyReadsButIsRefusedOnEveryAppendRebindAndPlanRoute sends
// every route of the execution role's table, each handler stubbed, as an
// operator principal: every route that changes something (append, rebind,
// plan: each a POST under /execution/v1) answers 403 forbidden before its
// handler, as do the Site routes and the exact command read; the
// operator's reads reach theirs (docs/operations.md#operator-reads).
func TestAnOperatorKeyReadsButIsRefusedOnEveryAppendRebindAndPlanRoute(t *testing.T) {
	answers := routetest.SendAs(t, func(api huma.API) { Register(api, &Handlers{}) }, auth.Principal{Kind: auth.KindOperator, ID: "alice"})
	reads := []string{"list-environments", "list-commands", "get-binding-history"}
	var refused, read []string
	for _, a := range answers {
		op := a.Operation
		switch {
		case slices.Contains(reads, op.OperationID):
			if !a.Reached || a.Status != http.StatusTeapot {
				t.Errorf("%s %s: the operator's read did not reach its handler: %d %s", op.Method, op.Path, a.Status, a.Reason)
			}
			read = append(read, op.OperationID)
		case a.Reached || a.Status != http.StatusForbidden || a.Reason != "forbidden":
			t.Errorf("%s %s (%s): an operator key answered %d %s (handler reached: %v), want 403 forbidden", op.Method, op.Path, op.OperationID, a.Status, a.Reason, a.Reached)
		default:
			refused = append(refused, op.OperationID)
		}
	}
	for _, id := range []string{"append-command", "rebind-stream", "plan-capacity"} {
		if !slices.Contains(refused, id) {
			t.Errorf("%s was not sent or not refused: refused %v", id, refused)
		}
	}
	if len(read) != len(reads) {
		t.Errorf("reads sent: %v, want %v", read, reads)
	}
	t.Logf("%d routes: %d refused, %d read", len(answers), len(refused), len(read))
}
