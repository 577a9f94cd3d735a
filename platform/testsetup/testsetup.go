// Package testsetup is the setup the project's subprocess tests share:
// the binaries they run, built with `go build` once per test binary (the
// model is sapcc/limes' internal/test setup with options). It is test
// support: no production code imports it.
//
// A package whose tests call Binary runs them through Run in its TestMain,
// which removes the built binaries when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(testsetup.Run(m)) }
package testsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/procfs"
)

// Metallo is the package of the metallo binary, relative to the module
// root.
const Metallo = "./app/cmd/metallo"

// Option changes what Binary builds.
type Option func(*options)

type options struct {
	pkg  string
	make bool
}

// WithPackage builds the main package pkg (relative to the module root,
// e.g. "./systemtest/testbin") instead of Metallo.
func WithPackage(pkg string) Option {
	return func(o *options) { o.pkg = pkg }
}

// WithMake builds the metallo binary as `make build` does (its -ldflags
// stamp the version, revision, commit time and dirty flag from git;
// docs/operations.md#versions), not with a plain go build.
func WithMake() Option {
	return func(o *options) { o.make = true }
}

// built is the process's cache of binaries: one directory, removed by Run,
// and each package's build, done once.
var built struct {
	mu   sync.Mutex
	dir  string // "" until Run has made it
	bins map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Run makes the directory Binary builds into, runs the tests and removes
// it; it returns m.Run's exit code (TestMain exits with it).
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "metallo-testsetup-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsetup:", err)
		return 1
	}
	built.mu.Lock()
	built.dir, built.bins = dir, map[string]*build{}
	built.mu.Unlock()
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "testsetup:", err)
	}
	return code
}

// Binary returns the path of the metallo binary (or WithPackage's), built
// the first time a test of this test binary asks for it and reused after.
// It fails tb when the package's TestMain does not call Run or the build
// fails (with the compiler's output).
func Binary(tb testing.TB, opts ...Option) string {
	tb.Helper()
	o := options{pkg: Metallo}
	for _, opt := range opts {
		opt(&o)
	}
	built.mu.Lock()
	if built.dir == "" {
		built.mu.Unlock()
		tb.Fatal("testsetup.Binary needs the package's TestMain to call testsetup.Run")
	}
	name := o.pkg
	if o.make {
		name = "make build"
	}
	b, ok := built.bins[name]
	if !ok {
		b = &build{}
		built.bins[name] = b
	}
	dir := filepath.Join(built.dir, fmt.Sprint(len(built.bins)))
	built.mu.Unlock()
	b.once.Do(func() {
		if b.err = os.Mkdir(dir, 0o700); b.err == nil {
			b.path = filepath.Join(dir, filepath.Base(o.pkg))
			if o.make {
				b.path = filepath.Join(dir, "metallo")
				b.err = Make(context.Background(), b.path)
			} else {
				b.err = Build(context.Background(), b.path, o.pkg)
			}
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// Build compiles the main package pkg (relative to the module root, found
// with go env GOMOD from the working directory) into the executable out.
// The error carries the compiler's output.
func Build(ctx context.Context, out, pkg string) error {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// Make builds the metallo binary into out with the Makefile's build
// target (make build BIN=out) in the module root. The error carries make's
// output.
func Make(ctx context.Context, out string) error {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "build", "BIN="+out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make build: %w\n%s", err, b)
	}
	return nil
}

// ModuleRoot is the directory of the metallo module's go.mod, found with go env GOMOD from the
// working directory; it fails outside the module.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the metallo module")
	}
	return filepath.Dir(mod), nil
}

// ProcessStart returns the start time of process pid (field 22 of /proc/<pid>/stat, in clock
// ticks since boot, read with procfs), or "" when it does not run or is a zombie. With the pid it
// names a process for good: a recycled pid has another start time. The test helpers mark what a
// process leaves on a shared server with it (dbtest's databases, kubetest's leases, slurmtest's
// users and accounts), so that a later test can tell a leftover of a process that has ended.
func ProcessStart(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	st, err := p.Stat()
	if err != nil || st.State == "Z" {
		return ""
	}
	return strconv.FormatUint(st.Starttime, 10)
}
