// Package heartbeat is the worker's liveness signal as a file (the
// Heartbeat port) and its reading by `metallo runtime liveness`, which
// runs as a separate process (docs/site-runtime.md#liveness-and-check).
//
// The file holds one JSON object: {"beat_at": RFC 3339 UTC} while the
// worker runs, plus "stopped" (the stop reason) and "cause" once it has
// stopped. It is replaced atomically (write, then rename), so a reader
// never sees a partial file.
package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/ijson"
)

// Record is the heartbeat file's content.
type Record struct {
	BeatAt  time.Time         `json:"beat_at"`
	Stopped domain.StopReason `json:"stopped,omitempty"`
	Cause   string            `json:"cause,omitempty"`
}

// File writes the heartbeat file.
type File struct {
	path     string
	clock    application.Clock
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	stopped bool
}

// NewFile returns the heartbeat at path. Beats closer together than
// interval (one second when 0) write nothing, bounding the file's cost
// per command; set the liveness bound well above interval.
func NewFile(path string, clock application.Clock, interval time.Duration) *File {
	if interval <= 0 {
		interval = time.Second
	}
	return &File{path: path, clock: clock, interval: interval}
}

// Beat records a beat unless one was attempted within the interval or the
// worker has stopped. It returns the write's error; a failed beat is tried
// again after the interval, so an unwritable file costs (and reports) one
// failure per interval, not one per step.
func (f *File) Beat(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	if f.stopped || (!f.last.IsZero() && now.Sub(f.last) < f.interval) {
		return nil
	}
	f.last = now
	return write(f.path, Record{BeatAt: now.UTC()})
}

// Stopped records the stop; Beat writes nothing afterwards.
func (f *File) Stopped(_ context.Context, reason domain.StopReason, cause string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	return write(f.path, Record{BeatAt: f.clock.Now().UTC(), Stopped: reason, Cause: cause})
}

func write(path string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode heartbeat: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write heartbeat: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write heartbeat: %w", err)
	}
	return nil
}

// Errors of Check.
var (
	ErrMissing = errors.New("heartbeat file missing")
	ErrGarbled = errors.New("heartbeat file unreadable or garbled")
	ErrStale   = errors.New("heartbeat older than the liveness bound")
	ErrStopped = errors.New("runtime worker stopped")
	ErrFuture  = errors.New("heartbeat dated in the future")
)

// MaxSkew is how far in the future a beat may be dated and still count:
// the worker and the liveness probe read clocks of the same host (usually
// the same Pod), so anything beyond a few seconds is a wrong clock or a
// file written by something else.
const MaxSkew = 5 * time.Second

// Check reads the heartbeat at path and fails when it is missing
// (ErrMissing), unreadable or not a heartbeat record (ErrGarbled), records
// a stopped worker (ErrStopped, with the reason), is older than bound at now (ErrStale), or is dated more than
// MaxSkew after now (ErrFuture: such a beat proves nothing about the
// worker). bound must be positive.
func Check(path string, bound time.Duration, now time.Time) (Record, error) {
	if bound <= 0 {
		return Record{}, fmt.Errorf("liveness bound %s: must be positive", bound)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, fmt.Errorf("%w: %s", ErrMissing, path)
	}
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrGarbled, err)
	}
	r, err := decode(b)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %s does not hold a heartbeat record (%v): is --heartbeat-file the worker's?", ErrGarbled, path, err)
	}
	if r.BeatAt.IsZero() {
		return Record{}, fmt.Errorf("%w: %s holds no beat_at time: is --heartbeat-file the worker's?", ErrGarbled, path)
	}
	if r.Stopped != "" {
		return r, fmt.Errorf("%w (%s) at %s: %s", ErrStopped, r.Stopped, r.BeatAt.Format(time.RFC3339), r.Cause)
	}
	if ahead := r.BeatAt.Sub(now); ahead > MaxSkew {
		return r, fmt.Errorf("%w: beat at %s is %s ahead of this clock (%s; tolerance %s): the clock that wrote it or the file is wrong",
			ErrFuture, r.BeatAt.Format(time.RFC3339Nano), ahead.Round(time.Millisecond), now.UTC().Format(time.RFC3339Nano), MaxSkew)
	}
	if age := now.Sub(r.BeatAt); age > bound {
		return r, fmt.Errorf("%w: last beat %s ago (bound %s)", ErrStale, age.Round(time.Millisecond), bound)
	}
	return r, nil
}

// decode reads a heartbeat record strictly: one I-JSON value (valid UTF-8,
// no duplicate member, no null, nothing after it; platform/ijson) whose
// members are all Record's (an unknown member is refused).
func decode(b []byte) (Record, error) {
	var r Record
	if _, err := ijson.Check(b, ijson.Options{RefuseControl: true}); err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, err
	}
	return r, nil
}

var _ application.Heartbeat = (*File)(nil)
