// Package grantprovider stands in for the repository grant provider, a
// provider outside Metallo (docs/site-runtime.md#repository-grants), in
// the tests and in make demo. It serves the HTTP contract on loopback and
// mints real access tokens at a standins/githost host: each grant is a token of the member's Gitea user with the
// scope read:repository (the member's user reads only the repositories it
// is a collaborator of), named after the idempotency key so that the host
// itself refuses a second token for one key; revoking deletes the token at
// the host.
package grantprovider

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/pharos-metallo/metallo/standins/githost"
)

// Grant is what the provider issued.
type Grant struct {
	GrantID string
	User    githost.User
	TokenID int64
	Token   string
}

// Provider is the stand-in provider.
type Provider struct {
	// URL is the provider's base URL (plain http on loopback, or https with NewTLS).
	URL string

	host    *githost.Host
	members map[string]githost.User
	mu      sync.Mutex
	byKey   map[string]Grant
	byID    map[string]Grant
}

// New serves the provider until tb ends (a test, or a program owning the
// host: make demo); members maps member (Party) UUIDs to their users at host. A
// member without a user is denied (403).
func New(tb githost.Owner, host *githost.Host, members map[string]githost.User) *Provider {
	p := &Provider{host: host, members: members, byKey: map[string]Grant{}, byID: map[string]Grant{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// NewTLS is New served over HTTPS on listener (for example on the real node's bridge address,
// which a Runtime in a Pod reaches) with the serving certificate cert: the Runtime accepts plain
// http only to loopback.
func NewTLS(tb githost.Owner, host *githost.Host, members map[string]githost.User, listener net.Listener, cert tls.Certificate) *Provider {
	p := &Provider{host: host, members: members, byKey: map[string]Grant{}, byID: map[string]Grant{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	_ = srv.Listener.Close()
	srv.Listener = listener
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// TokenName is the name of the token minted for an idempotency key.
func TokenName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "grant-" + hex.EncodeToString(sum[:10])
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/repository-grants":
		p.issue(w, r)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/repository-grants/"):
		p.revoke(w, r, strings.TrimPrefix(r.URL.Path, "/v1/repository-grants/"))
	default:
		http.NotFound(w, r)
	}
}

func (p *Provider) issue(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MemberID      string `json:"member_id"`
		ProjectID     string `json:"project_id"`
		RepositoryURL string `json:"repository_url"`
		RunID         string `json:"run_id"`
		AttemptID     string `json:"attempt_id"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	key := r.Header.Get("Idempotency-Key")
	if dec.Decode(&req) != nil || key == "" || req.MemberID == "" || req.ProjectID == "" || req.RepositoryURL == "" || req.RunID == "" || req.AttemptID == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	user, ok := p.members[req.MemberID]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]string{"reason": "member " + req.MemberID + " has no account at the repository host"})
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.byKey[key]
	if !ok {
		id, token, err := p.host.CreateToken(r.Context(), user, TokenName(key), "read:repository")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		g = Grant{GrantID: fmt.Sprintf("gitea-%s-%d", user.Name, id), User: user, TokenID: id, Token: token}
		p.byKey[key], p.byID[g.GrantID] = g, g
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"grant_id": g.GrantID, "username": g.User.Name, "token": g.Token,
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
}

func (p *Provider) revoke(w http.ResponseWriter, r *http.Request, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.byID[id]; ok {
		if _, err := p.host.DeleteToken(r.Context(), g.User, g.TokenID); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// Grants returns every grant issued, once each.
func (p *Provider) Grants() []Grant {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Grant, 0, len(p.byID))
	for _, g := range p.byID {
		out = append(out, g)
	}
	return out
}
