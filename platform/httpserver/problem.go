package httpserver

import (
	"encoding/json"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
)

// Problem is an RFC 9457 problem details body (application/problem+json)
// with the extension member "reason": a machine-readable reason from the
// answering context's closed vocabulary (kebab-case on the Site protocol,
// e.g. "out-of-order"; snake_case in Resource Provisioning, e.g.
// "stale_report"). Clients decide by reason alone.
type Problem struct {
	huma.ErrorModel
	Reason string `json:"reason,omitempty" doc:"Machine-readable reason for the problem."`
}

// NewProblem returns a problem with status, reason and a human detail,
// optionally listing the offending locations.
func NewProblem(status int, reason, detail string, errs ...*huma.ErrorDetail) *Problem {
	return &Problem{
		ErrorModel: huma.ErrorModel{
			Title:  http.StatusText(status),
			Status: status,
			Detail: detail,
			Errors: errs,
		},
		Reason: reason,
	}
}

// DefaultReason returns the reason given to problems that Huma or the
// platform raise without one (request decoding, validation, routing, auth).
func DefaultReason(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid-request"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not-found"
	case http.StatusMethodNotAllowed:
		return "method-not-allowed"
	case http.StatusRequestTimeout:
		return ReasonRequestTimeout
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "payload-too-large"
	case http.StatusUnsupportedMediaType:
		return "unsupported-media-type"
	case http.StatusUnprocessableEntity:
		return "validation-failed"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 500 {
		return "internal-error"
	}
	return "request-refused"
}

// problemTransformer turns every *huma.ErrorModel that Huma writes into a
// *Problem carrying a default reason, so every 4xx/5xx body has "reason",
// bounds the values every problem echoes (boundEchoedValues), a handler's
// *Problem too, and gives every problem the request's ID as its instance
// (docs/operations.md#request-ids).
func problemTransformer(ctx huma.Context, _ string, v any) (any, error) {
	var p *Problem
	switch x := v.(type) {
	case *huma.ErrorModel:
		p = &Problem{ErrorModel: *x, Reason: DefaultReason(x.Status)}
		v = p
	case *Problem:
		p = x
	default:
		return v, nil
	}
	p.Errors = boundEchoedValues(p.Errors)
	if p.Instance == "" && ctx != nil {
		p.Instance = instanceOf(ctx.Context())
	}
	return v, nil
}

// maxEchoedValue bounds the offending value a problem echoes back (Huma
// echoes the whole request body for some decoding errors).
const maxEchoedValue = 256

// boundEchoedValues drops echoed values longer than maxEchoedValue bytes
// (as text), keeping the message and location, so a problem never carries a
// large or sensitive request body back. Only strings, numbers and booleans
// are measured; an object or array is dropped without being formatted
// (Huma echoes the whole object for each unknown member, and formatting
// it once per error made a wide body cost quadratic time).
func boundEchoedValues(errs []*huma.ErrorDetail) []*huma.ErrorDetail {
	for i, e := range errs {
		if e == nil || e.Value == nil || echoable(e.Value) {
			continue
		}
		c := *e
		c.Value = nil
		errs[i] = &c
	}
	return errs
}

// echoable reports whether v may be echoed: a number, a boolean, or a
// string of at most maxEchoedValue bytes of text (IsText: valid UTF-8
// without control characters, so no NUL or invalid byte a caller sent
// comes back).
func echoable(v any) bool {
	switch x := v.(type) {
	case string:
		return len(x) <= maxEchoedValue && IsText(x)
	case bool, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return true
	}
	return false
}

// problemSchemas documents every problem+json response of an operation
// with the Problem schema (RFC 9457 plus "reason") instead of Huma's
// ErrorModel, every response's X-Request-Id and every 503's Retry-After.
func problemSchemas(oapi *huma.OpenAPI, op *huma.Operation) {
	schema := oapi.Components.Schemas.Schema(reflect.TypeOf(Problem{}), true, "Problem")
	for status, resp := range op.Responses {
		if resp == nil {
			continue
		}
		if mt, ok := resp.Content["application/problem+json"]; ok && mt != nil {
			mt.Schema = schema
		}
		if resp.Headers == nil {
			resp.Headers = map[string]*huma.Param{}
		}
		resp.Headers[RequestIDHeader] = &huma.Param{
			Description: "The request's ID: the X-Request-Id sent when it is 1-128 letters, digits, '.', '_' or '-', else a new UUID; a problem's instance is urn:metallo:request:<ID>, and the server's log lines about the request carry it as request_id.",
			Schema:      &huma.Schema{Type: huma.TypeString, Pattern: IDPattern},
		}
		if status == "503" {
			resp.Headers["Retry-After"] = &huma.Param{
				Description: "Seconds to wait before retrying (RFC 9110): sent with every 503 unavailable (the credential check, the context's store or an owner cannot be reached now); absent on 503 cancelled.",
				Schema:      &huma.Schema{Type: huma.TypeInteger, Minimum: new(float64)},
			}
		}
	}
}
