package application

import "sync"

// Wakeups is the in-process broadcast that wakes long-polling pulls when a
// stream grows. Streams.Append notifies it after each append; a store that
// learns of appends made by other processes (PostgreSQL LISTEN/NOTIFY)
// notifies it too. It holds one channel per environment that someone waits
// on; Notify closes it, waking every waiter. The zero value is not usable;
// use NewWakeups.
type Wakeups struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
	stopped chan struct{}
	stop    sync.Once
}

// NewWakeups returns an empty broadcast.
func NewWakeups() *Wakeups {
	return &Wakeups{waiting: map[string]chan struct{}{}, stopped: make(chan struct{})}
}

// Stop ends every wait for good: the process is shutting down, and waiting
// pulls answer at once with what they have so the HTTP server can stop.
func (w *Wakeups) Stop() { w.stop.Do(func() { close(w.stopped) }) }

// Stopped is closed by Stop.
func (w *Wakeups) Stopped() <-chan struct{} { return w.stopped }

// Watch returns a channel closed at the next Notify(environment) or
// NotifyAll. Take it BEFORE reading the stream so no append is missed.
func (w *Wakeups) Watch(environment string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.waiting[environment]
	if !ok {
		ch = make(chan struct{})
		w.waiting[environment] = ch
	}
	return ch
}

// Notify wakes every waiter on environment.
func (w *Wakeups) Notify(environment string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiting[environment]; ok {
		close(ch)
		delete(w.waiting, environment)
	}
}

// NotifyAll wakes every waiter (after a lost notification connection, when
// appends may have been missed).
func (w *Wakeups) NotifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for env, ch := range w.waiting {
		close(ch)
		delete(w.waiting, env)
	}
}
