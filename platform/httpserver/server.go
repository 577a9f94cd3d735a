// Package httpserver serves the process's one Huma API on the standard
// library mux: the union of the operations of every context composed in the
// process, /openapi.json, /openapi.yaml, /docs, /healthz and /readyz.
// Errors are RFC 9457 problem details with a "reason" member (Problem).
// See docs/architecture.md#dependencies.
package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/servingtls"
)

// Config is the public listener's configuration.
type Config struct {
	// Listen is the TCP address, e.g. "127.0.0.1:8080" (":0" picks a free
	// port; Server.Addr tells which).
	Listen string
	// Title is the OpenAPI document's title.
	Title string
	// ShutdownTimeout bounds graceful shutdown.
	ShutdownTimeout time.Duration
	// BodyReadTimeout is the one read deadline of every request body on
	// every route: the body must arrive within it of the request's headers,
	// else a read fails and the answer is 408 request-timeout
	// (docs/operations.md#request-bodies). Default DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
}

// Registrar adds a context's operations to the API. Contexts provide theirs
// into the "http.registrars" group with AsRegistrar.
type Registrar interface {
	Register(api huma.API)
}

// RegistrarFunc adapts a function to Registrar.
type RegistrarFunc func(api huma.API)

// Register calls f.
func (f RegistrarFunc) Register(api huma.API) { f(api) }

// AsRegistrar annotates a constructor returning a Registrar so Fx adds it to
// the routes group.
func AsRegistrar(constructor any) any {
	return fx.Annotate(constructor, fx.As(new(Registrar)), fx.ResultTags(`group:"http.registrars"`))
}

// ReadinessCheck is one dependency /readyz checks (a database ping).
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// AsReadinessCheck annotates a constructor returning a ReadinessCheck so Fx
// adds it to the readiness group.
func AsReadinessCheck(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"http.readiness"`))
}

// BearerScheme is the name of the bearer security scheme in the OpenAPI
// document. Operations that list it require an authenticated principal.
const BearerScheme = "bearer"

// Bearer is the Security requirement for an operation that needs a bearer
// credential.
func Bearer() []map[string][]string { return []map[string][]string{{BearerScheme: {}}} }

// APIVersion is the OpenAPI documents' info.version: the version of the
// API itself, which changes only with the API, never with the binary's
// build (the committed documents carry it, so `make generate` gives the same
// document from any checkout). A served document adds the build
// (DocumentBuild).
const APIVersion = "1.0.0"

// BuildExtension is the served document's info member naming the binary
// that serves it: buildinfo.Info's JSON (docs/operations.md#versions).
const BuildExtension = "x-metallo-build"

// DocumentBuild adds build to the document's info as BuildExtension. The
// server does it to the document it serves; `metallo openapi` never does.
func DocumentBuild(api huma.API, build buildinfo.Info) {
	info := api.OpenAPI().Info
	if info.Extensions == nil {
		info.Extensions = map[string]any{}
	}
	info.Extensions[BuildExtension] = build
}

// NewAPI builds a Huma API on mux with the platform's conventions: OpenAPI
// 3.1 at /openapi.json and /openapi.yaml (info.version APIVersion), docs at /docs (rendered offline
// from assets in the binary, serveDocs), the bearer security
// scheme, problem details with "reason", and no "$schema" link injection
// (bodies are exactly what the operation returns). Huma's own
// per-operation body read deadline is disabled (ownDeadline): the server's
// one deadline (Config.BodyReadTimeout) is the only one.
func NewAPI(mux *http.ServeMux, title string) huma.API {
	cfg := huma.DefaultConfig(title, APIVersion)
	cfg.DocsPath = "" // served from the binary's own assets (serveDocs)
	cfg.Servers = []*huma.Server{{
		URL:         "/",
		Description: "The process serving this document: https on its public listener, plain http only on a loopback listener (docs/operations.md#listeners).",
	}}
	cfg.CreateHooks = nil
	cfg.Transformers = append(cfg.Transformers, problemTransformer)
	cfg.OnAddOperation = append(cfg.OnAddOperation, problemSchemas, DocumentAccess, DocumentExamples)
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		BearerScheme: {Type: "http", Scheme: "bearer", Description: "A key from keys.yaml, or a Kubernetes service-account token for a Site Runtime."},
	}
	api := humago.New(mux, cfg)
	serveDocs(mux, title)
	api.UseMiddleware(useOwnDeadline, useRequestContext)
	return api
}

// useRequestContext puts the answering operation's ID into the request's
// context, for the lines logged about the request (RequestLog), and gives
// a request the server's edge has not seen (an API served without it, in
// tests) its ID as the edge would.
func useRequestContext(ctx huma.Context, next func(huma.Context)) {
	c := ctx.Context()
	if RequestID(c) == "" {
		id := requestIDFor(ctx.Header(RequestIDHeader))
		ctx.SetHeader(RequestIDHeader, id)
		c = WithRequestID(c, id)
	}
	if op := ctx.Operation(); op != nil {
		c = withOperation(c, op.OperationID)
	}
	next(huma.WithContext(ctx, c))
}

// UseAuthentication makes every operation that lists the bearer scheme
// require a credential that authn recognises: 401 without one or with an
// unknown one, 503 when the check itself fails. The principal is put into
// the request context (auth.FromContext). Before the credential is looked
// at, the query must be percent-encoded correctly (400 otherwise) and
// every declared path and query parameter must be text (checkParams: 422
// otherwise), so nothing the authenticator, the admit hook or a handler
// sees, logs or stores carries a NUL or an invalid byte. After the admit
// rule, an operation without a request body refuses a request that
// declares one (refuseUndeclaredBody: 400).
func UseAuthentication(api huma.API, authn auth.Authenticator, log *zap.Logger) {
	api.UseMiddleware(checkParams)
	api.UseMiddleware(func(ctx huma.Context, next func(huma.Context)) {
		if !requiresBearer(ctx.Operation()) {
			next(ctx)
			return
		}
		token, ok := bearerToken(ctx.Header("Authorization"))
		if !ok {
			ctx.SetHeader("WWW-Authenticate", `Bearer`)
			_ = huma.WriteErr(api, ctx, http.StatusUnauthorized, "a bearer credential is required")
			return
		}
		p, err := authn.Authenticate(ctx.Context(), token)
		if errors.Is(err, auth.ErrUnauthenticated) {
			ctx.SetHeader("WWW-Authenticate", `Bearer error="invalid_token"`)
			_ = huma.WriteErr(api, ctx, http.StatusUnauthorized, "the bearer credential is not recognised")
			return
		}
		if err != nil {
			RequestLog(ctx.Context(), log).Warn("authentication unavailable", zap.Error(err))
			ctx.SetHeader("Retry-After", strconv.Itoa(RetryAfterSeconds))
			WriteProblem(ctx, NewProblem(http.StatusServiceUnavailable, ReasonUnavailable, "the credential could not be checked now; retry later"))
			return
		}
		noteAuditPrincipal(ctx.Context(), p)
		if admit, ok := ctx.Operation().Metadata[admitKey].(Admit); ok {
			if err := admit(p, ctx.Param); err != nil {
				WriteProblem(ctx, asProblem(err))
				return
			}
		}
		next(huma.WithContext(ctx, auth.WithPrincipal(ctx.Context(), p)))
	})
	api.UseMiddleware(refuseUndeclaredBody)
}

// bearerToken reads "Bearer <token>" from an Authorization header; the
// scheme is case-insensitive (RFC 7235 section 2.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Admit decides whether an authenticated principal may call an operation,
// given the operation's path parameters (param returns one by name). It
// runs in the authentication middleware, before the request body is read
// or validated, so a caller without the right credential learns nothing
// about the body's rules. It returns nil to admit, or an error: a
// *Problem is written as it is, any other error as 403 "forbidden".
type Admit func(p auth.Principal, param func(name string) string) error

const admitKey = "metallo.admit"

// AdmitMetadata returns operation metadata carrying admit; set it as an
// operation's Metadata (or merge it into existing metadata).
func AdmitMetadata(admit Admit) map[string]any { return map[string]any{admitKey: admit} }

// AdmitKinds admits any principal of one of kinds (e.g. "service").
func AdmitKinds(kinds ...string) Admit {
	return func(p auth.Principal, _ func(string) string) error {
		for _, k := range kinds {
			if p.Kind == k {
				return nil
			}
		}
		return NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not call this operation; it needs a %s key", p, strings.Join(kinds, " or ")+":*"))
	}
}

// AdmitPathPrincipal admits exactly the principal kind:<path parameter
// param>, e.g. site:{site} on /resource-provisioning/{site}/reports.
func AdmitPathPrincipal(kind, param string) Admit {
	return func(p auth.Principal, value func(string) string) error {
		if want := value(param); p.Is(kind, want) {
			return nil
		}
		return NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not call this operation for %s %s", p, param, Quoted(value(param))))
	}
}

func asProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	return NewProblem(http.StatusForbidden, "forbidden", err.Error())
}

// WriteProblem writes p as the answer (application/problem+json, status
// p.Status) from a Huma middleware that answers before the operation's
// handler runs (authentication, admission, body guards). Echoed values are
// bounded as in every problem Huma writes (boundEchoedValues); the
// instance is the request's ID (docs/operations.md#request-ids).
func WriteProblem(ctx huma.Context, p *Problem) {
	p.Errors = boundEchoedValues(p.Errors)
	if p.Instance == "" {
		p.Instance = instanceOf(ctx.Context())
	}
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(p)
}

func requiresBearer(op *huma.Operation) bool {
	if op == nil {
		return false
	}
	for _, req := range op.Security {
		if _, ok := req[BearerScheme]; ok {
			return true
		}
	}
	return false
}

// Server is the running public listener.
type Server struct {
	API    huma.API
	Mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener
	config Config
}

// Addr returns the bound address (useful with ":0"); empty before start.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

type serverParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Log        *zap.Logger
	Authn      auth.Authenticator
	Registrars []Registrar      `group:"http.registrars"`
	Checks     []ReadinessCheck `group:"http.readiness"`
	// Metrics, when the admin module is composed, receives the request
	// metrics (httpMetrics).
	Metrics prometheus.Registerer `optional:"true"`
	// TLS, when servingtls.Module is composed with a pair, serves the API
	// over TLS with the current pair (docs/operations.md#tls); without it
	// the API is plain HTTP, which serve allows on loopback only.
	TLS *servingtls.Certificates `optional:"true"`
}

// Module serves the API on cfg.Listen for the lifetime of the app. It needs
// an auth.Authenticator and collects Registrars and ReadinessChecks.
func Module(cfg Config) fx.Option {
	return fx.Module("httpserver",
		fx.Provide(func(p serverParams) (*Server, error) { return newServer(cfg, p) }),
		fx.Invoke(func(*Server) {}),
	)
}

func newServer(cfg Config, p serverParams) (*Server, error) {
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	mux := http.NewServeMux()
	api := NewAPI(mux, cfg.Title)
	DocumentBuild(api, buildinfo.Read())
	if p.Metrics != nil {
		m, err := newHTTPMetrics(p.Metrics)
		if err != nil {
			return nil, err
		}
		api.UseMiddleware(m.middleware)
	}
	UseAudit(api, p.Log)
	UseAuthentication(api, p.Authn, p.Log)
	for _, r := range p.Registrars {
		r.Register(api)
	}
	log := p.Log.Named("http")
	registerHealth(mux, p.Checks, log)
	s := &Server{API: api, Mux: mux, config: cfg}
	s.srv = &http.Server{
		Handler:           edge(cfg.BodyReadTimeout, mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          zap.NewStdLog(log),
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", cfg.Listen)
			if err != nil {
				return fmt.Errorf("listen on --listen %s: %w", cfg.Listen, err)
			}
			s.ln = ln
			scheme, serve := "http", s.srv.Serve
			if p.TLS != nil {
				s.srv.TLSConfig = p.TLS.ServerConfig()
				scheme, serve = "https", func(ln net.Listener) error { return s.srv.ServeTLS(ln, "", "") }
			}
			log.Info("serving API", zap.String("addr", ln.Addr().String()), zap.String("scheme", scheme), zap.String("docs", scheme+"://"+ln.Addr().String()+"/docs"))
			go func() {
				if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("API server failed; it serves no more requests", zap.Error(err))
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, cfg.ShutdownTimeout)
			defer cancel()
			if err := s.srv.Shutdown(ctx); err != nil {
				return fmt.Errorf("shut down API server: %w", err)
			}
			log.Info("API server stopped", zap.String("addr", s.Addr()))
			return nil
		},
	})
	return s, nil
}

// registerHealth serves /healthz (the process answers: 200 "ok") and
// /readyz (every ReadinessCheck passes: 200 "ok"). A failed check is
// answered 503 unavailable, a problem naming the check only ("<name>: not
// ready"); its error, which may carry driver text such as a database's
// host, user or name, goes to the log, never to the caller.
func registerHealth(mux *http.ServeMux, checks []ReadinessCheck, log *zap.Logger) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		var failed []string
		for _, c := range checks {
			if err := c.Check(ctx); err != nil {
				failed = append(failed, c.Name+": not ready")
				log.Warn("readiness check failed", zap.String("check", c.Name), zap.Error(err))
			}
		}
		if len(failed) > 0 {
			// A problem like every other refusal, with Retry-After; a
			// probe reads the status only.
			p := NewProblem(http.StatusServiceUnavailable, ReasonUnavailable, "not ready: "+strings.Join(failed, "; "))
			p.Instance = instanceOf(r.Context())
			body, _ := json.Marshal(p)
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// AdmitOf returns the admit rule an operation carries in its Metadata
// (AdmitMetadata), false when it carries none.
func AdmitOf(op *huma.Operation) (Admit, bool) {
	if op == nil {
		return nil, false
	}
	admit, ok := op.Metadata[admitKey].(Admit)
	return admit, ok
}

// RequiresBearer reports whether op's security requires the bearer scheme
// (Bearer()), so the authentication middleware authenticates its caller
// and runs its admit rule.
func RequiresBearer(op *huma.Operation) bool { return requiresBearer(op) }
