// Package inprocessowners is the in-process owner adaptor of execution_ports
// (docs/execution-ports.md#owner-adaptors): when resource_provisioning is composed in the
// same process, ProjectResources, MemberAccounts and MemberBindings call its
// application service directly — no HTTP, no shared tables. This is the one import across contexts the
// architecture test allows (adaptors/inprocess* → the owner's application).
package inprocessowners

import (
	"context"
	"fmt"

	"go.uber.org/fx"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	rpapp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
)

// OwnerName is the context that owns allocations and member accounts.
const OwnerName = "resource_provisioning"

// Provisioning is what this adaptor needs of the owner's application
// service (*rpapp.Service satisfies it).
type Provisioning interface {
	ProjectAllocations(ctx context.Context, projectID, site string) ([]rpapp.AllocationView, error)
	ProjectAccounts(ctx context.Context, projectID, site, partyID string) ([]rpapp.AccountView, error)
	DesiredBindings(ctx context.Context, environment, after string, limit int) (rpapp.BindingPage, error)
	Allocations(ctx context.Context, after string, limit int) (rpapp.AllocationPage, error)
	Changes(ctx context.Context, after int64, limit int) (rpapp.ChangePage, error)
}

// Resources implements application.ProjectResources, MemberAccounts,
// MemberBindings and BindingFeed in process.
type Resources struct {
	owner Provisioning
}

var (
	_ application.ProjectResources = (*Resources)(nil)
	_ application.MemberAccounts   = (*Resources)(nil)
	_ application.MemberBindings   = (*Resources)(nil)
)

// New returns the adaptor calling owner.
func New(owner Provisioning) *Resources { return &Resources{owner: owner} }

// ProjectAllocations implements application.ProjectResources: the owner's
// views, read live (its freshness is judged at this read). Any owner error
// (its store unreachable, a refused request) is
// application.ErrResourceLookupUnavailable: planning never guesses.
func (r *Resources) ProjectAllocations(ctx context.Context, projectID, site string) ([]domain.Allocation, error) {
	views, err := r.owner.ProjectAllocations(ctx, projectID, site)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", application.ErrResourceLookupUnavailable, OwnerName, err)
	}
	out := make([]domain.Allocation, 0, len(views))
	for _, v := range views {
		out = append(out, domain.Allocation{
			ID: v.ID, Site: v.Site, ProjectID: v.ProjectID,
			Lifecycle: domain.Lifecycle(v.Lifecycle), Reasons: v.Reasons,
			AppliedLimits: v.AppliedLimits, ConfiguredLimits: v.ConfiguredLimits,
			LastSeenAt: v.LastSeenAt, Fresh: v.Fresh,
		})
	}
	return out, nil
}

// Params are the Fx inputs of FromFx: the owner's application service,
// present only when the provisioning role is composed in the process.
type Params struct {
	fx.In
	Owner *rpapp.Service `optional:"true"`
}

// FromFx builds the adaptor in an Fx graph. It fails, saying what to do,
// when resource_provisioning is not composed in the same process.
func FromFx(p Params) (*Resources, error) {
	if p.Owner == nil {
		return nil, fmt.Errorf("--resource-owner in-process needs the %s context in this process: serve --role provisioning,execution, or read the owner over HTTP with --resource-owner http --provisioning-url URL --provisioning-key-file FILE", OwnerName)
	}
	return New(p.Owner), nil
}
