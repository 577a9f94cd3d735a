package journal

import (
	"errors"
	"fmt"
	"os"

	"github.com/gofrs/flock"
)

// ErrLocked is returned when another process holds the journal directory's
// lock.
var ErrLocked = errors.New("journal directory is locked by another Runtime")

// lockDir takes the exclusive flock on the directory dir itself (opened
// read-only, so the directory's contents are untouched). It fails fast with
// ErrLocked when another process — or another Journal in this process —
// holds it.
func lockDir(dir string) (*flock.Flock, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("journal directory %s is not a directory", dir)
	}
	l := flock.New(dir, flock.SetFlag(os.O_RDONLY))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock journal directory %s: %w", dir, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: the exclusive lock (flock) on %s is held; one Runtime per journal volume", ErrLocked, dir)
	}
	return l, nil
}
