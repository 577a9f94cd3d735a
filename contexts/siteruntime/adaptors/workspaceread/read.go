// Package workspaceread is `metallo workspace-read`, the read of one
// workspace file that runs in an Attempt's workspace reader Pod with the
// workspace claim mounted read-only
// (docs/site-runtime.md#workspace-read-metallo-workspace-read).
package workspaceread

import (
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// errPathEscapes is the text of os.Root's error for a path (or a
// symbolic link on its way) that leaves the root; os does not export it,
// and a test pins it (TestEscapingLinksAreRejected).
const errPathEscapes = "path escapes from parent"

// Read reads the first maxBytes bytes (1 to siteprotocol.MaxReadBytes) of
// the file path names inside the directory root, and returns the reader's
// line (domain.FileRead):
//
//   - path must be a clean relative path (siteprotocol.SafeRelativePath:
//     not absolute, no "..", no empty name); otherwise path-rejected;
//   - it is resolved with os.Root: symbolic links are followed inside
//     root only, and a link with an absolute target or one that climbs
//     above root is refused path-rejected (the reader never follows a link
//     onto the node's or the Pod's own file system);
//   - it must name a regular file: a directory, a FIFO, a socket or a
//     device is path-rejected, checked by stat before anything is opened
//     and again by fstat on the open file (opened O_NONBLOCK, so a FIFO
//     swapped in between never blocks the read); a missing file is
//     path-rejected too;
//   - maxBytes+1 bytes are read at most: the content is the first
//     maxBytes, truncated when there was more.
//
// A file the reader may not read (permissions), an I/O error or a root
// that cannot be opened is native-error.
func Read(root, path string, maxBytes int64) domain.FileRead {
	if maxBytes < 1 || maxBytes > siteprotocol.MaxReadBytes {
		return domain.FileReadFailed("max-bytes %d is not between 1 and %d", maxBytes, siteprotocol.MaxReadBytes)
	}
	if !siteprotocol.SafeRelativePath(path) {
		return domain.FileReadRefused("%q is not a clean relative path inside the workspace (absolute, .., or an empty name)", path)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return domain.FileReadFailed("the workspace %s cannot be opened: %v", root, err)
	}
	defer func() { _ = r.Close() }()
	fi, err := r.Stat(path)
	if err != nil {
		return classify(path, err)
	}
	if !fi.Mode().IsRegular() {
		return notRegular(path, fi.Mode())
	}
	f, err := r.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return classify(path, err)
	}
	defer func() { _ = f.Close() }()
	fi, err = f.Stat()
	if err != nil {
		return domain.FileReadFailed("fstat %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return notRegular(path, fi.Mode())
	}
	buf, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return domain.FileReadFailed("read %s: %v", path, err)
	}
	out := domain.FileRead{Outcome: siteprotocol.OutcomeSucceeded}
	if int64(len(buf)) > maxBytes {
		buf, out.Truncated = buf[:maxBytes], true
	}
	out.ContentBase64, out.Bytes = base64.StdEncoding.EncodeToString(buf), int64(len(buf))
	return out
}

// classify is the reader's answer to an error of resolving or opening
// path: path-rejected when the path leaves the workspace, names nothing,
// loops or passes through a non-directory; native-error when the file may
// not be read or the file system failed.
func classify(path string, err error) domain.FileRead {
	var pe *fs.PathError
	inner := err
	if errors.As(err, &pe) {
		inner = pe.Err
	}
	switch {
	case inner != nil && inner.Error() == errPathEscapes:
		return domain.FileReadRefused("%s leaves the workspace (a symbolic link on its way has an absolute target or climbs above the workspace)", path)
	case errors.Is(err, fs.ErrNotExist):
		return domain.FileReadRefused("%s does not exist in the workspace", path)
	case errors.Is(err, syscall.ELOOP):
		return domain.FileReadRefused("%s: too many levels of symbolic links", path)
	case errors.Is(err, syscall.ENOTDIR):
		return domain.FileReadRefused("%s passes through a file that is not a directory", path)
	case errors.Is(err, fs.ErrPermission):
		return domain.FileReadFailed("%s may not be read by the workspace reader: %v", path, inner)
	}
	return domain.FileReadFailed("%s cannot be read: %v", path, err)
}

func notRegular(path string, mode fs.FileMode) domain.FileRead {
	what := "a special file"
	switch {
	case mode.IsDir():
		what = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		what = "a FIFO"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	}
	return domain.FileReadRefused("%s is %s, not a regular file", path, what)
}
