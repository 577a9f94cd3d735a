package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// siteAdmit is the admission of the Site routes: exactly the principal
// environment:<path environment>, checked before the body is read.
func siteAdmit() map[string]any {
	return httpserver.AdmitMetadata(httpserver.AdmitPathPrincipal(auth.KindEnvironment, "environment"))
}

// serviceAdmit is the admission of Execution's routes: one of the
// configured service principals, checked before the body is read.
func (h *Handlers) serviceAdmit() map[string]any {
	return httpserver.AdmitMetadata(func(p auth.Principal, _ func(string) string) error {
		if p.Kind == auth.KindService && slices.Contains(h.Services, p.ID) {
			return nil
		}
		return httpserver.NewProblem(http.StatusForbidden, siteprotocol.ProblemForbidden,
			fmt.Sprintf("%s may not use Execution's routes; they need one of the service keys %s", p, strings.Join(prefixed(h.Services), ", ")))
	})
}

// knownEnvironment answers 404 unknown-environment for a stream route whose
// environment is not configured, before the body is read or validated.
func (h *Handlers) knownEnvironment(ctx huma.Context, next func(huma.Context)) {
	if h.Streams != nil {
		if _, err := h.Streams.Environment(ctx.Param("environment")); err != nil {
			writeProblem(ctx, httpserver.NewProblem(http.StatusNotFound, siteprotocol.ProblemUnknownEnvironment, err.Error()))
			return
		}
	}
	next(ctx)
}

// jsonBody requires a request body declared as application/json (415
// unsupported-media-type otherwise, also when the Content-Type is missing:
// Huma would assume JSON, or decode CBOR). With strict it also applies
// siteprotocol.CheckJSON to the body before Huma decodes it (400
// invalid-request naming the rule): encoding/json would otherwise keep one
// of two duplicate members silently and turn invalid UTF-8 into U+FFFD.
// Raw command and result bodies are checked by the codec instead (with
// their own reasons). A strict body that is an object must also name every
// member of required: a missing one is 422 validation-failed located at
// body.<member> (Huma would locate it at "body").
func jsonBody(strict bool, required ...string) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		ct := ctx.Header("Content-Type")
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" || (params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
			writeProblem(ctx, httpserver.NewProblem(http.StatusUnsupportedMediaType, httpserver.DefaultReason(http.StatusUnsupportedMediaType),
				fmt.Sprintf("the request body must be application/json (UTF-8), not %q", ct)))
			return
		}
		if !strict {
			next(ctx)
			return
		}
		r, _ := humago.Unwrap(ctx)
		limit := ctx.Operation().MaxBodyBytes
		if limit <= 0 {
			limit = 1 << 20 // Huma's default
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			writeProblem(ctx, httpserver.NewProblem(http.StatusBadRequest, httpserver.DefaultReason(http.StatusBadRequest), "the request body could not be read"))
			return
		}
		if int64(len(body)) >= limit { // Huma answers 413 (a body of its limit is too large)
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			next(ctx)
			return
		}
		if err := siteprotocol.CheckJSON(body); err != nil {
			writeProblem(ctx, httpserver.NewProblem(http.StatusBadRequest, httpserver.DefaultReason(http.StatusBadRequest), err.Error(),
				&huma.ErrorDetail{Location: "body", Message: err.Error()}))
			return
		}
		if missing := missingMembers(body, required); len(missing) > 0 {
			writeProblem(ctx, httpserver.NewProblem(http.StatusUnprocessableEntity, httpserver.DefaultReason(http.StatusUnprocessableEntity),
				"validation failed", missing...))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
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

// writeProblem writes p as application/problem+json (a middleware's answer).
func writeProblem(ctx huma.Context, p *httpserver.Problem) {
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(p)
}
