// Package clock provides the process's source of time as an Fx module, so
// every rule that reads "now" (freshness, receipt times, deadlines) can be
// driven by an injected clock in tests.
//
// Contexts declare their own one-method Clock interface in their application
// layer (interfaces live where they are used); *System and *Manual satisfy it.
package clock

import (
	"sync"
	"time"

	"go.uber.org/fx"
)

// Clock reports the current time. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current instant. Callers store it in UTC.
	Now() time.Time
}

// System is the wall clock of the machine, in UTC.
type System struct{}

// Now returns time.Now() in UTC.
func (System) Now() time.Time { return time.Now().UTC() }

// Manual is a clock that moves only when told to. It exists for tests and
// benchmarks that must prove time-dependent rules (freshness bounds,
// ordering) without sleeping.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock reading start (converted to UTC).
func NewManual(start time.Time) *Manual { return &Manual{now: start.UTC()} }

// Now returns the clock's current reading.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (which may be negative in tests that
// prove out-of-order handling).
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
}

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t.UTC()
}

// Module provides the System clock as a Clock. Tests replace it with
// fx.Decorate.
func Module() fx.Option {
	return fx.Module("clock", fx.Provide(func() Clock { return System{} }))
}
