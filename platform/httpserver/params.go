package httpserver

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// IDPattern is the shape of the platform's IDs in a path or query
// parameter: a Site, an execution environment, a principal's ID — 1 to 128
// letters, digits, '.', '_' or '-', starting with a letter or digit. Use it
// as a Huma `pattern` tag so the OpenAPI document shows it.
const IDPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

// UUIDPattern is the shape of a canonical ID (a lower-case UUID: a command,
// a Project, a Party, an allocation) in a path or query parameter.
const UUIDPattern = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`

// paramRule is the rule checkParams enforces, as its errors state it.
const paramRule = "must be valid UTF-8 text without control characters"

// checkParams is the middleware UseAuthentication adds first: it refuses,
// before anything else runs (authentication, admission, a handler, a
// store), a request whose query cannot be decoded (a % not followed by two
// hexadecimal digits, a ';' separator: 400 invalid-request, where
// url.URL.Query would drop the pair silently), and one whose declared path
// or query parameters are not text: invalid UTF-8 or a
// control character (unicode.IsControl: NUL and the other C0 characters,
// DEL, C1), which PostgreSQL cannot store (NUL, invalid UTF-8) and a log
// line or a problem must not carry raw. The answer is 422
// validation-failed with one error per such parameter, located at
// path.<name> or query.<name>, its value never echoed; nothing is stored.
// Each parameter's shape (a UUID, an ID, a length) is then Huma's
// validation of the operation's input struct tags, also 422, documented in
// the OpenAPI document (docs/architecture.md#parameters).
func checkParams(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op == nil {
		next(ctx)
		return
	}
	u := ctx.URL()
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// url.URL.Query drops a pair it cannot decode, so a bad cursor
		// would read as none; the query is refused whole instead.
		WriteProblem(ctx, NewProblem(http.StatusBadRequest, DefaultReason(http.StatusBadRequest),
			"the query string cannot be decoded; nothing was read",
			&huma.ErrorDetail{Location: "query", Message: "must be name=value pairs separated by &, each % followed by two hexadecimal digits (RFC 3986)"}))
		return
	}
	var errs []*huma.ErrorDetail
	for _, p := range op.Parameters {
		if p == nil {
			continue
		}
		var values []string
		switch p.In {
		case "path":
			values = []string{ctx.Param(p.Name)}
		case "query":
			values = query[p.Name]
		default:
			continue
		}
		for _, v := range values {
			if !IsText(v) {
				errs = append(errs, &huma.ErrorDetail{Location: p.In + "." + p.Name, Message: paramRule})
				break
			}
		}
	}
	if len(errs) > 0 {
		WriteProblem(ctx, NewProblem(http.StatusUnprocessableEntity, DefaultReason(http.StatusUnprocessableEntity),
			"a request parameter is not text this API accepts; nothing was stored", errs...))
		return
	}
	next(ctx)
}

// IsText reports whether s is valid UTF-8 without control characters.
func IsText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// Printable returns s when it is text (IsText) of at most maxEchoedValue
// bytes, else s quoted as a Go string (control characters and invalid
// bytes escaped) and cut to about maxEchoedValue bytes: what a problem's
// detail may carry of a value the caller sent.
func Printable(s string) string {
	if IsText(s) && len(s) <= maxEchoedValue {
		return s
	}
	return Quoted(s)
}

// Quoted returns s quoted as a Go string (control characters and invalid
// bytes escaped), cut to its first maxEchoedValue bytes and marked "…"
// when longer: how a problem's detail names a value the caller sent.
func Quoted(s string) string {
	if len(s) > maxEchoedValue {
		return strconv.Quote(s[:maxEchoedValue]) + "…"
	}
	return strconv.Quote(s)
}
