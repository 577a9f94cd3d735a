package app

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver/routetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// wrongKeyFor is a key op's admit rule refuses: an environment's on
// Execution's routes, a Site's on a service's, a service's on a Site's or
// an environment's.
func wrongKeyFor(s *sweepProcess, op *huma.Operation) string {
	switch {
	case strings.HasPrefix(op.Path, "/execution/"):
		return s.files.EnvironmentKeys[sweepEnv]
	case keyFor(s, op) == s.files.ServiceKey || strings.HasSuffix(op.Path, "/events/beto"):
		return s.files.ExtraKeys["site:alpha"]
	}
	return s.files.ServiceKey
}

// TestARefusedKeyIsAnsweredWhileTheBodyIsWithheldOnEveryRoute serves both
// central roles with --body-read-timeout 60s and sends every route a
// request that declares a 100-byte body and sends none of it, with a key
// the route does not admit (403 forbidden) and with none (401
// unauthenticated). The answer arrives while the client still withholds
// the body, says Connection: close, and the server then closes the
// connection. The reads wait on the answer, bounded only by the test's own
// deadline: a server that waited for the body would fail the test there
// (docs/operations.md#request-bodies).
func TestARefusedKeyIsAnsweredWhileTheBodyIsWithheldOnEveryRoute(t *testing.T) {
	s := startSweepProcessWith(t, "sqlite", 60*time.Second)
	ops := routetest.Operations(s.api)
	if len(ops) < 15 {
		t.Fatalf("the served document has %d operations; both roles' are expected", len(ops))
	}
	for _, op := range ops {
		for _, tc := range []struct {
			auth   string
			status int
			reason string
		}{
			{"Authorization: Bearer " + wrongKeyFor(s, op) + "\r\n", http.StatusForbidden, "forbidden"},
			{"", http.StatusUnauthorized, "unauthenticated"},
		} {
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := t.Deadline(); ok {
				_ = conn.SetDeadline(d)
			}
			head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\n%s%s: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
				op.Method, fill(op, nil), tc.auth, siteprotocol.InstallationHeader, sweepInstID)
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s %s: no answer while the body is withheld: %v", op.Method, op.Path, err)
			}
			raw, _ := io.ReadAll(resp.Body)
			var p struct {
				Reason string `json:"reason"`
			}
			if resp.StatusCode != tc.status || json.Unmarshal(raw, &p) != nil || p.Reason != tc.reason || !resp.Close {
				t.Errorf("%s %s: %d %s (Connection: close %v), want %d %s and the connection closed", op.Method, op.Path, resp.StatusCode, raw, resp.Close, tc.status, tc.reason)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Errorf("%s %s: after the %d the connection stays open (%v)", op.Method, op.Path, resp.StatusCode, err)
			}
			_ = conn.Close()
		}
	}
}
