package routetest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}

type in struct {
	Site string `path:"site"`
}

type out struct {
	Body struct{}
}

func route(id, path, documented string, admit httpserver.Admit) httpserver.Route {
	m := httpserver.WithPrincipals(httpserver.AdmitMetadata(admit), documented)
	m = httpserver.WithExamples(m, httpserver.Example{Name: "one", Params: map[string]any{"site": "alpha"}, Status: 200})
	return httpserver.NewRoute(huma.Operation{OperationID: id, Method: http.MethodGet, Path: path, Security: httpserver.Bearer(), Metadata: m},
		func(context.Context, *in) (*out, error) { return &out{}, nil })
}

// TestTheCheckPassesATableWhoseAdmissionIsItsDocument is the check on a
// route table that admits exactly what it documents.
func TestTheCheckPassesATableWhoseAdmissionIsItsDocument(t *testing.T) {
	r := &recorder{TB: t}
	n := AdmitsOnlyDocumentedPrincipals(r, func(api huma.API) {
		httpserver.Register(api,
			route("site-route", "/sites/{site}/x", "site:{site}", httpserver.AdmitPathPrincipal(auth.KindSite, "site")),
			route("reader-route", "/sites/{site}/y", "service:*", httpserver.AdmitKinds(auth.KindService)))
	})
	if len(r.errors) > 0 || n == 0 {
		t.Fatalf("%d requests; failures: %v", n, r.errors)
	}
}

// TestTheCheckFailsARouteThatAdmitsMoreThanItDocumentsOrBypassesTheTable
// shows the check can fail: a route whose rule admits every service while
// its document names only service:beto (the handler would run for
// service:other), and a route registered outside the table.
func TestTheCheckFailsARouteThatAdmitsMoreThanItDocumentsOrBypassesTheTable(t *testing.T) {
	r := &recorder{TB: t}
	AdmitsOnlyDocumentedPrincipals(r, func(api huma.API) {
		httpserver.Register(api, route("too-wide", "/sites/{site}/x", "service:beto", httpserver.AdmitKinds(auth.KindService)))
		bypass := route("bypass", "/sites/{site}/y", "site:{site}", httpserver.AdmitPathPrincipal(auth.KindSite, "site"))
		huma.Register(api, bypass.Operation, func(context.Context, *in) (*out, error) { return &out{}, nil })
	})
	all := strings.Join(r.errors, "\n")
	for _, want := range []string{
		"(too-wide): the handler ran for service:" + other,
		"(bypass): is not registered from the context's route table",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the check did not report %q; it reported:\n%s", want, all)
		}
	}
}
