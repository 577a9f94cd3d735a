package application

import (
	"cmp"
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
	// backend is the Runtime's backend (ForBackend; kubernetes by default).
	backend siteprotocol.Backend
}

// NewChecker returns a checker for the configured binding.
func NewChecker(site SiteReader, environment, authority string, retryFor time.Duration, clock Clock) *Checker {
	return &Checker{site: site, environment: environment, authority: authority, retryFor: retryFor, clock: clock, backend: siteprotocol.BackendKubernetes}
}

// ForBackend returns the checker of a Runtime of backend b: the check
// fails when the server's stream belongs to an environment of another
// backend, as the worker would stop (backend-mismatch).
func (c *Checker) ForBackend(b siteprotocol.Backend) *Checker {
	out := *c
	out.backend = b
	return &out
}

// Check runs the check. It fails when the server's stream names another
// environment or authority or belongs to another backend, when the pulled command fails verification,
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
	if backend := cmp.Or(st.Backend, siteprotocol.BackendKubernetes); backend != c.backend {
		return rep, fmt.Errorf("the server's stream %s belongs to a %s environment; this Runtime is configured for --backend %s, and its worker would stop (%s)",
			c.environment, backend, c.backend, siteprotocol.StopBackendMismatch)
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
