package application

import (
	"context"
	"errors"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// Errors of RepositoryGrants.
var (
	// ErrGrantUnavailable is returned (wrapped) when the provider gave no
	// usable answer within the adaptor's bound (retries included); a
	// prepare is refused credential-unavailable.
	ErrGrantUnavailable = errors.New("repository grant provider unavailable")
	// ErrGrantDenied is returned (wrapped, with the provider's reason) when
	// the provider refuses to issue the grant: the member may not read the
	// repository. A prepare is refused permission-denied.
	ErrGrantDenied = errors.New("repository grant denied")
)

// RepositoryGrants issues and revokes scoped, short-lived read credentials
// for a member's repository (docs/site-runtime.md#repository-grants). It
// is a provider outside this project: an HTTP client of the documented
// contract, or a file of Site credentials for standalone Sites.
type RepositoryGrants interface {
	// Issue returns the grant for req. The same req.IdempotencyKey always
	// answers the same grant. Errors wrap ErrGrantDenied or
	// ErrGrantUnavailable; any other error only when ctx ends or req is
	// invalid.
	Issue(ctx context.Context, req domain.GrantRequest) (domain.RepositoryGrant, error)
	// Revoke withdraws the grant so that the repository host refuses its
	// token. It is idempotent: an unknown or already revoked grant is
	// revoked. Errors wrap ErrGrantUnavailable, or are ctx's.
	Revoke(ctx context.Context, grantID string) error
}
