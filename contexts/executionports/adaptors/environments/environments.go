// Package environments loads environments.yaml, the execution role's
// configuration of execution environments
// (docs/site-protocol.md#authentication-and-authorisation):
//
//	environments:
//	  - id: alpha-k8s                      # principal environment:alpha-k8s
//	    site: alpha
//	    authority: https://metallo.example.org
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
// Each entry is validated at start; errors name the entry. A relative
// kubeconfig path is relative to the file's directory. The static keys are
// served by a platform/auth KeyStore (hashes only, constant-time compare);
// TokenReview entries are served by adaptors/tokenreview.
package environments

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// File is the shape of environments.yaml.
type File struct {
	Environments []Entry `json:"environments"`
}

// Entry is one environment.
type Entry struct {
	ID        string `json:"id"`
	Site      string `json:"site"`
	Authority string `json:"authority"`
	Auth      Auth   `json:"auth"`
}

// Auth says how the environment's Runtime authenticates: exactly one of a
// static key's SHA-256 or a Kubernetes TokenReview.
type Auth struct {
	KeySHA256   string       `json:"key_sha256,omitempty"`
	TokenReview *TokenReview `json:"tokenreview,omitempty"`
}

// TokenReview authenticates the Runtime's projected service-account token
// with a TokenReview against the Site cluster named by Kubeconfig: the token
// must be authenticated for Audience as Username.
type TokenReview struct {
	Kubeconfig string `json:"kubeconfig"`
	Username   string `json:"username"`
	Audience   string `json:"audience"`
}

// Reviewed is a validated TokenReview entry: the environment it stands for.
type Reviewed struct {
	Environment string
	TokenReview
}

// Set is a validated environments file.
type Set struct {
	byID    map[string]domain.Environment
	keys    *auth.KeyStore
	reviews []Reviewed
}

// Load reads and validates the environments file at path.
func Load(path string) (*Set, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read environments file: %w", err)
	}
	s, err := Parse(raw, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("environments file %s: %w", path, err)
	}
	return s, nil
}

// Parse decodes an environments file's text (YAML, strictly: an unknown or
// repeated field is an error) and validates it as New does, resolving
// relative kubeconfig paths against dir. It never panics, whatever raw
// holds (FuzzParse).
func Parse(raw []byte, dir string) (*Set, error) {
	var f File
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return New(f, dir)
}

// validID applies the principal identifier rule of platform/auth to an
// environment or Site ID.
func validID(id string) bool {
	_, err := auth.ParsePrincipal(auth.KindEnvironment + ":" + id)
	return err == nil
}

// New validates f. dir resolves relative kubeconfig paths. Errors name the
// entry (environments[i] (id)) and the field.
func New(f File, dir string) (*Set, error) {
	if len(f.Environments) == 0 {
		return nil, errors.New("no environment is configured: list at least one under the environments key")
	}
	s := &Set{byID: map[string]domain.Environment{}}
	var keys auth.KeysFile
	hashes := map[string]string{}
	for i, e := range f.Environments {
		where := fmt.Sprintf("environments[%d] (%s)", i, e.ID)
		if !validID(e.ID) {
			return nil, fmt.Errorf("%s: id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", where)
		}
		if _, dup := s.byID[e.ID]; dup {
			return nil, fmt.Errorf("%s: id is listed twice", where)
		}
		if !validID(e.Site) {
			return nil, fmt.Errorf("%s: site must be a Site ID (letters, digits, '.', '_' or '-')", where)
		}
		if err := checkAuthority(e.Authority); err != nil {
			return nil, fmt.Errorf("%s: authority %q: %w", where, e.Authority, err)
		}
		switch a := e.Auth; {
		case a.KeySHA256 != "" && a.TokenReview != nil, a.KeySHA256 == "" && a.TokenReview == nil:
			return nil, fmt.Errorf("%s: auth must give exactly one of key_sha256 or tokenreview", where)
		case a.KeySHA256 != "":
			if !siteprotocol.IsDigest(a.KeySHA256) {
				return nil, fmt.Errorf("%s: auth.key_sha256 must be 64 lower-case hex digits (the SHA-256 of the key; `metallo keys new --principal environment:%s` prints one)", where, e.ID)
			}
			if other, dup := hashes[a.KeySHA256]; dup {
				return nil, fmt.Errorf("%s: auth.key_sha256 is also the key of environment %s; a key stands for one environment", where, other)
			}
			hashes[a.KeySHA256] = e.ID
			keys.Keys = append(keys.Keys, auth.KeyEntry{Principal: auth.KindEnvironment + ":" + e.ID, SHA256: a.KeySHA256})
		default:
			tr := *a.TokenReview
			if tr.Kubeconfig == "" || tr.Username == "" || tr.Audience == "" {
				return nil, fmt.Errorf("%s: auth.tokenreview needs kubeconfig, username and audience", where)
			}
			if !filepath.IsAbs(tr.Kubeconfig) {
				tr.Kubeconfig = filepath.Join(dir, tr.Kubeconfig)
			}
			if _, err := os.Stat(tr.Kubeconfig); err != nil {
				return nil, fmt.Errorf("%s: auth.tokenreview.kubeconfig: %w", where, err)
			}
			for _, r := range s.reviews {
				if r.Username == tr.Username && r.Kubeconfig == tr.Kubeconfig && r.Audience == tr.Audience {
					return nil, fmt.Errorf("%s: auth.tokenreview names the same cluster, username and audience as environment %s", where, r.Environment)
				}
			}
			s.reviews = append(s.reviews, Reviewed{Environment: e.ID, TokenReview: tr})
		}
		s.byID[e.ID] = domain.Environment{ID: e.ID, Site: e.Site, Authority: e.Authority}
	}
	ks, err := auth.NewKeyStore(keys)
	if err != nil {
		return nil, err
	}
	s.keys = ks
	return s, nil
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

// Environment implements application.Environments.
func (s *Set) Environment(id string) (domain.Environment, bool) {
	e, ok := s.byID[id]
	return e, ok
}

// IDs returns the configured environment IDs, sorted.
func (s *Set) IDs() []string {
	out := make([]string, 0, len(s.byID))
	for id := range s.byID {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Keys returns the authenticator of the static environment keys
// (principal environment:<id>).
func (s *Set) Keys() *auth.KeyStore { return s.keys }

// TokenReviews returns the environments authenticated by TokenReview.
func (s *Set) TokenReviews() []Reviewed { return append([]Reviewed(nil), s.reviews...) }
