// Package routetest checks a central context's route table as a process
// serves it: that admission is each operation's metadata alone, so no
// handler runs for a principal its operation does not admit
// (docs/testing.md#admission).
package routetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// reasonReached is the reason the stub handler answers with: the request
// reached the operation's handler.
const reasonReached = "handler-reached"

// principals authenticates a bearer token that is a principal's text
// ("site:alpha") as that principal.
type principals struct{}

func (principals) Authenticate(_ context.Context, token string) (auth.Principal, error) {
	p, err := auth.ParsePrincipal(token)
	if err != nil {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return p, nil
}

// AdmitsOnlyDocumentedPrincipals registers a context's routes with register
// (which adds its route table to an API as the process does) on an API with
// the platform's authentication and every handler stubbed
// (httpserver.StubHandlers), then sends each operation's first documented
// example (its parameters, headers and body) once with every principal of
// a catalogue: every kind the operations name, with every ID they name or
// their examples' path parameters carry, and one no operation names. A
// principal the operation's documented principals (its x-principal:
// "site:{site}", "service:*", "service:beto") admit must reach the handler;
// any other must be answered 403 forbidden without the handler running.
// It fails, too, for an operation registered outside a route table
// (httpserver.Register) or without security, an admit rule, a documented
// principal or an example. It returns the number of requests sent.
func AdmitsOnlyDocumentedPrincipals(t testing.TB, register func(api huma.API)) int {
	t.Helper()
	var (
		mu      sync.Mutex
		reached = map[string]bool{} // operation ID + " " + principal
	)
	mux := http.NewServeMux()
	api := httpserver.NewAPI(mux, "admission")
	httpserver.UseAuthentication(api, principals{}, zap.NewNop())
	register(httpserver.StubHandlers(api, func(ctx context.Context, op *huma.Operation) error {
		p, _ := auth.FromContext(ctx)
		mu.Lock()
		reached[op.OperationID+" "+p.String()] = true
		mu.Unlock()
		return httpserver.NewProblem(http.StatusTeapot, reasonReached, "the stub handler answered")
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ops := Operations(api)
	if len(ops) == 0 {
		t.Fatal("no operation registered")
	}
	catalogue := principalCatalogue(ops)
	sent := 0
	for _, op := range ops {
		if !checkDocumented(t, op) {
			continue
		}
		ex := httpserver.ExamplesOf(op)[0]
		admitted := 0
		for _, p := range catalogue {
			want := admits(httpserver.PrincipalsOf(op), p, ex.Params)
			status, reason := send(t, srv.URL, op, ex, p)
			sent++
			mu.Lock()
			ran := reached[op.OperationID+" "+p.String()]
			mu.Unlock()
			switch {
			case want && (!ran || status != http.StatusTeapot):
				t.Errorf("%s %s (%s): %s is documented as admitted but did not reach the handler: %d %s", op.Method, op.Path, op.OperationID, p, status, reason)
			case !want && ran:
				t.Errorf("%s %s (%s): the handler ran for %s, which the operation does not admit", op.Method, op.Path, op.OperationID, p)
			case !want && (status != http.StatusForbidden || reason != httpserver.DefaultReason(http.StatusForbidden)):
				t.Errorf("%s %s (%s): %s answered %d %s, want 403 forbidden", op.Method, op.Path, op.OperationID, p, status, reason)
			}
			if want {
				admitted++
			}
		}
		if admitted == 0 {
			t.Errorf("%s %s (%s): no principal of the catalogue is admitted: %v", op.Method, op.Path, op.OperationID, httpserver.PrincipalsOf(op))
		}
	}
	return sent
}

// Answer is how one operation answered one principal (SendAs).
type Answer struct {
	Operation *huma.Operation
	Status    int
	Reason    string
	// Reached is true when the request reached the operation's handler.
	Reached bool
}

// SendAs registers a context's routes with register as
// AdmitsOnlyDocumentedPrincipals does (every handler stubbed) and sends
// each operation's first documented example once as principal p,
// returning every answer in Operations' order; an operation without an
// example fails the test.
func SendAs(t testing.TB, register func(api huma.API), p auth.Principal) []Answer {
	t.Helper()
	var (
		mu      sync.Mutex
		reached = map[string]bool{}
	)
	mux := http.NewServeMux()
	api := httpserver.NewAPI(mux, "admission")
	httpserver.UseAuthentication(api, principals{}, zap.NewNop())
	register(httpserver.StubHandlers(api, func(ctx context.Context, op *huma.Operation) error {
		mu.Lock()
		reached[op.OperationID] = true
		mu.Unlock()
		return httpserver.NewProblem(http.StatusTeapot, reasonReached, "the stub handler answered")
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var out []Answer
	for _, op := range Operations(api) {
		exs := httpserver.ExamplesOf(op)
		if len(exs) == 0 {
			t.Errorf("%s %s (%s): has no documented example to send", op.Method, op.Path, op.OperationID)
			continue
		}
		status, reason := send(t, srv.URL, op, exs[0], p)
		mu.Lock()
		ran := reached[op.OperationID]
		mu.Unlock()
		out = append(out, Answer{Operation: op, Status: status, Reason: reason, Reached: ran})
	}
	return out
}

// Operations are api's operations, sorted by path and method.
func Operations(api huma.API) []*huma.Operation {
	var ops []*huma.Operation
	for _, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if op != nil {
				ops = append(ops, op)
			}
		}
	}
	slices.SortFunc(ops, func(a, b *huma.Operation) int { return strings.Compare(a.Path+a.Method, b.Path+b.Method) })
	return ops
}

// checkDocumented reports whether op carries what the check needs, failing
// the test for what it lacks.
func checkDocumented(t testing.TB, op *huma.Operation) bool {
	t.Helper()
	ok := true
	fail := func(what string) {
		t.Errorf("%s %s (%s): %s", op.Method, op.Path, op.OperationID, what)
		ok = false
	}
	if !httpserver.RegisteredAsRoute(op) {
		fail("is not registered from the context's route table (httpserver.Register)")
	}
	if !httpserver.RequiresBearer(op) {
		fail("does not require a bearer credential")
	}
	if _, has := httpserver.AdmitOf(op); !has {
		fail("carries no admit rule in its metadata")
	}
	if len(httpserver.PrincipalsOf(op)) == 0 {
		fail("documents no principal")
	}
	if len(httpserver.ExamplesOf(op)) == 0 {
		fail("has no documented example to send")
	}
	return ok
}

// other is an ID no operation names.
const other = "zz-not-named"

// principalCatalogue is every kind the operations' principals name, each
// with every ID they name exactly or their examples' path parameters
// carry, and other.
func principalCatalogue(ops []*huma.Operation) []auth.Principal {
	kinds := map[string]bool{}
	ids := map[string]bool{other: true}
	for _, op := range ops {
		for _, doc := range httpserver.PrincipalsOf(op) {
			kind, id, _ := strings.Cut(doc, ":")
			kinds[kind] = true
			if id != "*" && !strings.HasPrefix(id, "{") {
				ids[id] = true
			}
		}
		for _, ex := range httpserver.ExamplesOf(op) {
			for _, p := range op.Parameters {
				if v, ok := ex.Params[p.Name]; ok && p.In == "path" {
					ids[fmt.Sprint(v)] = true
				}
			}
		}
	}
	var out []auth.Principal
	for _, k := range slices.Sorted(keys(kinds)) {
		for _, id := range slices.Sorted(keys(ids)) {
			out = append(out, auth.Principal{Kind: k, ID: id})
		}
	}
	return out
}

func keys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// admits reports whether one of the documented principals admits p, given
// the path parameters: "kind:{param}" is exactly the principal named by
// the parameter's value, "kind:*" any principal of the kind, "kind:id"
// exactly that one.
func admits(documented []string, p auth.Principal, params map[string]any) bool {
	for _, doc := range documented {
		kind, id, _ := strings.Cut(doc, ":")
		if kind != p.Kind {
			continue
		}
		switch {
		case id == "*":
			return true
		case strings.HasPrefix(id, "{") && strings.HasSuffix(id, "}"):
			if v, ok := params[strings.Trim(id, "{}")]; ok && fmt.Sprint(v) == p.ID {
				return true
			}
		case id == p.ID:
			return true
		}
	}
	return false
}

// send sends example ex of op as principal p and returns the status and
// the problem's reason.
func send(t testing.TB, base string, op *huma.Operation, ex httpserver.Example, p auth.Principal) (int, string) {
	t.Helper()
	path := op.Path
	q := url.Values{}
	header := http.Header{}
	for _, prm := range op.Parameters {
		v, ok := ex.Params[prm.Name]
		if !ok {
			continue
		}
		s := fmt.Sprint(v)
		switch prm.In {
		case "path":
			path = strings.ReplaceAll(path, "{"+prm.Name+"}", url.PathEscape(s))
		case "query":
			q.Set(prm.Name, s)
		case "header":
			header.Set(prm.Name, s)
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var body io.Reader
	if ex.Request != nil {
		raw, err := json.Marshal(ex.Request)
		if err != nil {
			t.Fatalf("%s: example %s: %v", op.OperationID, ex.Name, err)
		}
		body = bytes.NewReader(raw)
		header.Set("Content-Type", "application/json")
	}
	req, err := http.NewRequestWithContext(t.Context(), op.Method, base+path, body)
	if err != nil {
		t.Fatalf("%s: %v", op.OperationID, err)
	}
	req.Header = header
	req.Header.Set("Authorization", "Bearer "+p.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", op.Method, path, p, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var problem struct {
		Reason string `json:"reason"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s %s as %s: read the answer: %v", op.Method, path, p, err)
	}
	_ = json.Unmarshal(raw, &problem)
	return resp.StatusCode, problem.Reason
}
