package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/ijson"
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
// A request without a Content-Type is 415 unsupported-media-type (Huma
// would assume JSON). Nothing is stored in any case. A body over the
// operation's limit, an empty body or one of another media type is passed
// on unchanged for Huma to answer (413, 400, 415). It runs after the authentication middleware
// and the admit hook, so only an admitted principal learns the body's rules.
//
// newBody returns a pointer to the operation's body type: the body is
// decoded into it once, and a number that does not fit its integer field
// (a fraction, an exponent such as 1e0, or beyond the 64-bit range) is 422
// validation-failed at that member's location with a plain message (Huma
// would answer the decoder's text, naming Go types, located at "body").
func guardJSONBody(newBody func() any) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if ctx.Header("Content-Type") == "" {
			// Huma would assume JSON; the execution API refuses it too.
			httpserver.WriteProblem(ctx, httpserver.NewProblem(http.StatusUnsupportedMediaType, httpserver.DefaultReason(http.StatusUnsupportedMediaType),
				"the request body must be declared application/json (no Content-Type was given); nothing was stored"))
			return
		}
		op := ctx.Operation()
		body := ctx.BodyReader()
		if body == nil || op.MaxBodyBytes <= 0 || !jsonMediaType(ctx.Header("Content-Type")) {
			next(ctx)
			return
		}
		// The server's body read deadline bounds this read; past it Huma
		// answers the read's timeout 408 request-timeout.
		raw, err := io.ReadAll(io.LimitReader(body, op.MaxBodyBytes))
		if err != nil || int64(len(raw)) >= op.MaxBodyBytes || len(bytes.TrimSpace(raw)) == 0 {
			// Huma reads the same bytes (and the rest, and the error) and
			// answers as it always does.
			next(bodyContext{humaContext: ctx, body: io.MultiReader(bytes.NewReader(raw), errReader{err}, body)})
			return
		}
		if p := checkJSONText(raw); p != nil {
			httpserver.WriteProblem(ctx, p)
			return
		}
		if p := checkNumbers(raw, newBody()); p != nil {
			httpserver.WriteProblem(ctx, p)
			return
		}
		next(bodyContext{humaContext: ctx, body: bytes.NewReader(raw)})
	}
}

// jsonMediaType reports whether a Content-Type header names JSON.
func jsonMediaType(header string) bool {
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// checkJSONText returns nil when raw is exactly one JSON value of valid
// UTF-8 with no escaped lone surrogate, no member name repeated within an
// object, no null and no control character in any string or member name
// (ijson.Check refusing control characters); otherwise the problem (400
// malformed or 422 validation-failed, see guardJSONBody) naming the first
// offending location in Huma's notation ("body.reports[0].paused").
func checkJSONText(raw []byte) *httpserver.Problem {
	_, err := ijson.Check(raw, ijson.Options{RefuseControl: true})
	if err == nil {
		return nil
	}
	var e *ijson.Error
	if !errors.As(err, &e) {
		return httpserver.NewProblem(http.StatusBadRequest, ReasonMalformed, err.Error())
	}
	detail := &huma.ErrorDetail{Location: e.Path.Location("body"), Message: e.Description()}
	switch e.Rule {
	case ijson.Null, ijson.NUL, ijson.ControlCharacter:
		return httpserver.NewProblem(http.StatusUnprocessableEntity, domain.ReasonValidation, "the body breaks a JSON rule of this API; nothing was stored", detail)
	default:
		return httpserver.NewProblem(http.StatusBadRequest, ReasonMalformed, "the body is not one well-formed JSON value (RFC 8259, I-JSON RFC 7493); nothing was stored", detail)
	}
}

// checkNumbers decodes raw into body and returns the 422 problem of a JSON
// number that does not fit the integer field it is decoded into, located
// at that member ("body.project.revision"); nil otherwise. Other decoding
// errors are left to Huma's validation, which locates them.
func checkNumbers(raw []byte, body any) *httpserver.Problem {
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(raw, body); !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number") {
		return nil
	}
	msg := "must be an integer written without a fraction or an exponent"
	if !strings.ContainsAny(strings.TrimPrefix(te.Value, "number"), ".eE") {
		msg = "is out of range: must be an integer from -9223372036854775808 to 9223372036854775807"
		if te.Type != nil && te.Type.Kind() >= reflect.Uint && te.Type.Kind() <= reflect.Uint64 {
			msg = "is out of range: must be a non-negative integer that fits 64 bits"
		}
	}
	return httpserver.NewProblem(http.StatusUnprocessableEntity, domain.ReasonValidation, "the body breaks a validation rule; nothing was stored",
		&huma.ErrorDetail{Location: locationAt(raw, te.Offset), Message: msg})
}

// locationAt returns the location, in Huma's notation ("body.reports[0].
// limits.cpu"), of the scalar value of raw (valid JSON) that ends at byte
// offset end; "body" when there is none.
func locationAt(raw []byte, end int64) string {
	type frame struct {
		array bool
		key   string
		index int
		inKey bool // an object expecting a member name next
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []frame
	loc := func() string {
		var b strings.Builder
		b.WriteString("body")
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
			} else {
				b.WriteString("." + f.key)
			}
		}
		return b.String()
	}
	// value marks that a value ended in the innermost container.
	value := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].inKey = true
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "body"
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].inKey {
			if k, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].inKey = k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{inKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{array: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			value()
			continue
		}
		if dec.InputOffset() >= end {
			return loc()
		}
		value()
	}
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
