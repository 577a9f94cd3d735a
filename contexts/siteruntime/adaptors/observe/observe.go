// Package observe reports what the ordered worker does (the Events port)
// as zap log lines and Prometheus metrics on the admin listener
// (docs/operations.md#metrics, docs/operations.md#logs):
//
//	metallo_runtime_stopped{reason}            1 once the worker stopped for reason, else 0
//	metallo_runtime_acknowledged_sequence      the local checkpoint
//	metallo_runtime_pending_sequence           the pending command's sequence, 0 when none
//	metallo_runtime_stream_head_sequence       the stream's head as the server last answered it
//	metallo_runtime_last_accepted_request_timestamp_seconds  Unix time of the last Site API request answered 200 (the start until one is)
//	metallo_runtime_credential_refused         1 while every Site API request is refused for its credential (401/403)
//	metallo_runtime_results_total{outcome,path} exactly acknowledged results (path: executed, recovered, replayed)
//	metallo_runtime_retries_total{step}        transient failures retried, by step (every step present from the start)
//	metallo_runtime_heartbeat_failures_total   heartbeats that could not be recorded
//	metallo_runtime_journal_commits_total      durable journal commits (all three files)
//	metallo_runtime_heap_live_bytes            Go heap marked live by the last GC
package observe

import (
	"runtime/metrics"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// HeartbeatLogInterval is the rate limit of the heartbeat failure log: the
// first failure in each interval is logged, the others only counted.
const HeartbeatLogInterval = time.Minute

// Events implements application.Events.
type Events struct {
	log      *zap.Logger
	beatLog  *zap.Logger
	clock    application.Clock
	stopped  *prometheus.GaugeVec
	acked    prometheus.Gauge
	pending  prometheus.Gauge
	head     prometheus.Gauge
	accepted prometheus.Gauge
	refused  prometheus.Gauge
	results  *prometheus.CounterVec
	retries  *prometheus.CounterVec
	beats    prometheus.Counter

	mu sync.Mutex
	// failingSince is when each step's current run of failures began.
	failingSince map[string]time.Time
	// refusedSince is when the current run of credential refusals began
	// (zero: none).
	refusedSince time.Time
}

// New registers the worker's metrics on reg; clock dates the accepted
// requests and the outages. commits reads the journal's durable commit
// count (nil leaves the series out).
func New(log *zap.Logger, reg prometheus.Registerer, clock application.Clock, commits func() int64) (*Events, error) {
	e := &Events{
		log:   log,
		clock: clock,
		// zap's sampler keeps the first heartbeat failure of each interval
		// and drops the rest (the counter has them all).
		beatLog: log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, HeartbeatLogInterval, 1, 0)
		})),
		stopped: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "metallo_runtime_stopped",
			Help: "1 when the Runtime's ordered worker has stopped for this reason (the process stays up; liveness fails)."}, []string{"reason"}),
		acked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metallo_runtime_acknowledged_sequence",
			Help: "The local checkpoint: the last sequence whose exact result the server acknowledged."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metallo_runtime_pending_sequence",
			Help: "The sequence of the command saved as pending and not yet acknowledged; 0 when none."}),
		head: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metallo_runtime_stream_head_sequence",
			Help: "The stream's head sequence (its last assigned command) as the Site API last answered it; 0 until it has."}),
		accepted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metallo_runtime_last_accepted_request_timestamp_seconds",
			Help: "Unix time, in seconds, of the last Site API request the server accepted (answered 200); the Runtime's start until one is."}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metallo_runtime_credential_refused",
			Help: "1 while every Site API request is refused for its credential (401 unauthenticated, 403 forbidden); liveness fails once that outlasts its bound."}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metallo_runtime_results_total",
			Help: "Exactly acknowledged results, by outcome and path (executed, recovered, replayed)."}, []string{"outcome", "path"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metallo_runtime_retries_total",
			Help: "Transient failures retried with backoff, by step."}, []string{"step"}),
		beats: prometheus.NewCounter(prometheus.CounterOpts{Name: "metallo_runtime_heartbeat_failures_total",
			Help: "Heartbeats the worker could not record (the heartbeat file is not writable); liveness fails once none lands within its bound."}),
		failingSince: map[string]time.Time{},
	}
	cs := []prometheus.Collector{e.stopped, e.acked, e.pending, e.head, e.accepted, e.refused, e.results, e.retries, e.beats,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "metallo_runtime_heap_live_bytes",
			Help: "Go heap bytes marked live by the last garbage collection (runtime/metrics /gc/heap/live:bytes)."}, heapLive),
	}
	if commits != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "metallo_runtime_journal_commits_total",
			Help: "Durable commits of the journal set (delivery, jobs and services files)."}, func() float64 { return float64(commits()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range domain.StopReasons() {
		e.stopped.WithLabelValues(string(r)).Set(0)
	}
	// Every step's series exists from the start, so rate() and increase()
	// see the first retry.
	for _, step := range application.RetrySteps() {
		e.retries.WithLabelValues(step)
	}
	e.accepted.Set(unixSeconds(clock.Now()))
	return e, nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func heapLive() float64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}

// Started logs the restored checkpoint.
func (e *Events) Started(cp domain.Checkpoint) {
	e.acked.Set(float64(cp.Acknowledged))
	e.pending.Set(float64(pendingSequence(cp)))
	e.log.Info("runtime worker started", checkpointFields(cp)...)
}

// ShutDown logs the checkpoint and pending command left for the next
// start.
func (e *Events) ShutDown(cp domain.Checkpoint) {
	e.log.Info("runtime worker shut down; the next start resumes here", checkpointFields(cp)...)
}

func checkpointFields(cp domain.Checkpoint) []zap.Field {
	fields := []zap.Field{zap.String("environment", cp.Binding.Environment), zap.String("authority", cp.Binding.Authority),
		zap.String("installation", cp.Binding.InstallationID), zap.Int64("checkpoint", cp.Acknowledged)}
	if cp.Pending != nil {
		fields = append(fields, zap.Int64("pending", cp.Pending.Sequence), zap.Bool("pending_result_saved", cp.Pending.HasResult()))
	}
	return fields
}

func pendingSequence(cp domain.Checkpoint) int64 {
	if cp.Pending == nil {
		return 0
	}
	return cp.Pending.Sequence
}

// Stopped logs the stop reason and sets metallo_runtime_stopped{reason}.
func (e *Events) Stopped(s *domain.StopError) {
	e.log.Error("runtime worker stopped; the process stays up and liveness fails", zap.String("reason", string(s.Reason)), zap.Error(s.Err))
	e.stopped.WithLabelValues(string(s.Reason)).Set(1)
}

// StopReported logs how the stop report to the Site API ended
// (docs/site-protocol.md#the-stop-report): recorded, or not (the stop
// stays in this log, the metric and liveness).
func (e *Events) StopReported(reason domain.StopReason, err error) {
	if err != nil {
		e.log.Warn("runtime stop not reported to the Site API; the log, metallo_runtime_stopped and liveness still say so", zap.String("reason", string(reason)), zap.Error(err))
		return
	}
	e.log.Info("runtime stop reported to the Site API", zap.String("reason", string(reason)))
}

// Retrying logs a transient failure and counts it: one line of one shape
// per failure (step, attempt, wait, error).
func (e *Events) Retrying(step string, attempt int, err error, wait time.Duration) {
	e.retries.WithLabelValues(step).Inc()
	e.mu.Lock()
	if _, ok := e.failingSince[step]; !ok || attempt <= 1 {
		e.failingSince[step] = e.clock.Now()
	}
	e.mu.Unlock()
	e.log.Warn("transient failure; retrying", zap.String("step", step), zap.Int("attempt", attempt), zap.Duration("wait", wait), zap.Error(err))
}

// RetryEnded logs the end of a step's run of failures, with how long it
// lasted.
func (e *Events) RetryEnded(step string, failures int) {
	e.mu.Lock()
	since, ok := e.failingSince[step]
	delete(e.failingSince, step)
	e.mu.Unlock()
	fields := []zap.Field{zap.String("step", step), zap.Int("failures", failures)}
	if ok {
		fields = append(fields, zap.Duration("outage", e.clock.Now().Sub(since)))
	}
	e.log.Info("transient failure ended; the step succeeded", fields...)
}

// SiteAnswered dates an accepted request and follows runs of credential
// refusals: the first refusal of a run and its end are logged once each.
func (e *Events) SiteAnswered(outcome application.SiteOutcome) {
	now := e.clock.Now()
	if outcome == application.SiteAccepted {
		e.accepted.Set(unixSeconds(now))
	}
	e.mu.Lock()
	since := e.refusedSince
	switch {
	case outcome == application.SiteRefused && since.IsZero():
		e.refusedSince = now
	case outcome != application.SiteRefused:
		e.refusedSince = time.Time{}
	}
	e.mu.Unlock()
	switch {
	case outcome == application.SiteRefused && since.IsZero():
		e.refused.Set(1)
		e.log.Warn("the Site API refuses the credential; retrying, and liveness fails once every request for the liveness bound is refused")
	case outcome != application.SiteRefused && !since.IsZero():
		e.refused.Set(0)
		e.log.Info("the Site API no longer refuses the credential", zap.String("outcome", string(outcome)), zap.Duration("refused_for", now.Sub(since)))
	}
}

// StreamHead sets metallo_runtime_stream_head_sequence.
func (e *Events) StreamHead(sequence int64) { e.head.Set(float64(sequence)) }

// Pending sets metallo_runtime_pending_sequence.
func (e *Events) Pending(sequence int64) { e.pending.Set(float64(sequence)) }

// Delivered counts an acknowledged result and logs it: one line per
// result, at debug for an executed one that succeeded (a busy stream
// delivers hundreds a second), at info for a recovered or replayed one and
// for one with a note (a start whose account was checked by name only,
// docs/site-protocol.md#the-accounts-uid-in-a-binding), the note in its
// "note" field, and at warn for a refused or failed command, with its
// Attempt and its message: each refused or failed command is logged once,
// when its result is acknowledged (docs/operations.md#logs).
func (e *Events) Delivered(d application.Delivery) {
	e.acked.Set(float64(d.Sequence))
	e.pending.Set(0)
	e.results.WithLabelValues(string(d.Outcome), string(d.Path)).Inc()
	failed := d.Outcome == siteprotocol.OutcomeRefused || d.Outcome == siteprotocol.OutcomeFailed
	level := zapcore.InfoLevel
	switch {
	case failed:
		level = zapcore.WarnLevel
	case d.Path == application.PathExecuted && d.Note == "":
		level = zapcore.DebugLevel
	}
	if ce := e.log.Check(level, "result delivered"); ce != nil {
		fields := []zap.Field{zap.Int64("sequence", d.Sequence), zap.String("command", d.CommandID), zap.String("operation", string(d.Operation))}
		if d.AttemptID != "" {
			fields = append(fields, zap.String("attempt", d.AttemptID))
		}
		fields = append(fields, zap.String("outcome", string(d.Outcome)), zap.String("reason", string(d.Reason)), zap.String("path", string(d.Path)))
		if failed {
			fields = append(fields, zap.String("message", d.Message))
		}
		if d.Note != "" {
			fields = append(fields, zap.String("note", d.Note))
		}
		ce.Write(fields...)
	}
}

// LongWait logs, once, a bounded wait of a command that has lasted the
// worker's LongWait: the command, what it waits for, since when and until
// when at most (docs/site-runtime.md#command-bounds).
func (e *Events) LongWait(w application.Work) {
	e.log.Info("a command waits", workFields(w)...)
}

// LongWaitEnded logs the end of a wait LongWait logged: how it ended and
// how long it lasted.
func (e *Events) LongWaitEnded(w application.Work, result string, waited time.Duration) {
	e.log.Info("the command's wait ended", append(workFields(w), zap.String("result", result), zap.Duration("waited", waited))...)
}

func workFields(w application.Work) []zap.Field {
	fields := []zap.Field{zap.Int64("sequence", w.Sequence), zap.String("command", w.CommandID), zap.String("operation", string(w.Operation))}
	if w.AttemptID != "" {
		fields = append(fields, zap.String("attempt", w.AttemptID))
	}
	if w.Wait != nil {
		fields = append(fields, zap.String("waiting_for", w.Wait.What), zap.Time("wait_since", w.Wait.Since), zap.Time("wait_until", w.Wait.Until))
	}
	return append(fields, zap.Time("ceiling", w.Until))
}

// HeartbeatFailed counts a failed heartbeat and logs it, at most once per
// HeartbeatLogInterval.
func (e *Events) HeartbeatFailed(err error) {
	e.beats.Inc()
	e.beatLog.Warn("heartbeat not recorded; liveness fails unless a later beat lands (logged at most once per interval, all counted in metallo_runtime_heartbeat_failures_total)",
		zap.Duration("interval", HeartbeatLogInterval), zap.Error(err))
}

var _ application.Events = (*Events)(nil)
