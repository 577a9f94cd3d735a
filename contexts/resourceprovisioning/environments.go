package resourceprovisioning

import (
	"errors"
	"maps"
	"slices"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/platform/config"
)

// EnvironmentSiteFlag names the flag of Config.Environments.
const EnvironmentSiteFlag = "environment-site"

// validateEnvironments checks --environment-site: every entry is
// <environment>=<site>, both IDs of 1–128 letters, digits, '.', '_' or '-'
// starting with a letter or digit (as environments.yaml and the Site keys
// name them). An empty map is valid: no environment is configured, so no
// account report names a binding the agent's Site owns and the lookup
// answers no_environment.
func (c Config) validateEnvironments() error {
	for _, env := range slices.Sorted(maps.Keys(c.Environments)) {
		site := c.Environments[env]
		switch {
		case !application.ValidID(env):
			return config.Invalid(EnvironmentSiteFlag, env+"="+site, errors.New("the environment is not an environment ID (1–128 letters, digits, '.', '_' or '-', starting with a letter or digit)"))
		case !application.ValidID(site):
			return config.Invalid(EnvironmentSiteFlag, env+"="+site, errors.New("the Site is not a Site ID (1–128 letters, digits, '.', '_' or '-', starting with a letter or digit); write <environment>=<site>"))
		}
	}
	return nil
}
