// Package heartbeat is the worker's liveness signal as a file (the
// Heartbeat port) and its reading by `metallo runtime liveness`, which
// runs as a separate process (docs/site-runtime.md#liveness-and-check).
//
// The file holds one JSON object: {"beat_at": RFC 3339 UTC} while the
// worker runs, plus "stopped" (the stop reason) and "cause" once it has
// stopped, "credential_refused_since" with "credential_refusal" while
// every Site API request since that time has been refused for its
// credential (docs/site-runtime.md#a-refused-credential), and "command"
// while the worker executes or recovers a command: the command, since when
// and until when at most (its operation's ceiling), and the bounded wait
// under way (docs/site-runtime.md#command-bounds). It is replaced
// atomically (write, then rename), so a reader never sees a partial file.
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
	// CredentialRefusedSince is when the Site API began refusing the
	// credential: the first refusal of an unbroken run, every request
	// since refused (absent when the last request was not refused).
	CredentialRefusedSince *time.Time `json:"credential_refused_since,omitempty"`
	// CredentialRefusal is the latest refusal, naming the credential.
	CredentialRefusal string `json:"credential_refusal,omitempty"`
	// Command is the command the worker executes or recovers (absent
	// between commands).
	Command *Command `json:"command,omitempty"`
}

// Command is the command a busy worker runs, as the heartbeat records it
// (application.Work).
type Command struct {
	Sequence  int64  `json:"sequence"`
	ID        string `json:"id"`
	Operation string `json:"operation"`
	AttemptID string `json:"attempt_id,omitempty"`
	// Since is when the worker began it; Until is when it is overdue:
	// Since plus its operation's ceiling (application.Bounds.Ceiling).
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Waiting names the bounded wait under way, WaitSince and WaitUntil
	// its start and its bound (absent when none).
	Waiting   string     `json:"waiting,omitempty"`
	WaitSince *time.Time `json:"wait_since,omitempty"`
	WaitUntil *time.Time `json:"wait_until,omitempty"`
}

// String names the command, its operation, its Attempt and its wait, for
// messages: "command 42 (proxy, attempt …; waiting since … for …)".
func (c *Command) String() string {
	s := fmt.Sprintf("command %d (%s", c.Sequence, c.Operation)
	if c.AttemptID != "" {
		s += ", attempt " + c.AttemptID
	}
	if c.Waiting != "" && c.WaitSince != nil && c.WaitUntil != nil {
		s += fmt.Sprintf("; waiting since %s, at most until %s, for %s", c.WaitSince.Format(time.RFC3339), c.WaitUntil.Format(time.RFC3339), c.Waiting)
	}
	return s + ")"
}

// commandOf is w as the file records it (nil for nil).
func commandOf(w *application.Work) *Command {
	if w == nil {
		return nil
	}
	c := &Command{Sequence: w.Sequence, ID: w.CommandID, Operation: string(w.Operation), AttemptID: w.AttemptID,
		Since: w.Since.UTC(), Until: w.Until.UTC()}
	if w.Wait != nil {
		since, until := w.Wait.Since.UTC(), w.Wait.Until.UTC()
		c.Waiting, c.WaitSince, c.WaitUntil = w.Wait.What, &since, &until
	}
	return c
}

// File writes the heartbeat file.
type File struct {
	path     string
	clock    application.Clock
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	stopped bool
	// refusedSince and refusal are the current run of credential
	// refusals (zero: none).
	refusedSince time.Time
	refusal      string
	// busy is the command the worker runs (nil: none); shown is the one
	// the file holds since the last write.
	busy, shown *Command
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
	return f.writeAt(now)
}

// writeAt writes the running worker's record at now; f.mu is held.
func (f *File) writeAt(now time.Time) error {
	f.last, f.shown = now, f.busy
	return write(f.path, f.record(now))
}

// Busy records the command the worker runs now, with its wait under way
// (nil: between commands), and beats (application.Heartbeat). A wait that
// begins, and the end of a command the file shows, are written at once;
// anything else at most once per interval, like a beat, so a busy stream of
// short commands costs no more writes than an idle one. After Stopped it
// records nothing.
func (f *File) Busy(_ context.Context, w *application.Work) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return nil
	}
	now, c := f.clock.Now(), commandOf(w)
	f.busy = c
	urgent := (c == nil && f.shown != nil) || (c != nil && c.Waiting != "" && !sameCommand(f.shown, c))
	if !urgent && !f.last.IsZero() && now.Sub(f.last) < f.interval {
		return nil
	}
	return f.writeAt(now)
}

// sameCommand reports whether a and b record the same command and wait.
func sameCommand(a, b *Command) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Sequence == b.Sequence && a.Since.Equal(b.Since) && a.Waiting == b.Waiting && equalTime(a.WaitSince, b.WaitSince)
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// record is the running worker's record at now; f.mu is held.
func (f *File) record(now time.Time) Record {
	r := Record{BeatAt: now.UTC(), Command: f.busy}
	if !f.refusedSince.IsZero() {
		since := f.refusedSince.UTC()
		r.CredentialRefusedSince, r.CredentialRefusal = &since, f.refusal
	}
	return r
}

// Refused records how the last Site API request ended for the credential
// (application.Heartbeat): a non-empty cause starts a run of refusals
// dated now, or updates the latest refusal of the current run; an empty
// cause ends the run. A run's start and end are written at once; an
// update waits for the next beat. After Stopped it records nothing.
func (f *File) Refused(_ context.Context, cause string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return nil
	}
	now := f.clock.Now()
	switch {
	case cause == "" && f.refusedSince.IsZero():
		return nil
	case cause == "":
		f.refusedSince, f.refusal = time.Time{}, ""
	case !f.refusedSince.IsZero():
		f.refusal = cause
		return nil
	default:
		f.refusedSince, f.refusal = now, cause
	}
	return f.writeAt(now)
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
	// ErrOverdue: the worker has run one command past its ceiling, the
	// longest its bounds allow (docs/site-runtime.md#command-bounds): it is
	// stuck.
	ErrOverdue = errors.New("the worker is stuck in a command beyond its bounds")
	ErrStopped = errors.New("runtime worker stopped")
	ErrFuture  = errors.New("heartbeat dated in the future")
	// ErrCredentialRefused: every Site API request for longer than the
	// liveness bound was refused for its credential.
	ErrCredentialRefused = errors.New("the Site API refuses the Runtime's credential")
)

// MaxSkew is how far in the future a beat may be dated and still count:
// the worker and the liveness probe read clocks of the same host (usually
// the same Pod), so anything beyond a few seconds is a wrong clock or a
// file written by something else.
const MaxSkew = 5 * time.Second

// Check reads the heartbeat at path and fails when it is missing
// (ErrMissing), unreadable or not a heartbeat record (ErrGarbled), records
// a stopped worker (ErrStopped, with the reason), is dated more than
// MaxSkew after now (ErrFuture: such a beat proves nothing about the
// worker), records a run of credential refusals that began more than bound
// before now (ErrCredentialRefused, naming the credential and the refusal;
// docs/site-runtime.md#a-refused-credential), records a command the
// worker has run past its ceiling (ErrOverdue, naming the command, its
// operation and its wait; docs/site-runtime.md#command-bounds), or is older
// than bound at now (ErrStale). bound must be positive.
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
	if since := r.CredentialRefusedSince; since != nil {
		if r.CredentialRefusal == "" || since.After(r.BeatAt) {
			return Record{}, fmt.Errorf("%w: %s records a credential refusal without its cause, or dated after its beat: is --heartbeat-file the worker's?", ErrGarbled, path)
		}
		if refused := now.Sub(*since); refused > bound {
			return r, fmt.Errorf("%w: every request since %s (%s, bound %s) was refused: %s; a restart re-mounts a projected token",
				ErrCredentialRefused, since.Format(time.RFC3339), refused.Round(time.Second), bound, r.CredentialRefusal)
		}
	}
	if c := r.Command; c != nil {
		if c.Sequence < 1 || c.Operation == "" || c.Since.IsZero() || c.Until.Before(c.Since) || (c.WaitSince == nil) != (c.WaitUntil == nil) ||
			(c.WaitSince == nil) != (c.Waiting == "") {
			return Record{}, fmt.Errorf("%w: %s records a command without its sequence, operation or times: is --heartbeat-file the worker's?", ErrGarbled, path)
		}
		if now.After(c.Until) {
			return r, fmt.Errorf("%w: %s has run since %s (%s), past its ceiling at %s", ErrOverdue, c, c.Since.Format(time.RFC3339),
				now.Sub(c.Since).Round(time.Second), c.Until.Format(time.RFC3339))
		}
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
