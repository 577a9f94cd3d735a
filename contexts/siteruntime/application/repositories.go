package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
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

// GrantKey is the idempotency key of the read grant for an Attempt's
// workspace checkout: the same for every retry and every recovery of that
// Attempt, so that one Attempt never holds two grants.
func GrantKey(attemptID string) string { return "workspace-checkout:" + attemptID }

// IssueCheckoutGrant asks grants for the read grant of cmd's repository
// (its member, Project, Run and Attempt, keyed by GrantKey). A provider
// that denies it is a refused / permission-denied Answer; one that gave no
// usable answer within its bound is refused / credential-unavailable
// (docs/site-protocol.md#repository-checkout-reasons). Other errors are
// returned (ctx ended, or an invalid request).
func IssueCheckoutGrant(ctx context.Context, grants RepositoryGrants, cmd siteprotocol.Command, repositoryURL string) (domain.RepositoryGrant, *domain.Answer, error) {
	req := domain.GrantRequest{MemberID: cmd.MemberID, ProjectID: cmd.ProjectID, RepositoryURL: repositoryURL,
		RunID: cmd.RunID, AttemptID: cmd.AttemptID, IdempotencyKey: GrantKey(cmd.AttemptID)}
	g, err := grants.Issue(ctx, req)
	switch {
	case errors.Is(err, ErrGrantDenied):
		a := domain.Refused(siteprotocol.ReasonPermissionDenied, "member %s may not read %s: %v", cmd.MemberID, repositoryURL, err)
		return domain.RepositoryGrant{}, &a, nil
	case errors.Is(err, ErrGrantUnavailable):
		a := domain.Refused(siteprotocol.ReasonCredentialUnavailable, "no repository credential for member %s: %v", cmd.MemberID, err)
		return domain.RepositoryGrant{}, &a, nil
	case err != nil:
		return domain.RepositoryGrant{}, nil, fmt.Errorf("issue the repository grant: %w", err)
	}
	return g, nil, nil
}
