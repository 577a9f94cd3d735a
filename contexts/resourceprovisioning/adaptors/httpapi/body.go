package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// ReasonMalformed is the problem reason (400) of a report or event body
// that is not one I-JSON value (RFC 7493): not JSON, invalid UTF-8, an
// escaped lone surrogate, a member name repeated in one object, or data
// after the value.
const ReasonMalformed = "malformed"

// guardJSONBody is the operation middleware of the report and event intake.
// It reads the body before Huma decodes it and refuses what Go's JSON
// decoding would otherwise hide or accept silently:
//   - 400 malformed: a body that is not one I-JSON value — not JSON,
//     invalid UTF-8 or an escaped lone surrogate (replaced by U+FFFD when
//     decoded, so two distinct IDs could collide), a member name repeated in
//     one object (decoded last-one-wins, e.g. "limits":{"cpu":1,"cpu":2});
//   - 422 validation-failed at the member's location: null anywhere (no
//     member of these bodies is nullable; optional members are left out,
//     and a null would decode as a zero value) and a control character
//     (NUL among them, which PostgreSQL cannot store) in any string.
//
// Nothing is stored in either case. A body over the operation's limit, an
// empty body or one of another media type is passed on unchanged for Huma
// to answer (413, 400, 415). It runs after the authentication middleware
// and the admit hook, so only an admitted principal learns the body's rules.
func guardJSONBody() func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		body := ctx.BodyReader()
		if body == nil || op.MaxBodyBytes <= 0 || !jsonMediaType(ctx.Header("Content-Type")) {
			next(ctx)
			return
		}
		if op.BodyReadTimeout > 0 {
			_ = ctx.SetReadDeadline(time.Now().Add(op.BodyReadTimeout)) // Huma sets it again
		}
		raw, err := io.ReadAll(io.LimitReader(body, op.MaxBodyBytes))
		if err != nil || int64(len(raw)) >= op.MaxBodyBytes || len(bytes.TrimSpace(raw)) == 0 {
			// Huma reads the same bytes (and the rest, and the error) and
			// answers as it always does.
			next(bodyContext{humaContext: ctx, body: io.MultiReader(bytes.NewReader(raw), errReader{err}, body)})
			return
		}
		if p := checkJSONText(raw); p != nil {
			writeProblem(ctx, p)
			return
		}
		next(bodyContext{humaContext: ctx, body: bytes.NewReader(raw)})
	}
}

// jsonMediaType reports whether a Content-Type header names JSON (or is
// absent: Huma then decodes JSON).
func jsonMediaType(header string) bool {
	if header == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// checkJSONText returns nil when raw is exactly one JSON value of valid
// UTF-8 with no escaped lone surrogate, no member name repeated within an
// object, no null and no control character in any string or member name;
// otherwise the problem (400 malformed or 422 validation-failed, see
// guardJSONBody) naming the first offending location in Huma's notation
// ("body.reports[0].paused").
func checkJSONText(raw []byte) *httpserver.Problem {
	malformed := func(loc, msg string) *httpserver.Problem {
		return httpserver.NewProblem(http.StatusBadRequest, ReasonMalformed, "the body is not one well-formed JSON value (RFC 8259, I-JSON RFC 7493); nothing was stored",
			&huma.ErrorDetail{Location: loc, Message: msg})
	}
	invalid := func(loc, msg string) *httpserver.Problem {
		return httpserver.NewProblem(http.StatusUnprocessableEntity, domain.ReasonValidation, "the body breaks a JSON rule of this API; nothing was stored",
			&huma.ErrorDetail{Location: loc, Message: msg})
	}
	if !utf8.Valid(raw) {
		return malformed("body", "not valid UTF-8")
	}
	// frame is one open object or array: an object's member names and the
	// current one, or an array's current index.
	type frame struct {
		names    map[string]bool
		wantName bool
		name     string
		index    int
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		b.WriteString("body")
		for _, f := range stack {
			if f.names != nil {
				b.WriteString("." + f.name)
			} else {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		return b.String()
	}
	// valueDone moves the innermost container past a complete value.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.names != nil {
				f.wantName = true
			} else {
				f.index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	done := false
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if !done {
				return malformed("body", "no JSON value")
			}
			return nil
		}
		if err != nil {
			return malformed(path(), err.Error())
		}
		if done {
			return malformed("body", "data after the JSON value")
		}
		if s, ok := tok.(string); ok {
			if loneSurrogate(raw[start:dec.InputOffset()]) {
				return malformed(path(), "a string escapes a lone UTF-16 surrogate")
			}
			if n := len(stack); n > 0 && stack[n-1].names != nil && stack[n-1].wantName {
				f := stack[n-1]
				f.name, f.wantName = s, false
				if f.names[s] {
					return malformed(path(), fmt.Sprintf("member %s appears twice in one object", strconv.Quote(s)))
				}
				f.names[s] = true
				if hasControl(s) {
					return invalid(path(), "a member name must not hold control characters")
				}
				continue
			}
			if hasControl(s) {
				return invalid(path(), "a string must not hold control characters (U+0000 to U+001F, U+007F to U+009F)")
			}
		}
		switch v := tok.(type) {
		case nil:
			return invalid(path(), "null is not allowed; leave an optional member out")
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{names: map[string]bool{}, wantName: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default: // '}' or ']'
				stack = stack[:len(stack)-1]
			}
		}
		valueDone()
		if len(stack) == 0 {
			done = true
		}
	}
}

// hasControl reports whether s holds a control character.
func hasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

// loneSurrogate reports whether the JSON text tok (a string token with
// the separators before it) escapes a UTF-16 surrogate that is not part of
// a pair (\ud800 alone, or a low surrogate first).
func loneSurrogate(tok []byte) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] != '\\' {
			continue
		}
		if i+1 < len(tok) && tok[i+1] != 'u' {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		r, ok := hex4(tok, i+2)
		if !ok {
			continue // the decoder already refused it
		}
		i += 5
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xdc00 { // a low surrogate first
			return true
		}
		low, ok := hex4(tok, i+3)
		if i+2 >= len(tok) || tok[i+1] != '\\' || tok[i+2] != 'u' || !ok || low < 0xdc00 || low > 0xdfff {
			return true
		}
		i += 6
	}
	return false
}

// hex4 reads four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// writeProblem writes p as application/problem+json.
func writeProblem(ctx huma.Context, p *httpserver.Problem) {
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"status":500,"reason":"internal-error"}`)
	}
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	_, _ = ctx.BodyWriter().Write(body)
}

// humaContext names huma.Context for embedding: an embedded field named
// Context would hide the interface's Context method.
type humaContext = huma.Context

// bodyContext is a request context with its body replaced.
type bodyContext struct {
	humaContext
	body io.Reader
}

// BodyReader returns the replaced body.
func (c bodyContext) BodyReader() io.Reader { return c.body }

// errReader returns err, if any, once the bytes before it were read, so a
// failed read reaches Huma as it happened.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}
