package executionports

import (
	"go.uber.org/fx"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/inprocessowners"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
)

// ownerPorts are the owner ports one owner adaptor answers
// (docs/execution-ports.md#owner-adaptors): allocations, member accounts
// and member bindings, and the change feed, all from resource_provisioning.
type ownerPorts struct {
	fx.Out
	Resources application.ProjectResources
	Accounts  application.MemberAccounts
	Bindings  application.MemberBindings
	Feed      application.BindingFeed
}

// owner is what an owner adaptor implements.
type owner interface {
	application.ProjectResources
	application.MemberAccounts
	application.MemberBindings
	application.BindingFeed
}

func portsOf(o owner) ownerPorts { return ownerPorts{Resources: o, Accounts: o, Bindings: o, Feed: o} }

// ownerAdaptors returns the constructor of the owner ports' adaptor cfg
// chooses (Config.Validate has accepted cfg).
func ownerAdaptors(cfg Config) any {
	if cfg.ResourceOwner == OwnerInProcess {
		return func(p inprocessowners.Params) (ownerPorts, error) {
			r, err := inprocessowners.FromFx(p)
			if err != nil {
				return ownerPorts{}, err
			}
			return portsOf(r), nil
		}
	}
	return func() (ownerPorts, error) {
		r, err := NewHTTPOwner(cfg.ProvisioningURL, cfg.ProvisioningKeyFile, cfg.ProvisioningCAFile)
		if err != nil {
			return ownerPorts{}, err
		}
		return portsOf(r), nil
	}
}
