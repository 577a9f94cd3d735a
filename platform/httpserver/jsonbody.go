package httpserver

import (
	"bytes"
	"errors"
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
// answers in the fields; the zero value of an optional field passes that
// case on to Huma unchanged.
//
// In order, a request is refused:
//   - without a Content-Type: 415 unsupported-media-type (Huma would assume
//     JSON), detail UnsupportedDetail(""); with OnlyJSON, also any media type
//     but application/json with no charset or charset UTF-8 (Huma could
//     decode CBOR); without OnlyJSON a media type that is not JSON
//     (application/json or +json) is passed on;
//   - with a body of more than Limit bytes: 413 payload-too-large, detail
//     TooLargeDetail (a body of exactly Limit bytes is read); with an empty
//     TooLargeDetail, a body of Limit bytes or more, an empty body and a
//     failed read are passed on (Huma reads the same bytes, then the rest
//     and the error, and answers as it always does). A read that fails with
//     OwnRead set is answered by BodyReadProblem (408 past the server's body
//     read deadline);
//   - whose bytes Check refuses: Refuse(err) (Check returns an error wrapping
//     an *ijson.Error; JSONRule and JSONLocation read it);
//   - that Then refuses: its problem.
//
// The bytes read are put back, so the operation (and a later middleware)
// reads them unchanged.
type StrictJSONBody struct {
	// Limit is the largest body read, in bytes; 0 is the operation's
	// MaxBodyBytes (an operation without one is passed on unchecked).
	Limit int64
	// OnlyJSON refuses every media type but application/json (UTF-8).
	OnlyJSON bool
	// UnsupportedDetail returns the 415 detail for the Content-Type given
	// ("" when none was given).
	UnsupportedDetail func(contentType string) string
	// TooLargeDetail is the 413 detail of a body over Limit; "" passes an
	// over-long body on to Huma.
	TooLargeDetail string
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
		if ct == "" || (g.OnlyJSON && !utf8JSON(ct)) {
			WriteProblem(ctx, NewProblem(http.StatusUnsupportedMediaType, DefaultReason(http.StatusUnsupportedMediaType), g.UnsupportedDetail(ct)))
			return
		}
		if !g.OnlyJSON && !jsonMediaType(ct) {
			next(ctx)
			return
		}
		r, _ := humago.Unwrap(ctx)
		if r == nil || r.Body == nil {
			next(ctx)
			return
		}
		limit := g.Limit
		if limit == 0 {
			limit = ctx.Operation().MaxBodyBytes
		}
		if limit <= 0 {
			next(ctx)
			return
		}
		body := r.Body
		raw, err := io.ReadAll(io.LimitReader(body, limit+1))
		ownBounds := g.TooLargeDetail != ""
		switch {
		case err != nil && ownBounds:
			WriteProblem(ctx, BodyReadProblem(err))
			return
		case int64(len(raw)) > limit && ownBounds:
			WriteProblem(ctx, NewProblem(http.StatusRequestEntityTooLarge, DefaultReason(http.StatusRequestEntityTooLarge), g.TooLargeDetail))
			return
		case !ownBounds && (err != nil || int64(len(raw)) >= limit || len(bytes.TrimSpace(raw)) == 0):
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), errReader{err}, body))
			next(ctx)
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

// utf8JSON reports whether a Content-Type is application/json with no
// charset or charset UTF-8.
func utf8JSON(header string) bool {
	mt, params, err := mime.ParseMediaType(header)
	return err == nil && mt == "application/json" && (params["charset"] == "" || strings.EqualFold(params["charset"], "utf-8"))
}

// jsonMediaType reports whether a Content-Type header names JSON.
func jsonMediaType(header string) bool {
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
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

// errReader returns err, if any, once the bytes before it were read, so a
// failed read reaches Huma as it happened.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
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
