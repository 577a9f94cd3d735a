package workspaceread_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/workspaceread"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// workspace is a temporary directory standing for the mounted claim, with
// a sibling directory outside it (another member's mount, say).
func workspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws, outside = filepath.Join(base, "workspace"), filepath.Join(base, "other")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("another member's"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// roundTrip checks that the line Read answers parses back as the Runtime
// parses the reader's log, with the same content.
func roundTrip(t *testing.T, r domain.FileRead, maxBytes int64) []byte {
	t.Helper()
	got, content, err := domain.ParseFileRead(r.Encode(), maxBytes)
	if err != nil {
		t.Fatalf("the reader's line %s does not parse: %v", r.Encode(), err)
	}
	if got.Outcome != r.Outcome || got.Reason != r.Reason {
		t.Fatalf("parsed %s / %s, wrote %s / %s", got.Outcome, got.Reason, r.Outcome, r.Reason)
	}
	return content
}

func mustRefuse(t *testing.T, ws, path, want string) {
	t.Helper()
	r := workspaceread.Read(ws, path, 4096)
	if r.Outcome != siteprotocol.OutcomeRefused || r.Reason != siteprotocol.ReasonPathRejected {
		t.Fatalf("Read(%q) = %+v, want refused / path-rejected", path, r)
	}
	if !strings.Contains(r.Message, want) {
		t.Fatalf("Read(%q) says %q, want it to say %q", path, r.Message, want)
	}
	if r.ContentBase64 != "" {
		t.Fatalf("Read(%q) refused with content", path)
	}
	roundTrip(t, r, 4096)
}

// Paths that are not clean relative paths are refused before anything
// is opened.
func TestUncleanPathsAreRejected(t *testing.T) {
	ws, _ := workspace(t)
	write(t, filepath.Join(ws, "a", "b.txt"), []byte("b"))
	for _, p := range []string{"../x", "/etc/passwd", "a/../a/b.txt", "", ".", "a/", "./a/b.txt", "a//b.txt", "a/\x00"} {
		mustRefuse(t, ws, p, "not a clean relative path")
	}
}

// A symbolic link whose target is absolute, or that climbs above the
// workspace, is never followed: not to /etc, not to the Pod's mounted
// secrets, not to another member's mount path, not even to a file inside
// the workspace by its absolute path.
func TestEscapingLinksAreRejected(t *testing.T) {
	ws, outside := workspace(t)
	write(t, filepath.Join(ws, "inside.txt"), []byte("inside"))
	link(t, "/etc", filepath.Join(ws, "etc"))
	link(t, "/etc/passwd", filepath.Join(ws, "passwd"))
	link(t, "/var/run/secrets", filepath.Join(ws, "secrets"))
	link(t, outside, filepath.Join(ws, "other-abs"))
	link(t, "../other/secret", filepath.Join(ws, "other-rel"))
	link(t, "../../other", filepath.Join(ws, "sub", "up"))
	link(t, filepath.Join(ws, "inside.txt"), filepath.Join(ws, "self-abs"))
	for _, p := range []string{"etc/passwd", "passwd", "secrets/kubernetes.io/serviceaccount/token", "other-abs/secret", "other-rel", "sub/up/secret"} {
		mustRefuse(t, ws, p, "leaves the workspace")
	}
	// An absolute link back into the workspace still names the host's
	// path: refused like any other.
	mustRefuse(t, ws, "self-abs", "leaves the workspace")
}

// A chain of links that stays inside the workspace is followed.
func TestLinkChainsInsideAreFollowed(t *testing.T) {
	ws, _ := workspace(t)
	write(t, filepath.Join(ws, "data", "real.txt"), []byte("the real bytes\n"))
	link(t, "real.txt", filepath.Join(ws, "data", "one"))
	link(t, "../data/one", filepath.Join(ws, "sub", "two"))
	link(t, "sub/two", filepath.Join(ws, "three"))
	link(t, "data", filepath.Join(ws, "dir-link"))
	for _, p := range []string{"three", "sub/two", "dir-link/real.txt", "dir-link/one"} {
		r := workspaceread.Read(ws, p, 4096)
		if r.Outcome != siteprotocol.OutcomeSucceeded {
			t.Fatalf("Read(%q) = %+v, want the file", p, r)
		}
		if got := roundTrip(t, r, 4096); string(got) != "the real bytes\n" || r.Truncated {
			t.Fatalf("Read(%q) = %q (truncated %v)", p, got, r.Truncated)
		}
	}
}

// Directories, FIFOs (without blocking), sockets, missing files, loops
// and paths through a file are refused.
func TestNonRegularFilesAreRejected(t *testing.T) {
	ws, _ := workspace(t)
	write(t, filepath.Join(ws, "file"), []byte("x"))
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	link(t, "fifo", filepath.Join(ws, "fifo-link"))
	link(t, "loop-b", filepath.Join(ws, "loop-a"))
	link(t, "loop-a", filepath.Join(ws, "loop-b"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustRefuse(t, ws, "dir", "is a directory")
		mustRefuse(t, ws, "fifo", "is a FIFO")
		mustRefuse(t, ws, "fifo-link", "is a FIFO")
		mustRefuse(t, ws, "missing.txt", "does not exist")
		mustRefuse(t, ws, "loop-a", "symbolic links")
		mustRefuse(t, ws, "file/below", "not a directory")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Read blocked (on the FIFO?)")
	}
}

// A file longer than max_bytes answers exactly its first max_bytes bytes,
// truncated; one of exactly max_bytes is whole.
func TestLongFilesAreTruncatedToTheirFirstBytes(t *testing.T) {
	ws, _ := workspace(t)
	big := make([]byte, 2<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	write(t, filepath.Join(ws, "big.bin"), big)
	r := workspaceread.Read(ws, "big.bin", siteprotocol.MaxReadBytes)
	got := roundTrip(t, r, siteprotocol.MaxReadBytes)
	if !r.Truncated || !bytes.Equal(got, big[:siteprotocol.MaxReadBytes]) {
		t.Fatalf("read %d bytes truncated %v, want the first %d bytes truncated", len(got), r.Truncated, siteprotocol.MaxReadBytes)
	}
	if len(r.Encode()) > domain.MaxFileReadLineBytes {
		t.Fatalf("the line of a full read is %d bytes, over the bound %d", len(r.Encode()), domain.MaxFileReadLineBytes)
	}
	r = workspaceread.Read(ws, "big.bin", 10)
	if got := roundTrip(t, r, 10); !r.Truncated || !bytes.Equal(got, big[:10]) {
		t.Fatalf("read %x truncated %v", got, r.Truncated)
	}
	write(t, filepath.Join(ws, "ten"), big[:10])
	r = workspaceread.Read(ws, "ten", 10)
	if got := roundTrip(t, r, 10); r.Truncated || !bytes.Equal(got, big[:10]) {
		t.Fatalf("read %x truncated %v, want the whole 10 bytes", got, r.Truncated)
	}
	write(t, filepath.Join(ws, "empty"), nil)
	r = workspaceread.Read(ws, "empty", 10)
	if got := roundTrip(t, r, 10); r.Truncated || len(got) != 0 || r.Outcome != siteprotocol.OutcomeSucceeded {
		t.Fatalf("an empty file read %+v", r)
	}
}

// Binary content and invalid UTF-8 come back byte for byte.
func TestBinaryContentIsExact(t *testing.T) {
	ws, _ := workspace(t)
	content := []byte{0x00, 0xff, 0xfe, 0xc3, 0x28, '\n', '\r', 0x1b, '[', '3', '1', 'm', 0xed, 0xa0, 0x80, '"', '<', '\\'}
	write(t, filepath.Join(ws, "bin"), content)
	r := workspaceread.Read(ws, "bin", 4096)
	if got := roundTrip(t, r, 4096); !bytes.Equal(got, content) || r.Truncated {
		t.Fatalf("read %x, want %x", got, content)
	}
	if r.ContentBase64 != base64.StdEncoding.EncodeToString(content) {
		t.Fatalf("content_base64 %s", r.ContentBase64)
	}
}

// A file the reader may not read, and a workspace that is not there, are
// native-error, not a refusal of the path.
func TestUnreadableFilesFailNativeError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: mode 0 does not stop root; only the missing workspace is checked")
	} else {
		ws, _ := workspace(t)
		write(t, filepath.Join(ws, "private"), []byte("x"))
		if err := os.Chmod(filepath.Join(ws, "private"), 0); err != nil {
			t.Fatal(err)
		}
		if r := workspaceread.Read(ws, "private", 10); r.Outcome != siteprotocol.OutcomeFailed || r.Reason != siteprotocol.ReasonNativeError {
			t.Fatalf("an unreadable file: %+v", r)
		}
	}
	if r := workspaceread.Read(filepath.Join(t.TempDir(), "none"), "x", 10); r.Outcome != siteprotocol.OutcomeFailed || r.Reason != siteprotocol.ReasonNativeError {
		t.Fatalf("a missing workspace: %+v", r)
	}
	if r := workspaceread.Read(t.TempDir(), "x", 0); r.Outcome != siteprotocol.OutcomeFailed {
		t.Fatalf("max-bytes 0: %+v", r)
	}
}
