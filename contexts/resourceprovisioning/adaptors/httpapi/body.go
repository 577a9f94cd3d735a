package httpapi

import (
	"errors"
	"net/http"

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

// guardJSONBody is the operation middleware of the report and event
// intake, the provisioning role's use of the one strict body guard
// (httpserver.StrictJSONBody: the body declared JSON, 415 otherwise; read
// whole, 400 invalid-request for one shorter than its Content-Length; at
// most MaxIntakeBodyBytes or MaxAccountsBodyBytes, 413 otherwise). It reads
// the body before Huma decodes it and refuses what Go's JSON decoding
// would otherwise hide or accept silently:
//   - 400 malformed: a body that is not one I-JSON value — not JSON,
//     invalid UTF-8 or an escaped lone surrogate (replaced by U+FFFD when
//     decoded, so two distinct IDs could collide), a member name repeated in
//     one object (decoded last-one-wins, e.g. "limits":{"cpu":1,"cpu":2}),
//     objects and arrays nested deeper than ijson.MaxDepth (32), the one
//     bound of both central roles;
//   - 422 validation-failed at the member's location: null anywhere (no
//     member of these bodies is nullable; optional members are left out,
//     and a null would decode as a zero value) and a control character
//     (NUL among them, which PostgreSQL cannot store) in any string.
//
// Nothing is stored in any case. It runs after the authentication
// middleware and the admit hook, so only an admitted principal learns the
// body's rules.
//
// A body that keeps those rules is then checked whole (bodyProblems): a
// number that does not fit its integer field (a fraction, an exponent such
// as 1e0, or beyond the 64-bit range; Huma would answer the decoder's text,
// naming Go types, located at "body"), the body schema of reg and the
// intake's own rules, so one 422 validation-failed names every bad field
// (docs/resource-provisioning.md#bad-input). newBody returns a pointer to
// a fresh body of the operation's type and the intake's check of it, run
// once the body is decoded into it.
func guardJSONBody(reg huma.Registry, newBody func() (any, func() error)) func(huma.Context, func(huma.Context)) {
	return httpserver.StrictJSONBody{
		// Limit 0: the largest body Huma reads for the operation, one byte
		// less than its MaxBodyBytes (MaxIntakeBodyBytes, MaxAccountsBodyBytes).
		Check:  checkJSONText,
		Refuse: jsonTextProblem,
		Then: func(ctx huma.Context, raw []byte) *httpserver.Problem {
			decoded, check := newBody()
			if errs := bodyProblems(reg, ctx.Operation(), raw, decoded, check); len(errs) > 0 {
				return httpserver.NewProblem(http.StatusUnprocessableEntity, domain.ReasonValidation,
					"the body breaks a validation rule; nothing was stored", errs...)
			}
			return nil
		},
	}.Middleware()
}

// checkJSONText returns nil when raw is exactly one JSON value of valid
// UTF-8 with no escaped lone surrogate, no member name repeated within an
// object, no null, no control character in any string or member name
// (ijson.Check refusing control characters) and at most ijson.MaxDepth
// levels of nesting; otherwise ijson's error.
func checkJSONText(raw []byte) error {
	_, err := ijson.Check(raw, ijson.Options{RefuseControl: true, MaxDepth: ijson.MaxDepth})
	return err
}

// jsonTextProblem is the answer to a body checkJSONText refused: 400
// malformed or 422 validation-failed (see guardJSONBody), naming the first
// offending location in Huma's notation ("body.reports[0].paused").
func jsonTextProblem(err error) *httpserver.Problem {
	var e *ijson.Error
	if !errors.As(err, &e) {
		return httpserver.NewProblem(http.StatusBadRequest, ReasonMalformed, err.Error())
	}
	detail := &huma.ErrorDetail{Location: e.Path.Location("body"), Message: e.Description()}
	if !e.Rule.NotText() {
		return httpserver.NewProblem(http.StatusUnprocessableEntity, domain.ReasonValidation, "the body breaks a JSON rule of this API; nothing was stored", detail)
	}
	return httpserver.NewProblem(http.StatusBadRequest, ReasonMalformed, "the body is not one well-formed JSON value (RFC 8259, I-JSON RFC 7493); nothing was stored", detail)
}
