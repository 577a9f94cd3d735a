package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// siteAdmit is the admission of the Site routes: exactly the principal
// environment:<path environment>, checked before the body is read. The
// routes' request metrics are labelled with a configured environment.
func (h *Handlers) siteAdmit() map[string]any {
	m := httpserver.AdmitMetadata(httpserver.AdmitPathPrincipal(auth.KindEnvironment, "environment"))
	maps.Copy(m, h.environmentLabel())
	return httpserver.WithPrincipals(m, auth.KindEnvironment+":{environment}")
}

// serviceAdmit is the admission of Execution's routes: one of the
// configured service principals, checked before the body is read. A
// stream route's request metrics are labelled with a configured
// environment.
func (h *Handlers) serviceAdmit() map[string]any {
	m := httpserver.AdmitMetadata(func(p auth.Principal, _ func(string) string) error {
		if p.Kind == auth.KindService && slices.Contains(h.Services, p.ID) {
			return nil
		}
		if p.Kind == auth.KindOperator {
			return httpserver.NewProblem(http.StatusForbidden, siteprotocol.ProblemForbidden,
				fmt.Sprintf("%s may only read (docs/operations.md#operator-reads); this route needs one of the service keys %s", p, strings.Join(prefixed(h.Services), ", ")))
		}
		return httpserver.NewProblem(http.StatusForbidden, siteprotocol.ProblemForbidden,
			fmt.Sprintf("%s may not use Execution's routes; they need one of the service keys %s", p, strings.Join(prefixed(h.Services), ", ")))
	})
	maps.Copy(m, h.environmentLabel())
	return httpserver.WithPrincipals(m, prefixed(h.Services)...)
}

// environmentLabel labels a route's request metrics with its environment
// path parameter when it names a configured environment
// (docs/operations.md#metrics); a route without one is labelled empty.
func (h *Handlers) environmentLabel() map[string]any {
	return httpserver.MetricsEnvironment("environment", func(id string) bool {
		if h.Streams == nil {
			return false
		}
		_, err := h.Streams.Environment(id)
		return err == nil
	})
}

// knownEnvironment answers 404 unknown-environment for a stream route whose
// environment is not configured, before the body is read or validated. An
// environment that is not an ID at all (httpserver.IDPattern) is passed on:
// Huma's parameter validation answers it 422 naming path.environment.
func (h *Handlers) knownEnvironment(ctx huma.Context, next func(huma.Context)) {
	if h.Streams != nil && environmentID.MatchString(ctx.Param("environment")) {
		if _, err := h.Streams.Environment(ctx.Param("environment")); err != nil {
			httpserver.WriteProblem(ctx, httpserver.NewProblem(http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment, err.Error()))
			return
		}
	}
	next(ctx)
}

// environmentID is the shape of an environment path parameter.
var environmentID = regexp.MustCompile(httpserver.IDPattern)

// jsonBody is the execution routes' use of the one strict body guard
// (httpserver.StrictJSONBody): a request body declared as JSON (415
// unsupported-media-type otherwise, also when the Content-Type is missing:
// Huma would assume JSON) of at most limit bytes (413 payload-too-large
// naming limit, the protocol's bound: a body of exactly limit bytes is
// read; the operation's MaxBodyBytes must exceed limit so Huma never
// answers with its own, off-by-one bound), and one that arrives whole (a
// body shorter than its Content-Length is 400 invalid-request). It applies
// siteprotocol.CheckJSON to the body before Huma decodes it, naming the
// rule and located at the member: 400 invalid-request for bytes that are
// not one I-JSON text, 422 validation-failed for a null or a NUL
// (httpserver.JSONStatus): encoding/json would otherwise keep one of two
// duplicate members silently and turn invalid UTF-8 into U+FFFD. A body
// that is an object must also name every member of required: a missing one
// is 422 validation-failed located at body.<member> (Huma would locate it
// at "body"). Raw command and result bodies use rawJSONBody instead.
func jsonBody(limit int64, required ...string) func(huma.Context, func(huma.Context)) {
	g := httpserver.StrictJSONBody{Limit: limit, Check: siteprotocol.CheckJSON}
	g.Refuse = func(err error) *httpserver.Problem {
		status := httpserver.JSONStatus(err)
		return httpserver.NewProblem(status, httpserver.DefaultReason(status), "the request body is not strict JSON: "+httpserver.JSONRule(err),
			&huma.ErrorDetail{Location: httpserver.JSONLocation(err), Message: httpserver.JSONRule(err)})
	}
	g.Then = func(_ huma.Context, body []byte) *httpserver.Problem {
		if missing := missingMembers(body, required); len(missing) > 0 {
			return httpserver.NewProblem(http.StatusUnprocessableEntity, httpserver.DefaultReason(http.StatusUnprocessableEntity),
				"validation failed", missing...)
		}
		return nil
	}
	return g.Middleware()
}

// rawJSONBody is the strict body guard without jsonBody's JSON check, for a
// raw protocol body (a command or a result): the same media type, bound and
// whole-arrival rules, then its codec answers its faults with the protocol's reason
// (invalid-command, invalid-result): an empty body is refused here with
// that reason too, 400 located at body, where Huma would answer its own
// "body is required" as invalid-request (docs/site-protocol.md#problem-reasons).
func rawJSONBody(limit int64, reason, what string) func(huma.Context, func(huma.Context)) {
	g := httpserver.StrictJSONBody{Limit: limit}
	g.Then = func(_ huma.Context, body []byte) *httpserver.Problem {
		if len(body) > 0 {
			return nil
		}
		return httpserver.NewProblem(http.StatusBadRequest, reason, "the request body is empty: want "+what+"; nothing was stored",
			&huma.ErrorDetail{Location: "body", Message: "empty"})
	}
	return g.Middleware()
}

// bodyShape refuses, before Huma decodes a strict JSON object body, the
// members Huma would answer with the whole enclosing object (or request
// body) as the error's value: a member not in known (422 located at
// body.<member>, nothing echoed) and, for each member named in integers, a
// value that is not an integer in the int64 range (422 located at
// body.<member>.<key>, a number echoed at most httpserver.MaxEchoed bytes,
// another value never; every key located exactly, gpu.nvidia included). Run
// it after jsonBody.
func bodyShape(known []string, integers ...string) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		r, _ := humago.Unwrap(ctx)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			httpserver.WriteProblem(ctx, httpserver.BodyReadProblem(err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			next(ctx) // not an object: Huma's schema validation answers
			return
		}
		names := slices.Sorted(maps.Keys(obj))
		var errs []*huma.ErrorDetail
		for _, name := range names {
			if !slices.Contains(known, name) {
				errs = append(errs, &huma.ErrorDetail{Location: "body." + httpserver.Bounded(name), Message: "unknown member; expected one of " + strings.Join(known, ", ")})
			}
		}
		for _, member := range integers {
			var values map[string]json.RawMessage
			if json.Unmarshal(obj[member], &values) != nil {
				continue // not an object: Huma answers, located at the member
			}
			for _, k := range slices.Sorted(maps.Keys(values)) {
				loc := "body." + member + "." + httpserver.Bounded(k)
				msg := fmt.Sprintf("must be an integer from 0 to %d", int64(math.MaxInt64))
				v := bytes.TrimSpace(values[k])
				if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
					// Not a number: answered here, not by Huma, whose
					// locations shift after a key holding '.' (gpu.nvidia).
					errs = append(errs, &huma.ErrorDetail{Location: loc, Message: msg})
				} else if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
					errs = append(errs, &huma.ErrorDetail{Location: loc, Message: msg, Value: httpserver.Bounded(string(v))})
				}
			}
		}
		if len(errs) > 0 {
			httpserver.WriteProblem(ctx, httpserver.NewProblem(http.StatusUnprocessableEntity, httpserver.DefaultReason(http.StatusUnprocessableEntity),
				"validation failed", errs...))
			return
		}
		next(ctx)
	}
}

// missingMembers returns an error detail for each name of required that the
// JSON object body lacks (none when body is not an object: Huma's schema
// validation answers that).
func missingMembers(body []byte, required []string) []*huma.ErrorDetail {
	if len(required) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	var out []*huma.ErrorDetail
	for _, name := range required {
		if _, ok := obj[name]; !ok {
			out = append(out, &huma.ErrorDetail{Location: "body." + name, Message: "is required"})
		}
	}
	return out
}
