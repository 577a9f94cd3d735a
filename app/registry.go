package app

import "github.com/spf13/cobra"

// DefaultRoles returns the roles of the metallo binary, each with fresh
// configuration. Each context contributes its role here.
func DefaultRoles() RoleSet {
	return RoleSet{
		ProvisioningRole(),
		ExecutionRole(),
		RuntimeRole(),
	}
}

// extraCommands returns the context-specific operator commands
// (`metallo provisioning …`, `metallo runtime …`).
func extraCommands(env Env) []*cobra.Command {
	return []*cobra.Command{
		newProvisioningCommand(env),
		newRuntimeCommand(env),
		newWorkspaceInitCommand(env),
		newWorkspaceReadCommand(env),
		newCtlCommand(env),
	}
}
