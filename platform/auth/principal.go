// Package auth authenticates bearer credentials to principals.
//
// Principals are "site:<id>" (a Site's agent), "environment:<id>" (a Site
// Runtime for one execution environment), "service:<name>" (a central
// service such as Execution or the Beto event intake) and
// "operator:<name>" (a person or tool that reads the streams without
// changing them; docs/operations.md#operator-reads). Static keys are held
// only as SHA-256 hashes in a keys file (keys.yaml) and compared in constant
// time; other authenticators (Kubernetes TokenReview) plug in through the
// Authenticator interface (docs/architecture.md#configuration-files).
package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Principal kinds.
const (
	KindSite        = "site"
	KindEnvironment = "environment"
	KindService     = "service"
	// KindOperator reads the execution role's operator routes and may
	// change nothing (docs/operations.md#operator-reads).
	KindOperator = "operator"
)

// Principal is an authenticated caller: a kind and an identifier.
type Principal struct {
	Kind string
	ID   string
}

// String renders the principal as "<kind>:<id>".
func (p Principal) String() string { return p.Kind + ":" + p.ID }

// Is reports whether p is exactly kind:id.
func (p Principal) Is(kind, id string) bool { return p.Kind == kind && p.ID == id }

var principalID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ErrBadPrincipal is wrapped by ParsePrincipal's errors.
var ErrBadPrincipal = errors.New("bad principal")

// ParsePrincipal parses "<kind>:<id>". The kind must be site, environment,
// service or operator; the id 1–128 characters of letters, digits, '.', '_' and '-',
// starting with a letter or digit. It returns an error wrapping
// ErrBadPrincipal otherwise.
func ParsePrincipal(s string) (Principal, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok {
		return Principal{}, fmt.Errorf("%w %q: want <kind>:<id>", ErrBadPrincipal, s)
	}
	switch kind {
	case KindSite, KindEnvironment, KindService, KindOperator:
	default:
		return Principal{}, fmt.Errorf("%w %q: kind must be site, environment, service or operator", ErrBadPrincipal, s)
	}
	if !principalID.MatchString(id) {
		return Principal{}, fmt.Errorf("%w %q: id must match %s", ErrBadPrincipal, s, principalID)
	}
	return Principal{Kind: kind, ID: id}, nil
}

// ErrUnauthenticated is returned by an Authenticator that does not recognise
// a credential. It is never returned for an infrastructure failure (a
// TokenReview call that cannot be made), which is reported as another error.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator maps a bearer token to a principal.
type Authenticator interface {
	// Authenticate returns the principal the token stands for, an error
	// wrapping ErrUnauthenticated when the token is not recognised, or
	// another error when the check itself could not be made.
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// Chain tries each authenticator in turn and returns the first principal.
// An infrastructure error from one authenticator is remembered and returned
// only if no other authenticator recognises the token.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (Principal, error) {
	var infra error
	for _, a := range c {
		p, err := a.Authenticate(ctx, token)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, ErrUnauthenticated) && infra == nil {
			infra = err
		}
	}
	if infra != nil {
		return Principal{}, infra
	}
	return Principal{}, ErrUnauthenticated
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal stored by the HTTP middleware.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
