package testsetup

import (
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// The binary is built once per test binary: a second call returns the
// same executable without building again, and another package gets its own.
func TestBinaryIsBuiltOncePerTestBinary(t *testing.T) {
	first := Binary(t)
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatalf("the built binary: %v", err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is not executable (%v)", first, fi.Mode())
	}
	if again := Binary(t); again != first {
		t.Fatalf("second Binary = %s, want the first build %s", again, first)
	}
	after, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the binary was rebuilt: modified %v, then %v", fi.ModTime(), after.ModTime())
	}
	other := Binary(t, WithPackage("./systemtest/testbin"))
	if other == first {
		t.Fatalf("WithPackage returned the metallo binary %s", other)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("the other package's binary: %v", err)
	}
}

// A package that does not build is a failure carrying the compiler's
// output, never a binary.
func TestBuildOfAMissingPackageFailsWithTheCompilersOutput(t *testing.T) {
	err := Build(t.Context(), t.TempDir()+"/x", "./no/such/package")
	if err == nil {
		t.Fatal("Build of a missing package succeeded")
	}
	if want := "go build ./no/such/package"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}
