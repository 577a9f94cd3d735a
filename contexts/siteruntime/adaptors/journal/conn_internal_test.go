package journal

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// CloseFiles while a caller waits for a file whose connection was just
// discarded (a failed rollback) and whose first use would reconnect: both
// end (the caller with ErrClosed or its result), neither waits on the
// other.
func TestCloseFilesWhileACallerWaitsToReconnectADiscardedFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journals")
	s, err := OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Initialise(context.Background(), domain.Binding{Environment: "alpha-k8s", Authority: "https://site.example", InstallationID: "11111111-1111-4111-8111-111111111111"}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	j, err := Open(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	fl := j.files[domain.ServicesFile]
	fl.turn <- struct{}{} // a transaction whose rollback failed…
	fl.discard(fl.conn)

	read := make(chan error, 1)
	go func() { _, err := j.Services().Records(context.Background(), "a"); read <- err }()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- j.CloseFiles() }()
	time.Sleep(50 * time.Millisecond)
	<-fl.turn // …returns

	for range 2 {
		select {
		case err := <-read:
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("read: %v", err)
			}
		case err := <-closed:
			if err != nil {
				t.Fatalf("close: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("CloseFiles and a waiting caller are stuck on each other")
		}
	}
}
