package httpserver

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are the public API's request metrics, one series per Huma
// operation (its operation ID, so the label set is bounded by the API, never
// by the paths callers send) and environment (docs/operations.md#metrics):
//
//   - metallo_http_requests_total{operation, code, environment}: requests
//     answered, by HTTP status code (401 and 403 answers of the
//     authentication middleware and admit hook included);
//   - metallo_http_request_duration_seconds{operation, environment}: time
//     from the operation's middleware chain starting to its answer, in
//     seconds.
//
// environment is the operation's environment path parameter when the
// operation declares one with MetricsEnvironment and the value names a
// known environment; otherwise it is empty, so callers cannot create series.
//
// Requests the mux answers itself (unknown path 404, wrong method 405) and
// /healthz, /readyz, /openapi.* and /docs are not counted.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metallo_http_requests_total",
			Help: "Requests answered by the public API, by operation ID, HTTP status code and execution environment (empty where a route has none).",
		}, []string{"operation", "code", "environment"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "metallo_http_request_duration_seconds",
			Help:    "Time to answer a request of the public API, by operation ID and execution environment (empty where a route has none), in seconds.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation", "environment"}),
	}
	if err := reg.Register(m.requests); err != nil {
		existing, err := registered[*prometheus.CounterVec](err)
		if err != nil {
			return nil, err
		}
		m.requests = existing
	}
	if err := reg.Register(m.duration); err != nil {
		existing, err := registered[*prometheus.HistogramVec](err)
		if err != nil {
			return nil, err
		}
		m.duration = existing
	}
	return m, nil
}

// middleware is the first Huma middleware: it times the whole chain
// (authentication, admission, body validation, handler).
func (m *httpMetrics) middleware(ctx huma.Context, next func(huma.Context)) {
	start := time.Now()
	next(ctx)
	op := ctx.Operation()
	env := ""
	if l, ok := op.Metadata[metricsEnvironmentKey].(environmentLabel); ok {
		if v := ctx.Param(l.param); v != "" && l.known(v) {
			env = v
		}
	}
	m.duration.WithLabelValues(op.OperationID, env).Observe(time.Since(start).Seconds())
	code := ctx.Status()
	if code == 0 {
		code = 200 // nothing written explicitly: net/http answers 200
	}
	m.requests.WithLabelValues(op.OperationID, strconv.Itoa(code), env).Inc()
}

const metricsEnvironmentKey = "metallo.metrics.environment"

type environmentLabel struct {
	param string
	known func(string) bool
}

// MetricsEnvironment returns operation metadata (merge it into the
// operation's Metadata) that labels the operation's request metrics with
// its path parameter param as environment — whatever the answer, 401 and
// 403 included — when known reports the value a configured environment.
// Any other value is labelled empty, so the series stay bounded by the
// configuration (docs/operations.md#metrics).
func MetricsEnvironment(param string, known func(string) bool) map[string]any {
	return map[string]any{metricsEnvironmentKey: environmentLabel{param: param, known: known}}
}

// registered returns the collector already registered under the same
// description (a second server on one registry shares the series), or the
// registration error.
func registered[C prometheus.Collector](err error) (C, error) {
	var exists prometheus.AlreadyRegisteredError
	if errors.As(err, &exists) {
		if c, ok := exists.ExistingCollector.(C); ok {
			return c, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("register http metrics: %w", err)
}
