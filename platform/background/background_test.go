package background_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx/fxtest"

	"github.com/pharos-metallo/metallo/platform/background"
)

// The goroutine starts with the application, its context ends with the
// stop, and the stop waits for it to return.
func TestRunStartsWithTheApplicationAndTheStopWaitsForIt(t *testing.T) {
	lc := fxtest.NewLifecycle(t)
	started, returned := make(chan struct{}), make(chan struct{})
	background.Run(lc, "the test loop", func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(returned)
	})
	select {
	case <-started:
		t.Fatal("run started before the application")
	default:
	}
	lc.RequireStart()
	<-started
	lc.RequireStop()
	select {
	case <-returned:
	default:
		t.Fatal("the stop returned before run did")
	}
}

// A goroutine that ignores its cancelled context fails the stop at the
// stop deadline, naming it.
func TestAStopPastItsDeadlineNamesWhatDidNotReturn(t *testing.T) {
	lc := fxtest.NewLifecycle(t)
	release := make(chan struct{})
	defer close(release)
	background.Run(lc, "the stuck loop", func(context.Context) { <-release })
	if err := lc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := lc.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the stuck loop") {
		t.Fatalf("stop: %v; want the deadline, naming the stuck loop", err)
	}
}
