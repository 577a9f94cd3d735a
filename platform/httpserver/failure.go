package httpserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"
)

// ReasonUnavailable is the problem reason (503) of a request that a store,
// an owner or the credential check could not serve now; the answer carries
// Retry-After (UnavailableProblem).
const ReasonUnavailable = "unavailable"

// ReasonCancelled is the problem reason (503) of a request cancelled before
// its handler finished (the client went away).
const ReasonCancelled = "cancelled"

// ReasonInternal is the problem reason (500) of an error no rule maps.
const ReasonInternal = "internal-error"

// RetryAfterSeconds is the Retry-After of every 503 unavailable answer of
// both central roles, in seconds (RFC 9110 section 10.2.3).
const RetryAfterSeconds = 5

// UnavailableProblem is the answer to a request that cannot be served now:
// 503 unavailable with detail, a fixed sentence naming what cannot be
// reached (never a driver's or a remote's text), and Retry-After
// RetryAfterSeconds. A handler returns it as its error.
func UnavailableProblem(detail string) error {
	return huma.ErrorWithHeaders(NewProblem(http.StatusServiceUnavailable, ReasonUnavailable, detail),
		http.Header{"Retry-After": {strconv.Itoa(RetryAfterSeconds)}})
}

// Unavailable names, for Failure, an error that means a store or an owner
// cannot be reached now.
type Unavailable struct {
	// Err is the sentinel the error wraps (a context's ErrUnavailable).
	Err error
	// Detail is the answer's detail: a fixed sentence naming what cannot
	// be reached now, e.g. "the stream store cannot be reached now; retry later".
	Detail string
	// Log is the message of the warn line that logs the cause once.
	Log string
}

// logCauser is an error that keeps, for logs only, a cause its message
// leaves out (database.UnavailableError: the driver's text).
type logCauser interface{ LogCause() string }

// Failure is the tail of every central context's mapping of a handler's
// error to its answer, once the context's own rules (validation,
// conflicts, unknown objects) found none (docs/architecture.md#the-http-edge):
//   - an error wrapping one of unavailable's Err: 503 unavailable with its
//     Detail and Retry-After (UnavailableProblem); the error and its cause
//     are logged once at warn, with the request ID;
//   - a cancelled request (context.Canceled): 503 cancelled, not logged (its
//     client went away);
//   - anything else: 500 internal-error, logged once at error with the
//     request ID, which the answer's instance carries; the detail names
//     nothing of the error.
func Failure(ctx context.Context, log *zap.Logger, err error, unavailable ...Unavailable) error {
	for _, u := range unavailable {
		if u.Err != nil && errors.Is(err, u.Err) {
			fields := []zap.Field{zap.Error(err)}
			if c := logCauser(nil); errors.As(err, &c) {
				fields = append(fields, zap.String("cause", c.LogCause()))
			}
			RequestLog(ctx, log).Warn(u.Log, fields...)
			return UnavailableProblem(u.Detail)
		}
	}
	if errors.Is(err, context.Canceled) {
		return NewProblem(http.StatusServiceUnavailable, ReasonCancelled, "the request was cancelled before it finished")
	}
	RequestLog(ctx, log).Error("request failed", zap.Error(err))
	return NewProblem(http.StatusInternalServerError, ReasonInternal, "internal error; the server log names it with this request's ID (instance)")
}
