package httpserver

import (
	"net/http"

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
// *Problem carrying a default reason, so every 4xx/5xx body has "reason".
func problemTransformer(_ huma.Context, _ string, v any) (any, error) {
	if em, ok := v.(*huma.ErrorModel); ok {
		return &Problem{ErrorModel: *em, Reason: DefaultReason(em.Status)}, nil
	}
	return v, nil
}
