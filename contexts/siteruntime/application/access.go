package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Access is the check before every native start
// (docs/site-runtime.md#access-before-every-native-start): the binding for the command's account
// reference must be stored and current (same generation, not retired) for
// the command's member and Project; the binding's namespace must carry the
// command's Project in its project-id label; the live service account the
// binding names must carry the binding's account UID (by name only for a
// binding applied without one; docs/site-protocol.md#the-accounts-uid-in-a-binding);
// the permission provider must
// allow the action now (a fresh answer, used only before its valid_until).
// Each refusal is a refused Answer with its precise reason, and nothing may
// be created after one.
type Access struct {
	bindings    MemberBindings
	namespaces  ProjectNamespaces
	permissions RuntimePermissions
	clock       Clock
}

// NewAccess returns the access check.
func NewAccess(b MemberBindings, ns ProjectNamespaces, p RuntimePermissions, c Clock) *Access {
	return &Access{bindings: b, namespaces: ns, permissions: p, clock: c}
}

// Binding returns the binding stored for cmd's account reference, current
// or not (recovery renders an object that may have been created before the
// binding was retired). The refusal is binding-missing when no binding of
// the command's member and Project is stored.
func (a *Access) Binding(ctx context.Context, cmd siteprotocol.Command) (domain.MemberBinding, *domain.Answer, error) {
	if cmd.AccountRef == nil {
		return domain.MemberBinding{}, domain.DecideBinding(cmd, domain.MemberBinding{}, false), nil
	}
	b, found, err := a.bindings.Resolve(ctx, *cmd.AccountRef)
	if err != nil {
		return domain.MemberBinding{}, nil, fmt.Errorf("resolve binding %s: %w", cmd.AccountRef.BindingID, err)
	}
	if r := domain.DecideBinding(cmd, b, found); r != nil && r.Reason == siteprotocol.ReasonBindingMissing {
		return domain.MemberBinding{}, r, nil
	}
	return b, nil, nil
}

// Authorize checks, for a new native start under binding b, that b is
// current, that b's namespace belongs to the command's Project, and that
// the provider allows action now. It returns the identity to create as,
// or the refusal.
func (a *Access) Authorize(ctx context.Context, cmd siteprotocol.Command, b domain.MemberBinding, action domain.PermissionAction) (domain.StartIdentity, *domain.Answer, error) {
	_, id, refusal, err := a.authorize(ctx, cmd, b, action)
	return id, refusal, err
}

// authorize is Authorize, also returning the permission answer it used.
func (a *Access) authorize(ctx context.Context, cmd siteprotocol.Command, b domain.MemberBinding, action domain.PermissionAction) (domain.Permission, domain.StartIdentity, *domain.Answer, error) {
	var none domain.Permission
	if r := domain.DecideBinding(cmd, b, true); r != nil {
		return none, domain.StartIdentity{}, r, nil
	}
	project, labelled, err := a.namespaces.NamespaceProject(ctx, b.Namespace)
	if err != nil {
		return none, domain.StartIdentity{}, nil, fmt.Errorf("read namespace %s: %w", b.Namespace, err)
	}
	if r := domain.DecideNamespace(b.Namespace, project, labelled, cmd.ProjectID); r != nil {
		return none, domain.StartIdentity{}, r, nil
	}
	uid, found, err := a.namespaces.MemberAccountUID(ctx, b.Namespace, b.Account)
	if err != nil {
		return none, domain.StartIdentity{}, nil, fmt.Errorf("read service account %s/%s: %w", b.Namespace, b.Account, err)
	}
	if r := domain.DecideAccount(b, uid, found); r != nil {
		return none, domain.StartIdentity{}, r, nil
	}
	q := domain.PermissionQuery{MemberID: cmd.MemberID, ProjectID: cmd.ProjectID, Action: action, RunID: cmd.RunID, AttemptID: cmd.AttemptID}
	p, err := a.permissions.Check(ctx, q)
	switch {
	case errors.Is(err, ErrPermissionUnavailable):
		r := domain.Refused(siteprotocol.ReasonPermissionUnavailable, "no current permission answer for member %s: %v", cmd.MemberID, err)
		return none, domain.StartIdentity{}, &r, nil
	case err != nil:
		return none, domain.StartIdentity{}, nil, fmt.Errorf("permission check: %w", err)
	}
	if r := domain.DecidePermission(q, p, a.clock.Now()); r != nil {
		return none, domain.StartIdentity{}, r, nil
	}
	id := domain.StartIdentityOf(b)
	id.EvidenceID = p.EvidenceID
	return p, id, nil, nil
}

// StartAccess is one command's access check, performed at most once
// however many objects the command creates
// (docs/site-runtime.md#access-before-every-native-start): the first
// Identity runs Access.Authorize and keeps its identity or refusal; later
// calls answer the same without reading the API server or asking the
// provider again, except that the kept permission answer is used only
// before its valid_until (once past it, permission-unavailable). An
// application start so checks once before its Deployment and reuses the
// identity for its Service. A command that only adopts what it created
// before a crash never checks. An error is not kept: the next Identity
// checks again. A StartAccess belongs to one command's execution and is
// not safe for concurrent use.
type StartAccess struct {
	access *Access
	cmd    siteprotocol.Command
	b      domain.MemberBinding
	action domain.PermissionAction

	checked bool
	id      domain.StartIdentity
	refusal *domain.Answer
	q       domain.PermissionQuery
	p       domain.Permission
}

// Start returns cmd's access check under binding b for a native start
// (domain.ActionStart), not yet performed.
func (a *Access) Start(cmd siteprotocol.Command, b domain.MemberBinding) *StartAccess {
	return &StartAccess{access: a, cmd: cmd, b: b, action: domain.ActionStart}
}

// Binding is the binding the check runs under.
func (s *StartAccess) Binding() domain.MemberBinding { return s.b }

// Identity returns the identity to create as, or the refusal; see
// StartAccess. Errors are Access.Authorize's.
func (s *StartAccess) Identity(ctx context.Context) (domain.StartIdentity, *domain.Answer, error) {
	if !s.checked {
		p, id, refusal, err := s.access.authorize(ctx, s.cmd, s.b, s.action)
		if err != nil {
			return domain.StartIdentity{}, nil, err
		}
		s.checked, s.id, s.refusal, s.p = true, id, refusal, p
		s.q = domain.PermissionQuery{MemberID: s.cmd.MemberID, ProjectID: s.cmd.ProjectID, Action: s.action, RunID: s.cmd.RunID, AttemptID: s.cmd.AttemptID}
		return s.id, s.refusal, nil
	}
	if s.refusal != nil {
		return domain.StartIdentity{}, s.refusal, nil
	}
	if r := domain.DecidePermission(s.q, s.p, s.access.clock.Now()); r != nil {
		return domain.StartIdentity{}, r, nil
	}
	return s.id, nil, nil
}
