package httpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
)

// deadlineServer is the real server (newServer, started on a loopback
// port) with BodyReadTimeout timeout and four kinds of route: a Huma body
// decoded by Huma (whose own per-operation deadline is shorter than the
// server's, to show it does not apply), a raw body read by a middleware
// from the request (as execution_ports' routes read theirs), a GET that
// never reads a body, and a body read by a handler that then works
// longer than the deadline (its context must not be cancelled).
func deadlineServer(t *testing.T, timeout time.Duration) string {
	t.Helper()
	lc := fxtest.NewLifecycle(t)
	reg := RegistrarFunc(func(api huma.API) {
		huma.Register(api, huma.Operation{OperationID: "decoded", Method: http.MethodPost, Path: "/decoded", BodyReadTimeout: timeout / 10},
			func(_ context.Context, in *echoIn) (*struct{}, error) { return &struct{}{}, nil })
		huma.Register(api, huma.Operation{OperationID: "raw", Method: http.MethodPost, Path: "/raw", SkipValidateBody: true,
			Middlewares: huma.Middlewares{func(ctx huma.Context, next func(huma.Context)) {
				r, _ := humago.Unwrap(ctx)
				if _, err := io.ReadAll(r.Body); err != nil {
					WriteProblem(ctx, BodyReadProblem(err))
					return
				}
				next(ctx)
			}}},
			func(_ context.Context, in *struct {
				RawBody []byte `contentType:"application/json"`
			}) (*struct{}, error) {
				return &struct{}{}, nil
			})
		huma.Register(api, huma.Operation{OperationID: "get", Method: http.MethodGet, Path: "/get"},
			func(context.Context, *struct{}) (*struct{}, error) { return &struct{}{}, nil })
		huma.Register(api, huma.Operation{OperationID: "slow", Method: http.MethodPost, Path: "/slow"},
			func(ctx context.Context, in *echoIn) (*struct{}, error) {
				select {
				case <-time.After(2 * timeout):
					return &struct{}{}, nil
				case <-ctx.Done():
					return nil, NewProblem(http.StatusServiceUnavailable, "cancelled", "the handler's context was cancelled after its body was read")
				}
			})
	})
	s, err := newServer(Config{Listen: "127.0.0.1:0", Title: "test", BodyReadTimeout: timeout},
		serverParams{Lifecycle: lc, Log: zap.NewNop(), Authn: auth.Chain{}, Registrars: []Registrar{reg}})
	if err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	t.Cleanup(lc.RequireStop)
	return s.Addr()
}

// rawRequest writes head and body on a fresh connection and reads the
// status line of the answer, bounded by wait (a bound on a hang).
func rawRequest(t *testing.T, addr, head, body string, wait time.Duration) (int, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(start.Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: no answer within %s: %v", strings.SplitN(head, "\r\n", 2)[0], wait, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// A body declared with Content-Length 999 of which 7 bytes arrive is
// answered on every kind of route: 408 request-timeout where the body is
// read, once the server's one read deadline has passed (never before it,
// so Huma's shorter per-operation one does not apply); where it is not
// read, at once, closing the connection (a GET, which takes no body, 400;
// an unknown path 404).
func TestASlowBodyIsAnsweredAtTheBodyReadDeadlineOnEveryRoute(t *testing.T) {
	const timeout = time.Second
	addr := deadlineServer(t, timeout)
	for path, want := range map[string]int{"/decoded": 408, "/raw": 408, "/get": 400, "/nowhere": 404} {
		method := http.MethodPost
		if path == "/get" {
			method = http.MethodGet
		}
		head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 999\r\n", method, path)
		// The hang bound: the deadline and then some (not a speed target).
		code, took := rawRequest(t, addr, head, `{"n":1,`, timeout+10*time.Second)
		if code != want {
			t.Errorf("%s %s with a stalled body: %d, want %d", method, path, code, want)
		}
		if want == 408 && took < timeout {
			t.Errorf("%s %s: 408 after %s, before the server's deadline of %s", method, path, took, timeout)
		}
	}
}

// A body that arrives in time lifts the deadline: a handler that then
// works longer than the deadline keeps its context and answers; so does a
// second request on the same connection.
func TestTheBodyReadDeadlineIsLiftedOnceTheBodyHasArrived(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := deadlineServer(t, timeout)
	body := `{"n":1}`
	head := fmt.Sprintf("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	if code, _ := rawRequest(t, addr, head, body, 10*time.Second); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("a handler slower than the body deadline after its body arrived: %d", code)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/decoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := range 2 {
		resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("request %d on a kept-alive connection: %d", i, resp.StatusCode)
		}
		req.Body = io.NopCloser(strings.NewReader(body))
		time.Sleep(2 * timeout)
	}
}
