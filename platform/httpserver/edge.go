package httpserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// edge is the public listener's handler around the mux
// (docs/architecture.md#the-http-edge). For every request it:
//   - gives the request its ID (docs/operations.md#request-ids): the
//     X-Request-Id it came with when that is well-formed (IDPattern), else
//     a new UUID; the answer carries it in X-Request-Id, every problem in
//     its instance, and every line logged about the request in request_id
//     (RequestLog);
//   - gives a request that declares a body (a Content-Length above 0, or
//     chunked) the server's one body read deadline, timeout after its
//     headers, on every route (docs/operations.md#request-bodies): a read
//     past it fails with a timeout (BodyReadProblem answers it 408); once
//     the body has been read to its end the deadline is lifted, so a
//     handler that takes longer than timeout after reading the body is not
//     cut off. Requests without a body (a long-polling pull) have none;
//   - closes the connection after an answer written before the body was
//     read to its end (a refused credential, a refused media type, an
//     unknown route), reading nothing more of it: net/http would otherwise
//     read, and wait for, the rest of the body before answering, so a
//     client withholding its body would get its 401 or 403 only at the
//     deadline;
//   - answers, as an RFC 9457 problem, every answer of 300 or more that is
//     not one already: the mux's 404 (unknown route) and 405 (known route,
//     other method; its Allow kept), its 400 for the request target "*",
//     and its redirects of a path it would clean ("//x", "/x/../y") or
//     complete with a "/", which are 404 no-route here: paths are matched
//     as sent, never redirected.
func edge(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestIDFor(r.Header.Get(RequestIDHeader))
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(WithRequestID(r.Context(), id))
		ew := &edgeWriter{ResponseWriter: w, req: r}
		if !declaresBody(r) {
			next.ServeHTTP(ew, r)
			return
		}
		body := &edgeBody{ReadCloser: r.Body}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err == nil {
			body.lift = func() { _ = rc.SetReadDeadline(time.Time{}) }
		}
		r.Body = body // r is edge's own shallow copy (WithContext)
		ew.body = body
		ew.req = r
		next.ServeHTTP(ew, r)
		if !body.sawEOF.Load() {
			// Answered (Connection: close) before the body was read to its
			// end: net/http would still read up to 256 KiB of it, waiting
			// for a withheld body until the deadline, before it closes the
			// connection. Nothing more is read: the deadline is now.
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// declaresBody reports whether r declares a body: a Content-Length above
// 0, or a chunked one (-1).
func declaresBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// edgeBody records that the body was read to its end and then lifts the
// read deadline.
type edgeBody struct {
	io.ReadCloser
	lift   func()
	once   sync.Once
	sawEOF atomic.Bool
}

func (b *edgeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.sawEOF.Store(true)
		if b.lift != nil {
			b.once.Do(b.lift)
		}
	}
	return n, err
}

// edgeWriter is the answer as edge shapes it.
type edgeWriter struct {
	http.ResponseWriter
	req      *http.Request
	body     *edgeBody // nil when the request declares no body
	written  bool
	replaced bool
}

func (w *edgeWriter) WriteHeader(code int) {
	if code < 200 || w.written { // 1xx, or a superfluous call net/http logs
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.written = true
	h := w.Header()
	if w.body != nil && !w.body.sawEOF.Load() {
		h.Set("Connection", "close")
	}
	if code < 300 || code == http.StatusNotModified || strings.HasPrefix(h.Get("Content-Type"), "application/problem+") {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	p := w.fallbackProblem(code)
	p.Instance = instanceOf(w.req.Context())
	w.replaced = true
	body, _ := json.Marshal(p)
	h.Del("Location")
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.ResponseWriter.WriteHeader(p.Status)
	_, _ = w.ResponseWriter.Write(body)
}

// fallbackProblem is the problem answered in place of a non-problem answer
// of code.
func (w *edgeWriter) fallbackProblem(code int) *Problem {
	path := Printable(w.req.URL.Path)
	switch {
	case code == http.StatusNotFound:
		return NewProblem(code, DefaultReason(code), "no route "+path)
	case code == http.StatusMethodNotAllowed:
		return NewProblem(code, DefaultReason(code), "route "+path+" does not take this method; allowed: "+w.Header().Get("Allow"))
	case code >= 300 && code < 400:
		detail := "no route " + path + ": paths are matched as sent, never cleaned or redirected"
		if loc := w.Header().Get("Location"); loc != "" {
			detail += " (the route may be " + Printable(loc) + ")"
		}
		return NewProblem(http.StatusNotFound, DefaultReason(http.StatusNotFound), detail)
	case code == http.StatusBadRequest:
		return NewProblem(code, DefaultReason(code), "the request target "+Printable(w.req.RequestURI)+" is not a route of this API")
	}
	return NewProblem(code, DefaultReason(code), http.StatusText(code))
}

func (w *edgeWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *edgeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refuseUndeclaredBody is an API middleware (UseAuthentication adds it after
// the admit rule): an operation that takes no request body refuses a
// request that declares one (a Content-Length above 0, or chunked) with 400
// invalid-request, without reading it; the connection is then closed
// (edge). So a body is never silently ignored, and one the client never
// finishes sending is answered at once.
func refuseUndeclaredBody(ctx huma.Context, next func(huma.Context)) {
	if op := ctx.Operation(); op != nil && op.RequestBody == nil {
		if r, _ := humago.Unwrap(ctx); r != nil && declaresBody(r) {
			WriteProblem(ctx, NewProblem(http.StatusBadRequest, DefaultReason(http.StatusBadRequest),
				op.Method+" "+op.Path+" takes no request body; nothing was read"))
			return
		}
	}
	next(ctx)
}
