// Package tokenreview authenticates a Site Runtime's projected
// service-account token with a Kubernetes TokenReview against its Site
// cluster (docs/site-protocol.md#authentication-and-authorisation): a token the
// cluster authenticates for the configured audience as the configured
// username (e.g. system:serviceaccount:metallo-runtime:runtime-k8s) is the
// principal environment:<id>. It is contributed to the platform's
// authenticator chain with auth.AsAuthenticator.
package tokenreview

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
)

// Target is one environment authenticated by TokenReview.
type Target struct {
	Environment string
	Username    string
	Audience    string
	// Kubeconfig names the Site cluster (targets with the same kubeconfig
	// share one client).
	Kubeconfig string
}

// DefaultCacheTTL bounds how long an accepted token is remembered without
// asking the cluster again (the Runtime uses its token for every request;
// the kubelet rotates it long before it expires).
const DefaultCacheTTL = 10 * time.Second

const maxCached = 1024

// Authenticator implements auth.Authenticator with TokenReviews.
type Authenticator struct {
	clusters []cluster
	ttl      time.Duration
	now      func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached
}

type cluster struct {
	kubeconfig string
	reviews    authenticationclient.TokenReviewInterface
	targets    []Target
}

type cached struct {
	principal auth.Principal
	until     time.Time
}

// New builds an authenticator for targets, loading each distinct
// kubeconfig once. It fails naming the kubeconfig that cannot be loaded.
func New(targets []Target) (*Authenticator, error) {
	a := &Authenticator{ttl: DefaultCacheTTL, now: time.Now, cache: map[[sha256.Size]byte]cached{}}
	byConfig := map[string]int{}
	for _, t := range targets {
		i, ok := byConfig[t.Kubeconfig]
		if !ok {
			if t.Kubeconfig == "" {
				return nil, fmt.Errorf("environment %s: a TokenReview needs the Site cluster's kubeconfig", t.Environment)
			}
			cfg, err := kubeconfig.Load(t.Kubeconfig)
			if err != nil {
				return nil, fmt.Errorf("environment %s: %w", t.Environment, err)
			}
			client, err := NewClient(cfg)
			if err != nil {
				return nil, fmt.Errorf("environment %s: %w", t.Environment, err)
			}
			i = len(a.clusters)
			byConfig[t.Kubeconfig] = i
			a.clusters = append(a.clusters, cluster{kubeconfig: t.Kubeconfig, reviews: client})
		}
		a.clusters[i].targets = append(a.clusters[i].targets, t)
	}
	return a, nil
}

// NewClient returns the TokenReview client of the cluster cfg names.
func NewClient(cfg *rest.Config) (authenticationclient.TokenReviewInterface, error) {
	c, err := authenticationclient.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("TokenReview client: %w", err)
	}
	return c.TokenReviews(), nil
}

// Authenticate implements auth.Authenticator. A token that is not shaped
// like a JWT is not sent to any cluster (auth.ErrUnauthenticated). Each
// cluster reviews the token once per configured audience; a cluster that
// cannot be reached is an infrastructure error only if no other cluster
// recognises the token.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (auth.Principal, error) {
	if strings.Count(token, ".") != 2 || len(token) > 16<<10 {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	if p, ok := a.cached(key); ok {
		return p, nil
	}
	var infra error
	for _, c := range a.clusters {
		for _, aud := range audiences(c.targets) {
			review, err := c.reviews.Create(ctx, &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{aud}},
			}, metav1.CreateOptions{})
			if err != nil {
				if infra == nil {
					infra = fmt.Errorf("TokenReview at %s: %w", c.kubeconfig, err)
				}
				continue
			}
			st := review.Status
			if !st.Authenticated || (len(st.Audiences) > 0 && !slices.Contains(st.Audiences, aud)) {
				continue
			}
			for _, t := range c.targets {
				if t.Audience == aud && t.Username == st.User.Username {
					p := auth.Principal{Kind: auth.KindEnvironment, ID: t.Environment}
					a.remember(key, p)
					return p, nil
				}
			}
		}
	}
	if infra != nil {
		return auth.Principal{}, infra
	}
	return auth.Principal{}, auth.ErrUnauthenticated
}

func audiences(ts []Target) []string {
	var out []string
	for _, t := range ts {
		if !slices.Contains(out, t.Audience) {
			out = append(out, t.Audience)
		}
	}
	return out
}

func (a *Authenticator) cached(key [sha256.Size]byte) (auth.Principal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.cache[key]
	if !ok || !a.now().Before(c.until) {
		return auth.Principal{}, false
	}
	return c.principal, true
}

func (a *Authenticator) remember(key [sha256.Size]byte, p auth.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCached {
		clear(a.cache)
	}
	a.cache[key] = cached{principal: p, until: a.now().Add(a.ttl)}
}
