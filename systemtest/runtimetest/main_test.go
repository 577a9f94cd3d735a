package runtimetest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/pharos-metallo/metallo/systemtest/harness"
)

// bins are built once for the package (TestMain).
var bins harness.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "metallo-runtime-systemtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err = harness.Build(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
