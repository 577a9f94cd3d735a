// Package reload holds a configuration file of a serving process
// (keys.yaml, environments.yaml) in memory and replaces it, whole and
// atomically, when the file changes on disk, without a restart
// (docs/operations.md#configuration-reloads).
//
// A File watches the file's directory (fsnotify), not only the file: a
// Kubernetes ConfigMap or Secret volume updates its files by swapping the
// directory's ..data symlink, which changes no watched file. It also
// re-reads the file every poll interval, for file systems without events.
// A version is applied only when it reads, parses and is accepted by every
// user of the file (Use); otherwise it is refused whole and the previous
// version stays in use. Each outcome is logged and counted in
// metallo_config_reloads_total{file,outcome}; the gauge
// metallo_config_last_reload_successful{file} is 0 while the file on disk
// is refused.
package reload

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Outcomes of a reload (the outcome label of metallo_config_reloads_total).
const (
	// Applied: the new version is in use.
	Applied = "applied"
	// Refused: the new version did not read, parse or validate; the
	// previous one stays in use.
	Refused = "refused"
	// Unchanged: the file holds the bytes last read; nothing happened
	// (neither logged nor counted).
	Unchanged = "unchanged"
)

// DefaultPoll is how often a watched file is re-read without an event.
const DefaultPoll = 10 * time.Second

// settle is how long the watch waits after the first event of a burst
// before it reads the file, so a file written in several steps is read
// once, whole; events during the wait do not postpone the read (a
// directory that never rests is still read).
const settle = 200 * time.Millisecond

// Options name a watched file.
type Options struct {
	// Name is the file's label in metrics and logs, e.g. "keys" or
	// "environments".
	Name string
	// Flag is the flag that names the file, e.g. "keys-file"; errors at
	// start name it.
	Flag string
	// Path is the file.
	Path string
	// Log receives one line per applied or refused version.
	Log *zap.Logger
	// Registerer gets the file's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Poll is the re-read interval without events (0: DefaultPoll).
	Poll time.Duration
}

// Prepare derives a user's state from a parsed version next. It returns
// the commit that puts the state in use, called only once every user has
// accepted next, or an error that refuses next whole.
type Prepare[T any] func(next T) (commit func(), err error)

// LogFielder is implemented by a version that describes itself in the
// reload's log line (e.g. how many keys it holds).
type LogFielder interface {
	LogFields() []zap.Field
}

// File is a configuration file's version in use, replaced when the file
// changes. It is safe for concurrent use.
type File[T any] struct {
	opts  Options
	parse func(raw []byte) (T, error)
	cur   atomic.Pointer[T]

	reloads *prometheus.CounterVec
	ok      prometheus.Gauge

	mu    sync.Mutex // serialises reads, Use and swaps
	seen  [sha256.Size]byte
	users []Prepare[T]
}

// Load reads and parses the file at o.Path (the version in use until it
// changes) and registers its metrics. Its error names o.Flag.
func Load[T any](o Options, parse func(raw []byte) (T, error)) (*File[T], error) {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	f := &File[T]{opts: o, parse: parse}
	raw, err := os.ReadFile(o.Path)
	if err != nil {
		return nil, fmt.Errorf("--%s: read %s file: %w", o.Flag, o.Name, err)
	}
	v, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--%s: %s file %s: %w", o.Flag, o.Name, o.Path, err)
	}
	f.cur.Store(&v)
	f.seen = sha256.Sum256(raw)
	if err := f.register(o.Registerer); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File[T]) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"file": f.opts.Name}, reg)
	f.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metallo_config_reloads_total",
		Help: "Changed versions of a configuration file read by a running process, by outcome: applied (in use) or refused (did not read, parse or validate; the previous version stays in use).",
	}, []string{"outcome"})
	f.ok = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "metallo_config_last_reload_successful",
		Help: "1 when the configuration file's last version read is the one in use, 0 while it is refused and an older version is served.",
	})
	for _, c := range []prometheus.Collector{f.reloads, f.ok} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the metrics of the %s file: %w", f.opts.Name, err)
		}
	}
	f.reloads.WithLabelValues(Applied)
	f.reloads.WithLabelValues(Refused)
	f.ok.Set(1)
	return nil
}

// Current returns the version in use.
func (f *File[T]) Current() T { return *f.cur.Load() }

// Use adds a user of the file: prepare derives its state from the version
// in use now (its error is returned, and the user is not added) and from
// every version read later, which it can refuse.
func (f *File[T]) Use(prepare Prepare[T]) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	commit, err := prepare(f.Current())
	if err != nil {
		return fmt.Errorf("--%s: %s file %s: %w", f.opts.Flag, f.opts.Name, f.opts.Path, err)
	}
	commit()
	f.users = append(f.users, prepare)
	return nil
}

// Reload reads the file now and returns the outcome: Unchanged when it
// holds the bytes last read (applied or refused), Applied when the new
// version parsed, every user accepted it and it is in use, Refused
// otherwise (the previous version stays in use). Applied and Refused are
// logged and counted.
func (f *File[T]) Reload() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	raw, err := os.ReadFile(f.opts.Path)
	var digest [sha256.Size]byte
	if err != nil {
		// An unreadable file is one version: logged once until it changes.
		digest = sha256.Sum256([]byte("\x00read error: " + err.Error()))
	} else {
		digest = sha256.Sum256(raw)
	}
	if digest == f.seen {
		return Unchanged
	}
	f.seen = digest
	if err != nil {
		return f.refuse(fmt.Errorf("read: %w", err))
	}
	next, err := f.parse(raw)
	if err != nil {
		return f.refuse(err)
	}
	commits := make([]func(), 0, len(f.users))
	for _, prepare := range f.users {
		c, err := prepare(next)
		if err != nil {
			return f.refuse(err)
		}
		commits = append(commits, c)
	}
	f.cur.Store(&next)
	for _, c := range commits {
		c()
	}
	fields := []zap.Field{zap.String("file", f.opts.Name), zap.String("path", f.opts.Path)}
	if d, ok := any(next).(LogFielder); ok {
		fields = append(fields, d.LogFields()...)
	}
	f.opts.Log.Info("configuration file reloaded; the new version is in use", fields...)
	if f.reloads != nil {
		f.reloads.WithLabelValues(Applied).Inc()
		f.ok.Set(1)
	}
	return Applied
}

func (f *File[T]) refuse(err error) string {
	f.opts.Log.Error("configuration file refused; the previous version stays in use",
		zap.String("file", f.opts.Name), zap.String("path", f.opts.Path), zap.Error(err))
	if f.reloads != nil {
		f.reloads.WithLabelValues(Refused).Inc()
		f.ok.Set(0)
	}
	return Refused
}

// Watch reloads the file after every change of its directory (read a
// moment after the change's first event, so a file written in steps is
// read once) and every poll interval, until ctx ends. A directory that
// cannot be watched is logged and the file is polled only.
func (f *File[T]) Watch(ctx context.Context) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(filepath.Dir(f.opts.Path)); err != nil {
			_ = w.Close()
		} else {
			defer func() { _ = w.Close() }()
			events, errs = w.Events, w.Errors
			f.opts.Log.Debug("watching the configuration file's directory", zap.String("file", f.opts.Name), zap.String("path", f.opts.Path))
		}
	}
	if err != nil {
		f.opts.Log.Warn("the configuration file's directory cannot be watched; it is re-read every poll interval only",
			zap.String("file", f.opts.Name), zap.String("path", f.opts.Path), zap.Duration("poll", f.opts.Poll), zap.Error(err))
	}
	poll := time.NewTicker(f.opts.Poll)
	defer poll.Stop()
	wait := time.NewTimer(settle)
	wait.Stop()
	defer wait.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if !waiting {
				wait.Reset(settle)
				waiting = true
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			f.opts.Log.Warn("watching the configuration file's directory failed; it is still re-read every poll interval",
				zap.String("file", f.opts.Name), zap.String("path", f.opts.Path), zap.Error(err))
		case <-wait.C:
			waiting = false
			f.Reload()
		case <-poll.C:
			f.Reload()
		}
	}
}
