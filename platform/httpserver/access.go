package httpserver

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// principalsKey is the operation metadata naming the principals its admit
// rule allows (WithPrincipals).
const principalsKey = "httpserver.principals"

// reasonsKey is the operation metadata listing, per problem status, the
// reasons the operation can answer with it (WithReasons).
const reasonsKey = "httpserver.reasons"

// WithPrincipals returns metadata m naming the principals the operation's
// admit rule allows, in the document's notation ("site:{site}",
// "service:beto", "service:*"), documented by DocumentAccess as the
// operation's x-principal and said in its description.
func WithPrincipals(m map[string]any, principals ...string) map[string]any {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	out[principalsKey] = principals
	return out
}

// PrincipalsOf returns the principals an operation's metadata names
// (WithPrincipals), nil when it names none.
func PrincipalsOf(op *huma.Operation) []string {
	p, _ := op.Metadata[principalsKey].([]string)
	return p
}

// WithReasons returns metadata m with the reasons the operation answers per
// problem status, documented by DocumentAccess as each response's x-reasons
// and in its description. The reasons every bearer operation shares are
// added here: 400 invalid-request (a query that cannot be decoded, a body
// on a route that takes none, or one shorter than its Content-Length), 401
// unauthenticated (UseAuthentication), 403 forbidden (the
// admit rule), 500 internal-error, 503 unavailable (the credential check,
// the store or an owner cannot be reached now) and 503 cancelled (the
// request was cancelled before its handler finished; Failure). Every
// reason a route can answer must be listed: app's route sweep fails on one
// that is not (docs/testing.md#the-route-sweep).
func WithReasons(m map[string]any, byStatus map[int][]string) map[string]any {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	all := map[int][]string{
		http.StatusBadRequest:          {DefaultReason(http.StatusBadRequest)},
		http.StatusUnauthorized:        {DefaultReason(http.StatusUnauthorized)},
		http.StatusForbidden:           {DefaultReason(http.StatusForbidden)},
		http.StatusServiceUnavailable:  {ReasonUnavailable, ReasonCancelled},
		http.StatusInternalServerError: {ReasonInternal},
	}
	for status, reasons := range byStatus {
		for _, r := range reasons {
			if !slices.Contains(all[status], r) {
				all[status] = append(all[status], r)
			}
		}
	}
	out[reasonsKey] = all
	return out
}

// BearerOperation completes the document of one route of a context, op
// giving what differs (ID, method, path, texts, the handler's own fields),
// with what every operation of the central roles shares: the context's
// tag, bearer security, the admit metadata (AdmitMetadata with its
// WithPrincipals), the reasons answered per problem status (WithReasons,
// which adds the shared ones) and the errors declared: every status of
// those reasons. The route sweep fails on a reason answered but not listed
// (docs/testing.md#the-route-sweep).
func BearerOperation(op huma.Operation, tag string, admit map[string]any, reasons map[int][]string) huma.Operation {
	op.Tags = []string{tag}
	op.Security = Bearer()
	op.Metadata = WithReasons(admit, reasons)
	op.Errors = slices.Sorted(maps.Keys(ReasonsOf(&op)))
	return op
}

// ReasonsOf returns the reasons an operation's metadata lists per problem
// status (WithReasons), nil when it lists none.
func ReasonsOf(op *huma.Operation) map[int][]string {
	r, _ := op.Metadata[reasonsKey].(map[int][]string)
	return r
}

// DocumentAccess writes an operation's principals (WithPrincipals) as its
// x-principal, said in its description, and its reasons per problem status
// (WithReasons) as each declared response's x-reasons and description. It
// is an OnAddOperation hook of every API (NewAPI).
func DocumentAccess(_ *huma.OpenAPI, op *huma.Operation) {
	if principals, ok := op.Metadata[principalsKey].([]string); ok && len(principals) > 0 {
		if op.Extensions == nil {
			op.Extensions = map[string]any{}
		}
		op.Extensions["x-principal"] = principals
		op.Description += " Principal: " + strings.Join(principals, " or ") + " (403 forbidden for any other)."
	}
	for status, reasons := range ReasonsOf(op) {
		resp := op.Responses[strconv.Itoa(status)]
		if resp == nil {
			continue
		}
		if resp.Extensions == nil {
			resp.Extensions = map[string]any{}
		}
		resp.Extensions["x-reasons"] = reasons
		resp.Description = http.StatusText(status) + "; reason: " + strings.Join(reasons, ", ") + "."
	}
}
