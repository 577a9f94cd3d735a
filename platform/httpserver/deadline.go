package httpserver

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// DefaultBodyReadTimeout is the default of Config.BodyReadTimeout.
const DefaultBodyReadTimeout = 10 * time.Second

// ReasonRequestTimeout is the problem reason of a request whose body did
// not arrive within the body read deadline (408).
const ReasonRequestTimeout = "request-timeout"

// bodyDeadline gives every request that declares a body (a Content-Length
// above 0, or chunked) one read deadline: the body must arrive within
// timeout of the request's headers, on every route (docs/operations.md#request-bodies).
// A read past the deadline fails with a timeout (BodyReadProblem answers
// it 408); a handler that answers without reading the body is answered
// too, at the latest at the deadline (net/http then stops reading the rest
// and closes the connection). Once the body has been read to its end the
// deadline is lifted, so a handler that takes longer than timeout after
// reading the body is not cut off. Requests without a body (a long-polling
// pull) have no deadline here.
func bodyDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		r = r.WithContext(r.Context()) // a shallow copy: the caller's request stays as it was
		r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body has been read to its
// end.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

// ownDeadline hides huma.Context's SetReadDeadline from Huma: Huma would
// set a per-operation deadline of its own (Operation.BodyReadTimeout, 5 s
// unless set) when it reads a body, and again after the body was read,
// which would cancel a slow handler's context when it expires; the
// server's one deadline (bodyDeadline) is the only one.
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
