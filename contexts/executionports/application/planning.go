package application

import (
	"context"
	"errors"
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// Planner answers capacity plans (docs/execution-ports.md#capacity-planning) from the owner's
// live allocations: the environment maps to its Site, the owner
// (ProjectResources) answers the Project's allocations there, and
// domain.PlanCapacity decides.
type Planner struct {
	envs      Environments
	resources ProjectResources
}

// NewPlanner returns a Planner reading allocations through resources.
func NewPlanner(envs Environments, resources ProjectResources) *Planner {
	return &Planner{envs: envs, resources: resources}
}

// Plan plans demand (canonical units) for projectID at environment. It
// returns an error wrapping domain.ErrUnknownEnvironment for an environment
// not configured, and one wrapping ErrResourceLookupUnavailable when the
// owner cannot be read (the caller answers "unavailable").
func (p *Planner) Plan(ctx context.Context, projectID, environment string, demand map[string]int64) (domain.Plan, error) {
	env, ok := p.envs.Environment(environment)
	if !ok {
		return domain.Plan{}, fmt.Errorf("%w: %q is not configured", domain.ErrUnknownEnvironment, environment)
	}
	allocations, err := p.resources.ProjectAllocations(ctx, projectID, env.Site)
	if err != nil {
		if !errors.Is(err, ErrResourceLookupUnavailable) {
			err = fmt.Errorf("%w: %w", ErrResourceLookupUnavailable, err)
		}
		return domain.Plan{Answer: domain.PlanUnavailable}, fmt.Errorf("read allocations of project %s at site %s: %w", projectID, env.Site, err)
	}
	return domain.PlanCapacity(allocations, demand), nil
}
