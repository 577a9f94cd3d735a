package httpserver

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// DefaultBodyReadTimeout is the default of Config.BodyReadTimeout.
const DefaultBodyReadTimeout = 10 * time.Second

// ReasonRequestTimeout is the problem reason of a request whose body did
// not arrive within the body read deadline (408).
const ReasonRequestTimeout = "request-timeout"

// ownDeadline hides huma.Context's SetReadDeadline from Huma: Huma would
// set a per-operation deadline of its own (Operation.BodyReadTimeout, 5 s
// unless set) when it reads a body, and again after the body was read,
// which would cancel a slow handler's context when it expires; the
// server's one deadline (edge) is the only one.
type ownDeadline struct{ humaContext }

// humaContext names huma.Context for embedding: an embedded field named
// Context would hide the interface's Context method.
type humaContext = huma.Context

// SetReadDeadline does nothing: the server owns the body's deadline.
func (ownDeadline) SetReadDeadline(time.Time) error { return nil }

// Unwrap returns the wrapped context (humago.Unwrap follows it).
func (c ownDeadline) Unwrap() huma.Context { return c.humaContext }

// useOwnDeadline is the API's first middleware: see ownDeadline.
func useOwnDeadline(ctx huma.Context, next func(huma.Context)) { next(ownDeadline{ctx}) }

// IsTimeout reports whether err is a read that failed on a deadline (the
// body read deadline).
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// BodyReadProblem is the answer to a request body that could not be read:
// 408 request-timeout when it did not arrive within the body read deadline
// (a client may retry it), else 400 invalid-request. Nothing was stored.
func BodyReadProblem(err error) *Problem {
	if IsTimeout(err) {
		return NewProblem(http.StatusRequestTimeout, ReasonRequestTimeout,
			"the request body did not arrive within the server's body read deadline; nothing was stored")
	}
	return NewProblem(http.StatusBadRequest, DefaultReason(http.StatusBadRequest), "the request body could not be read; nothing was stored")
}
