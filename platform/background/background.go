// Package background runs a process-lifetime goroutine under an Fx
// lifecycle: started by the application's start, cancelled and awaited by
// its stop (docs/architecture.md#how-a-process-is-composed).
package background

import (
	"context"
	"fmt"

	"go.uber.org/fx"
)

// Run appends a hook to lc that starts run in its own goroutine when the
// application starts, with a context that is cancelled when it stops; the
// stop then waits for run to return. run must return once its context is
// cancelled. The stop fails with an error naming what (e.g. "stream
// listener") and wrapping the stop context's error when run has not
// returned by the stop deadline (Fx's StopTimeout); nothing else fails.
func Run(lc fx.Lifecycle, what string, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go func() {
				defer close(done)
				run(ctx)
			}()
			return nil
		},
		OnStop: func(stop context.Context) error {
			cancel()
			select {
			case <-done:
				return nil
			case <-stop.Done():
				return fmt.Errorf("stop %s: %w", what, stop.Err())
			}
		},
	})
}
