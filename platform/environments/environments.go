// Package environments reads environments.yaml, the one description of the
// execution environments that both central roles read
// (docs/architecture.md#configuration-files):
//
//	environments:
//	  - id: alpha-k8s                      # principal environment:alpha-k8s
//	    site: alpha
//	    authority: https://metallo.example.org
//	    backend: kubernetes                # kubernetes (when absent) or slurm
//	    auth:
//	      key_sha256: <64 lower-case hex>  # SHA-256 of a static Runtime key
//	  - id: beta-k8s
//	    site: beta
//	    authority: https://metallo.example.org
//	    auth:
//	      tokenreview:                     # the Runtime's service-account token
//	        kubeconfig: beta-cluster.kubeconfig
//	        username: system:serviceaccount:metallo-runtime:runtime-k8s
//	        audience: metallo
//
// Parse checks every field's form and reports every fault at once, naming
// the entry; both roles refuse the same files. What a field points at is
// checked by the role that uses it (the execution role loads the
// kubeconfigs). Module keeps the file current while the process runs
// (platform/reload): a changed file is applied whole or refused whole.
package environments

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/configfile"
	"github.com/pharos-metallo/metallo/platform/reload"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Flag names the file's flag, shared by the central roles.
const Flag = "environments-file"

// Backend is how an environment's Runtime runs work at its Site
// (docs/site-runtime.md): the Site protocol's backend, whose bind-member
// rules depend on it (docs/site-protocol.md#member-identity-by-backend).
// The set is closed.
type Backend = siteprotocol.Backend

// The backends.
const (
	// Kubernetes runs batch, application and inference work on a Site
	// cluster; an entry without a backend is kubernetes.
	Kubernetes = siteprotocol.BackendKubernetes
	// Slurm runs batch work on a Slurm cluster.
	Slurm = siteprotocol.BackendSlurm
)

// Backends returns every backend, in the order the documents list them.
func Backends() []Backend { return []Backend{Kubernetes, Slurm} }

// File is the shape of environments.yaml.
type File struct {
	Environments []Entry `json:"environments"`
}

// Entry is one environment as written.
type Entry struct {
	ID        string  `json:"id"`
	Site      string  `json:"site"`
	Authority string  `json:"authority"`
	Backend   Backend `json:"backend,omitempty"`
	Auth      Auth    `json:"auth"`
}

// Auth says how the environment's Runtime authenticates: exactly one of a
// static key's SHA-256 or a Kubernetes TokenReview.
type Auth struct {
	KeySHA256   string       `json:"key_sha256,omitempty"`
	TokenReview *TokenReview `json:"tokenreview,omitempty"`
}

// TokenReview authenticates the Runtime's projected service-account token
// with a TokenReview against the Site cluster named by Kubeconfig: the
// token must be authenticated for Audience as Username.
type TokenReview struct {
	Kubeconfig string `json:"kubeconfig"`
	Username   string `json:"username"`
	Audience   string `json:"audience"`
}

// Environment is one validated environment: its backend filled in, a
// relative kubeconfig resolved against the file's directory.
type Environment struct {
	ID        string
	Site      string
	Authority string
	Backend   Backend
	Auth      Auth
}

// Set is one validated version of the file. It is never changed once
// built: a changed file is a new Set.
type Set struct {
	byID map[string]Environment
	ids  []string
}

// Parse decodes an environments file's text (YAML; a repeated field or
// text that is not YAML is an error) and validates it as New does,
// resolving relative kubeconfig paths against dir; an unknown field is one
// more fault, naming its entry (environments[i] (id): unknown field "x"),
// reported with the others. It never panics, whatever raw holds (FuzzParse).
func Parse(raw []byte, dir string) (*Set, error) {
	var f File
	unknown, err := configfile.Decode(raw, &f)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs []error
	for _, u := range unknown {
		if u.Entry < 0 {
			errs = append(errs, fmt.Errorf("unknown field %q", u.Field))
		} else {
			errs = append(errs, fmt.Errorf("environments[%d] (%s): unknown field %q", u.Entry, f.Environments[u.Entry].ID, u.Field))
		}
	}
	s, err := New(f, dir)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// validID applies the principal identifier rule of platform/auth to an
// environment or Site ID.
func validID(id string) bool {
	_, err := auth.ParsePrincipal(auth.KindEnvironment + ":" + id)
	return err == nil
}

// New validates f: at least one environment; per entry an ID (the
// principal ID rule, listed once), a Site ID, an authority (absolute https,
// plain http only to a loopback host), a backend of Backends (kubernetes
// when empty), and exactly one authentication — a key hash (64 lower-case
// hex, standing for one environment) or a TokenReview with kubeconfig,
// username and audience (one cluster, username and audience per
// environment). dir resolves relative kubeconfig paths. The error joins
// every fault, each naming its entry (environments[i] (id)) and field.
func New(f File, dir string) (*Set, error) {
	if len(f.Environments) == 0 {
		return nil, errors.New("no environment is configured: list at least one under the environments key")
	}
	s := &Set{byID: map[string]Environment{}}
	var errs []error
	hashes := map[string]string{}
	reviews := map[TokenReview]string{}
	for i, e := range f.Environments {
		where := fmt.Sprintf("environments[%d] (%s)", i, e.ID)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
		}
		_, dup := s.byID[e.ID]
		switch {
		case !validID(e.ID):
			bad("id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
		case dup:
			bad("id is listed twice")
		}
		if !validID(e.Site) {
			bad("site must be a Site ID (1-128 letters, digits, '.', '_' or '-', starting with a letter or digit)")
		}
		if err := checkAuthority(e.Authority); err != nil {
			bad("authority %q: %v", e.Authority, err)
		}
		backend := e.Backend
		if backend == "" {
			backend = Kubernetes
		}
		if !slices.Contains(Backends(), backend) {
			bad("backend %q: want one of %s (kubernetes when absent)", e.Backend, joinBackends())
		}
		a := e.Auth
		switch {
		case a.KeySHA256 != "" && a.TokenReview != nil, a.KeySHA256 == "" && a.TokenReview == nil:
			bad("auth must give exactly one of key_sha256 or tokenreview")
		case a.KeySHA256 != "":
			if !siteprotocol.IsDigest(a.KeySHA256) {
				bad("auth.key_sha256 must be 64 lower-case hex digits (the SHA-256 of the key; `metallo keys new --principal environment:%s` prints one)", e.ID)
			} else if other, dup := hashes[a.KeySHA256]; dup {
				bad("auth.key_sha256 is also the key of environment %s; a key stands for one environment", other)
			} else {
				hashes[a.KeySHA256] = e.ID
			}
		default:
			tr := *a.TokenReview
			if tr.Kubeconfig == "" || tr.Username == "" || tr.Audience == "" {
				bad("auth.tokenreview needs kubeconfig, username and audience")
				break
			}
			if !filepath.IsAbs(tr.Kubeconfig) {
				tr.Kubeconfig = filepath.Join(dir, tr.Kubeconfig)
			}
			if other, dup := reviews[tr]; dup {
				bad("auth.tokenreview names the same cluster, username and audience as environment %s", other)
			} else {
				reviews[tr] = e.ID
			}
			a.TokenReview = &tr
		}
		if !dup && validID(e.ID) {
			s.byID[e.ID] = Environment{ID: e.ID, Site: e.Site, Authority: e.Authority, Backend: backend, Auth: a}
			s.ids = append(s.ids, e.ID)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.Sort(s.ids)
	return s, nil
}

func joinBackends() string {
	names := make([]string, 0, len(Backends()))
	for _, b := range Backends() {
		names = append(names, string(b))
	}
	return strings.Join(names, ", ")
}

// checkAuthority accepts an absolute https URL, or http to a loopback host
// (the Runtime accepts plain HTTP only to loopback addresses).
func checkAuthority(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must be an absolute https URL without query or fragment")
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return errors.New("plain http is allowed only to a loopback address; use https")
	}
	return nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Environment returns the environment with id, or false.
func (s *Set) Environment(id string) (Environment, bool) {
	e, ok := s.byID[id]
	return e, ok
}

// IDs returns the environment IDs, sorted.
func (s *Set) IDs() []string { return slices.Clone(s.ids) }

// All returns every environment, in ID order.
func (s *Set) All() []Environment {
	out := make([]Environment, 0, len(s.ids))
	for _, id := range s.ids {
		out = append(out, s.byID[id])
	}
	return out
}

// Sites returns each environment's Site (environment → Site), a copy.
func (s *Set) Sites() map[string]string {
	out := make(map[string]string, len(s.byID))
	for id, e := range s.byID {
		out[id] = e.Site
	}
	return out
}

// Backends returns each environment's backend (environment → backend),
// a copy.
func (s *Set) Backends() map[string]Backend {
	out := make(map[string]Backend, len(s.byID))
	for id, e := range s.byID {
		out[id] = e.Backend
	}
	return out
}

// LogFields describe the set in a reload's log line: its environments,
// each as <id>@<site>.
func (s *Set) LogFields() []zap.Field {
	at := make([]string, 0, len(s.ids))
	for _, id := range s.ids {
		at = append(at, id+"@"+s.byID[id].Site)
	}
	return []zap.Field{zap.Strings("environments", at)}
}

// Source is environments.yaml as a serving process holds it: the version
// in use, replaced when the file changes (platform/reload).
type Source = reload.File[*Set]

// Load reads the file at path into a Source whose reloads log to log and
// count in reg (nil: no metrics). Errors name --environments-file and
// every fault of the file.
func Load(path string, log *zap.Logger, reg prometheus.Registerer) (*Source, error) {
	dir := filepath.Dir(path)
	return reload.Load(reload.Options{Name: "environments", Flag: Flag, Path: path, Log: log, Registerer: reg},
		func(raw []byte) (*Set, error) { return Parse(raw, dir) })
}
