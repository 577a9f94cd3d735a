// Package environments is the execution role's view of environments.yaml
// (platform/environments; docs/site-protocol.md#authentication-and-authorisation):
// each environment as the domain reads it, the static keys of its Runtimes
// (principal environment:<id>, hashes only, constant-time compare) and the
// environments authenticated by TokenReview, whose kubeconfigs must exist
// (served by adaptors/tokenreview). A View is one version of the file;
// Current is the view in use, replaced whole at each applied reload.
package environments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/auth"
	envfile "github.com/pharos-metallo/metallo/platform/environments"
)

// Reviewed is an environment authenticated by TokenReview.
type Reviewed struct {
	Environment string
	envfile.TokenReview
}

// View is one version of environments.yaml as the execution role uses it.
type View struct {
	byID    map[string]domain.Environment
	ids     []string
	keys    *auth.KeyStore
	reviews []Reviewed
}

// NewView derives the execution role's view of set. It fails, joining
// every fault and naming the environment, when a TokenReview kubeconfig
// cannot be read (the field this role uses; the provisioning role reads
// the same file without it).
func NewView(set *envfile.Set) (*View, error) {
	v := &View{byID: map[string]domain.Environment{}, ids: set.IDs()}
	var keys auth.KeysFile
	var errs []error
	for _, e := range set.All() {
		v.byID[e.ID] = domain.Environment{ID: e.ID, Site: e.Site, Authority: e.Authority, Backend: e.Backend}
		switch {
		case e.Auth.KeySHA256 != "":
			keys.Keys = append(keys.Keys, auth.KeyEntry{Principal: auth.KindEnvironment + ":" + e.ID, SHA256: e.Auth.KeySHA256})
		case e.Auth.TokenReview != nil:
			if _, err := os.Stat(e.Auth.TokenReview.Kubeconfig); err != nil {
				errs = append(errs, fmt.Errorf("environment %s: auth.tokenreview.kubeconfig: %w", e.ID, err))
				continue
			}
			v.reviews = append(v.reviews, Reviewed{Environment: e.ID, TokenReview: *e.Auth.TokenReview})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	ks, err := auth.NewKeyStore(keys)
	if err != nil {
		return nil, err
	}
	v.keys = ks
	return v, nil
}

// Environment implements application.Environments.
func (v *View) Environment(id string) (domain.Environment, bool) {
	e, ok := v.byID[id]
	return e, ok
}

// IDs returns the environment IDs, sorted.
func (v *View) IDs() []string { return slices.Clone(v.ids) }

// Keys returns the authenticator of the static environment keys
// (principal environment:<id>).
func (v *View) Keys() *auth.KeyStore { return v.keys }

// TokenReviews returns the environments authenticated by TokenReview.
func (v *View) TokenReviews() []Reviewed { return slices.Clone(v.reviews) }

// Current is the view in use and the authenticator of its Runtimes,
// replaced together (Store). Its methods read the version in use at the
// call: an environment removed from the file is unknown, and its
// Runtime's credential refused, from the first request after the reload.
type Current struct {
	p atomic.Pointer[inUse]
}

type inUse struct {
	view     *View
	runtimes auth.Authenticator
}

// Store puts view in use with runtimes, the authenticator of its Runtimes
// (its static keys, then its TokenReviews).
func (c *Current) Store(view *View, runtimes auth.Authenticator) {
	c.p.Store(&inUse{view: view, runtimes: runtimes})
}

// View returns the view in use.
func (c *Current) View() *View { return c.p.Load().view }

// Environment implements application.Environments.
func (c *Current) Environment(id string) (domain.Environment, bool) { return c.View().Environment(id) }

// IDs implements application.Environments.
func (c *Current) IDs() []string { return c.View().IDs() }

// Authenticate implements auth.Authenticator with the Runtimes'
// authenticator in use.
func (c *Current) Authenticate(ctx context.Context, token string) (auth.Principal, error) {
	return c.p.Load().runtimes.Authenticate(ctx, token)
}
