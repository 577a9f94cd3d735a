package app

import (
	"bytes"
	"strings"
	"testing"
)

// A body read deadline that is not a positive duration is refused before
// anything starts, naming the flag (docs/operations.md#request-bodies).
func TestServeRefusesABodyReadTimeoutThatIsNotPositive(t *testing.T) {
	for _, v := range []string{"0s", "-1s"} {
		var stderr bytes.Buffer
		code := Main(t.Context(), []string{"serve", "--role", "provisioning", "--body-read-timeout", v}, Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Roles: syntheticRoles})
		if code == 0 || !strings.Contains(stderr.String(), "--body-read-timeout") || !strings.Contains(stderr.String(), "positive") {
			t.Fatalf("--body-read-timeout %s: code %d, stderr %q", v, code, stderr.String())
		}
	}
}
