package runtimetest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// `runtime check` pulls read-only (bind=false): a check by one installation
// never binds the stream, so another installation's Runtime binds it and
// delivers; afterwards the first installation's check is refused
// installation-mismatch and still sends nothing.
func TestRuntimeCheckNeverBindsTheStream(t *testing.T) {
	e := newEnv(t)
	e.append(t, startCmd(1, nil))
	out, err := e.rt.Check()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	mustContain(t, out, "next command 1", "installation: unbound (this read-only check did not bind it)")

	second, err := harness.NewRuntime(bins.Runtime, e.site, filepath.Join(t.TempDir(), "second"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := second.Install(); err != nil {
		t.Fatal(out, err)
	}
	deliverAll(t, &env{site: e.site, rt: second}, 1) // the stream was unbound: the second installation binds it

	out, err = e.rt.Check()
	if err == nil || !strings.Contains(out, "installation-mismatch") {
		t.Fatalf("a check by another installation of a bound stream: %v\n%s", err, out)
	}
}
