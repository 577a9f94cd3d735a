package httpserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/pharos-metallo/metallo/platform/ijson"
)

// StrictJSONBody is the one strict JSON body guard of the central roles: an
// operation middleware that reads a request body before Huma decodes it
// and refuses what Go's JSON decoding would otherwise hide or accept
// silently (docs/architecture.md#one-answer-per-fault). It runs after the
// authentication middleware and the operation's admit rule, so only an
// admitted principal learns the body's rules. Each role states its own
// answers to Check's refusals in Refuse and Then.
//
// In order, a request is refused:
//   - whose Content-Type is not JSON (JSONMediaType: application/json or a
//     +json type, in any case, with no charset or charset UTF-8), or
//     missing (Huma would assume JSON): 415 unsupported-media-type, before
//     a byte of the body is read. An accepted type is handed to Huma as
//     application/json, so every JSON media type decodes alike;
//   - whose body cannot be read: BodyReadProblem (408 request-timeout past
//     the server's body read deadline, else 400 invalid-request: a body
//     shorter than its Content-Length, a broken chunked encoding);
//   - with a body of more than Limit bytes: 413 payload-too-large naming
//     Limit (a body of exactly Limit bytes is read);
//   - whose bytes Check refuses: Refuse(err) (Check returns an error wrapping
//     an *ijson.Error; JSONRule and JSONLocation read it);
//   - that Then refuses: its problem.
//
// The bytes read are put back, so the operation (and a later middleware)
// reads them unchanged.
type StrictJSONBody struct {
	// Limit is the largest body read, in bytes; 0 is the largest body Huma
	// reads for the operation (its MaxBodyBytes - 1). The operation's
	// MaxBodyBytes must exceed Limit, so Huma never answers with its own
	// bound.
	Limit int64
	// Check applies the role's strictness rules to the body; nil accepts
	// any bytes.
	Check func(raw []byte) error
	// Refuse is the answer to a body Check refused.
	Refuse func(err error) *Problem
	// Then checks a body Check accepted; nil or a nil problem passes it on.
	Then func(ctx huma.Context, raw []byte) *Problem
}

// Middleware returns g as a Huma operation middleware.
func (g StrictJSONBody) Middleware() func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		ct := ctx.Header("Content-Type")
		if !JSONMediaType(ct) {
			WriteProblem(ctx, NewProblem(http.StatusUnsupportedMediaType, DefaultReason(http.StatusUnsupportedMediaType), UnsupportedMediaTypeDetail(ct)))
			return
		}
		r, _ := humago.Unwrap(ctx)
		if r == nil {
			next(ctx)
			return
		}
		r.Header.Set("Content-Type", "application/json")
		limit := g.Limit
		if limit <= 0 {
			limit = ctx.Operation().MaxBodyBytes - 1
		}
		var raw []byte
		if r.Body != nil {
			var err error
			raw, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				WriteProblem(ctx, BodyReadProblem(err))
				return
			}
		}
		if int64(len(raw)) > limit {
			WriteProblem(ctx, NewProblem(http.StatusRequestEntityTooLarge, DefaultReason(http.StatusRequestEntityTooLarge),
				fmt.Sprintf("the request body is larger than the limit of %d bytes", limit)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if g.Check != nil {
			if err := g.Check(raw); err != nil {
				WriteProblem(ctx, g.Refuse(err))
				return
			}
		}
		if g.Then != nil {
			if p := g.Then(ctx, raw); p != nil {
				WriteProblem(ctx, p)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		next(ctx)
	}
}

// JSONMediaType reports whether a Content-Type declares JSON, the one
// media-type rule of both central roles: application/json or a structured
// syntax suffix +json type (RFC 6839), compared without regard to case
// (RFC 9110 section 8.3.1), with no charset or charset UTF-8 (RFC 8259
// section 8.1: JSON exchanged between systems is UTF-8).
func JSONMediaType(header string) bool {
	mt, params, err := mime.ParseMediaType(header) // lower-cases the type
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// UnsupportedMediaTypeDetail is the detail of the 415 answered for the
// Content-Type header ("" when none was given).
func UnsupportedMediaTypeDetail(header string) string {
	if header == "" {
		return "the request body must be declared application/json (or a +json type), UTF-8; no Content-Type was given; nothing was stored"
	}
	return fmt.Sprintf("the request body must be declared application/json (or a +json type), UTF-8, not %q; nothing was stored", Bounded(header))
}

// JSONStatus is the status of a body refused by an ijson strictness rule,
// the one rule of both central roles (docs/architecture.md#one-answer-per-fault):
// 400 when the bytes are not one I-JSON text (not JSON, invalid UTF-8, an
// escaped lone surrogate, a member named twice, data after the value,
// nested too deep); 422 for a well-formed text a rule refuses (a null, a
// NUL or another control character). An error without an *ijson.Error is
// 422.
func JSONStatus(err error) int {
	if je := (*ijson.Error)(nil); errors.As(err, &je) && je.Rule.NotText() {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// JSONLocation locates a strictness error at its member in Huma's notation
// ("body.reports[0].paused"; "body" for the whole text or an error without
// an *ijson.Error).
func JSONLocation(err error) string {
	var je *ijson.Error
	if errors.As(err, &je) {
		return je.Path.Location("body")
	}
	return "body"
}

// JSONRule states the strictness rule err breaks, without its location
// ("not strict JSON" for an error without an *ijson.Error).
func JSONRule(err error) string {
	var je *ijson.Error
	if errors.As(err, &je) {
		return je.Description()
	}
	return "not strict JSON"
}

// MaxEchoed bounds a value echoed in a problem's errors[].value or detail,
// in bytes.
const MaxEchoed = 64

// Bounded cuts s to at most MaxEchoed bytes (at a rune boundary), marked
// with "…" when cut.
func Bounded(s string) string {
	if len(s) <= MaxEchoed {
		return s
	}
	n := MaxEchoed
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
