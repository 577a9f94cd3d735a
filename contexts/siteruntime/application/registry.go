package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Registry routes each command to the executor registered for its
// operation and family, after the checks every command gets:
//   - a command larger than siteprotocol.MaxCommandBytes is refused
//     payload-too-large;
//   - an operation outside the protocol's vocabulary is refused
//     unsupported-operation;
//   - a known operation with a payload that breaks its rules at the
//     Runtime's backend (kubernetes unless ForBackend says otherwise;
//     docs/site-protocol.md#member-identity-by-backend) is refused
//     invalid-payload;
//   - a workload command of a family the Runtime's backend does not run
//     (siteprotocol.Backend.Families: a slurm Runtime runs batch only),
//     which append refuses but a stream may hold from before that rule,
//     is refused unsupported-operation;
//   - a known operation without an executor for its family (one not built
//     into this binary) is refused unsupported-operation.
//
// Refusals are pure functions of the command, so Recover gives the same
// answer as Execute (docs/site-runtime.md#the-ordered-worker,
// docs/site-runtime.md#recovery-per-operation-and-family).
type Registry struct {
	routes  map[route]CommandExecutor
	backend siteprotocol.Backend
}

// ForBackend returns a registry with r's routes that holds payloads to the
// rules of backend b (a bind-member's account, uid and namespace differ by
// backend) and refuses the families b does not run.
func (r *Registry) ForBackend(b siteprotocol.Backend) *Registry {
	out := *r
	out.backend = b
	return &out
}

type route struct {
	op     siteprotocol.Operation
	family siteprotocol.Family
}

// ErrDuplicateRoute is returned by NewRegistry when two registrations of
// the same kind claim one route.
var ErrDuplicateRoute = errors.New("two executors for one route")

// NewRegistry builds a registry. A route is (operation, family); an empty
// family serves commands of every family that have no route of their own.
// An Override registration replaces a plain one. It fails with
// ErrDuplicateRoute when two plain (or two override) registrations claim
// the same route, or when a registration has no executor.
func NewRegistry(regs ...Registration) (*Registry, error) {
	r := &Registry{routes: map[route]CommandExecutor{}, backend: siteprotocol.BackendKubernetes}
	overridden := map[route]bool{}
	for _, reg := range regs {
		if reg.Executor == nil {
			return nil, fmt.Errorf("%w: %s/%s has no executor", ErrDuplicateRoute, reg.Operation, reg.Family)
		}
		k := route{reg.Operation, reg.Family}
		_, taken := r.routes[k]
		switch {
		case reg.Override && overridden[k]:
			return nil, fmt.Errorf("%w: two overrides of %s/%s", ErrDuplicateRoute, reg.Operation, reg.Family)
		case reg.Override:
			overridden[k] = true
			r.routes[k] = reg.Executor
		case taken && !overridden[k]:
			return nil, fmt.Errorf("%w: %s/%s", ErrDuplicateRoute, reg.Operation, reg.Family)
		case !taken:
			r.routes[k] = reg.Executor
		}
	}
	return r, nil
}

// Execute answers the pending command p for the first time.
func (r *Registry) Execute(ctx context.Context, p *domain.Pending) (domain.Answer, error) {
	exec, refusal := r.route(p)
	if refusal != nil {
		return *refusal, nil
	}
	return exec.Execute(ctx, p.Command)
}

// Recover answers the pending command p whose effect is uncertain.
func (r *Registry) Recover(ctx context.Context, p *domain.Pending) (domain.Answer, error) {
	exec, refusal := r.route(p)
	if refusal != nil {
		return *refusal, nil
	}
	return exec.Recover(ctx, p.Command)
}

func (r *Registry) route(p *domain.Pending) (CommandExecutor, *domain.Answer) {
	cmd := p.Command
	refuse := func(reason siteprotocol.Reason, format string, args ...any) (CommandExecutor, *domain.Answer) {
		a := domain.Refused(reason, format, args...)
		return nil, &a
	}
	if len(p.Raw) > siteprotocol.MaxCommandBytes {
		return refuse(siteprotocol.ReasonPayloadTooLarge, "command is %d bytes; the limit is %d", len(p.Raw), siteprotocol.MaxCommandBytes)
	}
	if !cmd.Operation.Known() {
		return refuse(siteprotocol.ReasonUnsupportedOperation, "operation %q is not part of the Site protocol", cmd.Operation)
	}
	if cmd.Operation == siteprotocol.OpReadFile {
		// A read-file path that could leave the workspace (absolute, ..)
		// is path-rejected, not a malformed payload
		// (docs/site-protocol.md#private-reads).
		if rf, err := siteprotocol.DecodePayload[siteprotocol.ReadFilePayload](cmd); err == nil && !siteprotocol.SafeRelativePath(rf.Path) {
			return refuse(siteprotocol.ReasonPathRejected, "read-file path %q is not a clean relative path inside the workspace (absolute, .., or an empty name); nothing was read", rf.Path)
		}
	}
	if err := siteprotocol.ValidatePayloadFor(cmd, r.backend); err != nil {
		return refuse(siteprotocol.ReasonInvalidPayload, "%s payload: %v", cmd.Operation, err)
	}
	if cmd.Family.Valid() && cmd.Operation.NeedsFamily() && !r.backend.Runs(cmd.Family) {
		// Append refuses it; a command stored before that rule is answered,
		// never a stop (docs/site-protocol.md#families-by-backend).
		return refuse(siteprotocol.ReasonUnsupportedOperation, "a %s Runtime does not run %s workloads; it runs %s", r.backend, cmd.Family, siteprotocol.JoinFamilies(r.backend.Families()))
	}
	if exec, ok := r.routes[route{cmd.Operation, cmd.Family}]; ok {
		return exec, nil
	}
	if exec, ok := r.routes[route{cmd.Operation, ""}]; ok {
		return exec, nil
	}
	if cmd.Family != "" {
		return refuse(siteprotocol.ReasonUnsupportedOperation, "this Runtime has no executor for %s of family %s", cmd.Operation, cmd.Family)
	}
	return refuse(siteprotocol.ReasonUnsupportedOperation, "this Runtime has no executor for %s", cmd.Operation)
}
