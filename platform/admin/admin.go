// Package admin serves the process's admin listener: Prometheus metrics at
// /metrics from a registry owned by the app (never the global default
// registry), plus /healthz and, when enabled, Go's runtime profiles at
// /debug/pprof/ (net/http/pprof). Contexts register their collectors on the
// *prometheus.Registry this module provides; the registry already holds the
// Go runtime and process collectors and metallo_build_info, so every role
// serves them (docs/operations.md#metrics).
package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/servingtls"
)

// Config is the admin listener's configuration.
type Config struct {
	// Listen is the TCP address, e.g. "127.0.0.1:9090"; empty disables the
	// listener (the registry is still provided).
	Listen string
	// Profiling serves net/http/pprof's handlers under /debug/pprof/ on
	// the listener (CPU and heap profiles, goroutine dumps, execution
	// traces; not the command line, which can hold credentials). Off by
	// default: the listener is unauthenticated, and a profile exposes the
	// process's internals to whoever reaches it. It needs Listen.
	Profiling bool
}

// Server is the running admin listener.
type Server struct {
	Registry *prometheus.Registry
	ln       net.Listener
}

// Addr returns the bound address, empty when disabled or not started.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// NewRegistry returns a registry with the Go runtime and process collectors
// and this binary's metallo_build_info (BuildInfo of buildinfo.Read).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfo(buildinfo.Read()))
	return reg
}

// BuildInfoMetric is the name of the build information gauge.
const BuildInfoMetric = "metallo_build_info"

// BuildInfo returns the gauge metallo_build_info{version, revision,
// go_version} of build i, always 1: the usual info-metric shape, so a
// query can join it to any series of the same target
// (docs/operations.md#versions).
func BuildInfo(i buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfoMetric,
		Help:        "The running binary's build, always 1: its version, VCS revision and Go toolchain (metallo version).",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "go_version": i.GoVersion},
	})
	g.Set(1)
	return g
}

// Module provides a *prometheus.Registry (also as prometheus.Registerer) and
// serves it on cfg.Listen.
func Module(cfg Config) fx.Option {
	return fx.Module("admin",
		fx.Provide(
			NewRegistry,
			func(r *prometheus.Registry) prometheus.Registerer { return r },
			func(p serverParams) *Server {
				return newServer(p.Lifecycle, cfg, p.Registry, p.TLS, p.Log.Named("admin"))
			},
		),
		fx.Invoke(func(*Server) {}),
	)
}

type serverParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Registry  *prometheus.Registry
	Log       *zap.Logger
	// TLS, when servingtls.Module is composed with a pair, serves the
	// listener over TLS with the same pair as the public API
	// (docs/operations.md#tls).
	TLS *servingtls.Certificates `optional:"true"`
}

func newServer(lc fx.Lifecycle, cfg Config, reg *prometheus.Registry, certs *servingtls.Certificates, log *zap.Logger) *Server {
	s := &Server{Registry: reg}
	if cfg.Listen == "" {
		return s
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	if cfg.Profiling {
		// Not /debug/pprof/cmdline: the command line can carry a database
		// URL's credentials.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", cfg.Listen)
			if err != nil {
				return fmt.Errorf("listen on --admin-listen %s: %w", cfg.Listen, err)
			}
			s.ln = ln
			scheme, serve := "http", srv.Serve
			if certs != nil {
				srv.TLSConfig = certs.ServerConfig()
				scheme, serve = "https", func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
			}
			log.Info("serving metrics", zap.String("addr", ln.Addr().String()), zap.String("scheme", scheme))
			go func() {
				if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("admin server stopped", zap.Error(err))
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error { return srv.Shutdown(ctx) },
	})
	return s
}
