// Package observe reports what the ordered worker does (the Events port)
// as zap log lines and Prometheus metrics on the admin listener:
//
//	metallo_runtime_stopped{reason}            1 once the worker stopped for reason, else 0
//	metallo_runtime_acknowledged_sequence      the local checkpoint
//	metallo_runtime_results_total{outcome,path} exactly acknowledged results (path: executed, recovered, replayed)
//	metallo_runtime_retries_total{step}        transient failures retried, by step
//	metallo_runtime_heartbeat_failures_total   heartbeats that could not be recorded
//	metallo_runtime_journal_commits_total      durable journal commits (all three files)
//	metallo_runtime_heap_live_bytes            Go heap marked live by the last GC
package observe

import (
	"runtime/metrics"
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
	log     *zap.Logger
	beatLog *zap.Logger
	stopped *prometheus.GaugeVec
	acked   prometheus.Gauge
	results *prometheus.CounterVec
	retries *prometheus.CounterVec
	beats   prometheus.Counter
}

// New registers the worker's metrics on reg. commits reads the journal's
// durable commit count (nil leaves the series out).
func New(log *zap.Logger, reg prometheus.Registerer, commits func() int64) (*Events, error) {
	e := &Events{
		log: log,
		// zap's sampler keeps the first heartbeat failure of each interval
		// and drops the rest (the counter has them all).
		beatLog: log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, HeartbeatLogInterval, 1, 0)
		})),
		stopped: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "metallo_runtime_stopped",
			Help: "1 when the Runtime's ordered worker has stopped for this reason (the process stays up; liveness fails)."}, []string{"reason"}),
		acked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "metallo_runtime_acknowledged_sequence",
			Help: "The local checkpoint: the last sequence whose exact result the server acknowledged."}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metallo_runtime_results_total",
			Help: "Exactly acknowledged results, by outcome and path (executed, recovered, replayed)."}, []string{"outcome", "path"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "metallo_runtime_retries_total",
			Help: "Transient failures retried with backoff, by step."}, []string{"step"}),
		beats: prometheus.NewCounter(prometheus.CounterOpts{Name: "metallo_runtime_heartbeat_failures_total",
			Help: "Heartbeats the worker could not record (the heartbeat file is not writable); liveness fails once none lands within its bound."}),
	}
	cs := []prometheus.Collector{e.stopped, e.acked, e.results, e.retries, e.beats,
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
	return e, nil
}

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
	fields := []zap.Field{zap.String("environment", cp.Binding.Environment), zap.String("authority", cp.Binding.Authority),
		zap.String("installation", cp.Binding.InstallationID), zap.Int64("checkpoint", cp.Acknowledged)}
	if cp.Pending != nil {
		fields = append(fields, zap.Int64("pending", cp.Pending.Sequence), zap.Bool("pending_result_saved", cp.Pending.HasResult()))
	}
	e.log.Info("runtime worker started", fields...)
}

// Stopped logs the stop reason and sets metallo_runtime_stopped{reason}.
func (e *Events) Stopped(s *domain.StopError) {
	e.log.Error("runtime worker stopped; the process stays up and liveness fails", zap.String("reason", string(s.Reason)), zap.Error(s.Err))
	e.stopped.WithLabelValues(string(s.Reason)).Set(1)
}

// Retrying logs a transient failure and counts it.
func (e *Events) Retrying(step string, err error, wait time.Duration) {
	e.retries.WithLabelValues(step).Inc()
	e.log.Warn("transient failure; retrying", zap.String("step", step), zap.Duration("wait", wait), zap.Error(err))
}

// Delivered counts an acknowledged result.
func (e *Events) Delivered(seq int64, outcome siteprotocol.Outcome, replayed, recovered bool) {
	path := "executed"
	switch {
	case replayed:
		path = "replayed"
	case recovered:
		path = "recovered"
	}
	e.acked.Set(float64(seq))
	e.results.WithLabelValues(string(outcome), path).Inc()
	if path != "executed" {
		e.log.Info("result delivered", zap.Int64("sequence", seq), zap.String("outcome", string(outcome)), zap.String("path", path))
	}
}

// HeartbeatFailed counts a failed heartbeat and logs it, at most once per
// HeartbeatLogInterval.
func (e *Events) HeartbeatFailed(err error) {
	e.beats.Inc()
	e.beatLog.Warn("heartbeat not recorded; liveness fails unless a later beat lands (logged at most once per interval, all counted in metallo_runtime_heartbeat_failures_total)",
		zap.Duration("interval", HeartbeatLogInterval), zap.Error(err))
}

var _ application.Events = (*Events)(nil)
