package application

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// CheckReport is what `metallo runtime check` found.
type CheckReport struct {
	State siteprotocol.StreamState
	// Next is the first command after the acknowledged sequence, verified
	// (digest and envelope); nil when the stream has none.
	Next *siteprotocol.Command
}

// Checker proves identity and authorisation against the Site API with
// read-only calls: the stream state, then one read-only pull (wait=0,
// bind=false: SiteReader.Peek). It never binds the stream and never sends
// a result, so a check (from a workstation, or before the Runtime's first
// start) cannot bind the stream to an installation. Connection failures
// (ErrTransient) are retried for up to RetryFor — a new Pod's network may
// be admitted seconds after start — then reported with the last cause; a
// problem answer fails at once.
type Checker struct {
	site        SiteReader
	environment string
	authority   string
	retryFor    time.Duration
	clock       Clock
}

// NewChecker returns a checker for the configured binding.
func NewChecker(site SiteReader, environment, authority string, retryFor time.Duration, clock Clock) *Checker {
	return &Checker{site: site, environment: environment, authority: authority, retryFor: retryFor, clock: clock}
}

// Check runs the check. It fails when the server's stream names another
// environment or authority, when the pulled command fails verification,
// on any problem answer (installation-mismatch when the stream is bound to
// another installation), on an oversized answer, and when the Site API
// stays unreachable for RetryFor.
func (c *Checker) Check(ctx context.Context) (CheckReport, error) {
	deadline := c.clock.Now().Add(c.retryFor)
	st, err := retryUntil(ctx, c.clock, deadline, func() (siteprotocol.StreamState, error) { return c.site.StreamState(ctx) })
	if err != nil {
		return CheckReport{}, fmt.Errorf("read stream %s: %w", c.environment, err)
	}
	rep := CheckReport{State: st}
	if st.Environment != c.environment || !sameAuthority(st.Authority, c.authority) {
		return rep, fmt.Errorf("the server's stream is environment %q at %s; configured is environment %q at %s", st.Environment, st.Authority, c.environment, c.authority)
	}
	pull, err := retryUntil(ctx, c.clock, deadline, func() (siteprotocol.Pull, error) {
		return c.site.Peek(ctx, st.AcknowledgedSequence, 1)
	})
	if err != nil {
		return rep, fmt.Errorf("pull stream %s: %w", c.environment, err)
	}
	if len(pull.Commands) > 0 {
		cmd, err := siteprotocol.ParsePulled(pull.Commands[0])
		if err != nil {
			return rep, fmt.Errorf("command after %d: %w", st.AcknowledgedSequence, err)
		}
		rep.Next = &cmd
	}
	return rep, nil
}

func retryUntil[T any](ctx context.Context, clock Clock, deadline time.Time, f func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := f()
		if err == nil || !errors.Is(err, ErrTransient) || !clock.Now().Before(deadline) {
			return v, err
		}
		t := time.NewTimer(min(backoff(200*time.Millisecond, 5*time.Second, attempt), max(deadline.Sub(clock.Now()), time.Millisecond)))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
	}
}
