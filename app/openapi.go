package app

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// OpenAPIYAML returns the OpenAPI 3.1 document of the given roles (the
// union, as a multi-role process serves it) in YAML.
func OpenAPIYAML(roles []Role) ([]byte, error) {
	api := httpserver.NewAPI(http.NewServeMux(), Title(roles))
	for _, r := range roles {
		if r.OpenAPI != nil {
			r.OpenAPI(api)
		}
	}
	b, err := api.OpenAPI().YAML()
	if err != nil {
		return nil, fmt.Errorf("encode openapi: %w", err)
	}
	return b, nil
}

func newOpenAPICommand(env Env) *cobra.Command {
	roles := env.Roles()
	var names []string
	cmd := &cobra.Command{
		Use:   "openapi --role ROLE",
		Short: "Print the OpenAPI 3.1 document (YAML) of a role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			selected, err := roles.Select(names)
			if err != nil {
				return err
			}
			for _, r := range selected {
				if r.OpenAPI == nil {
					return config.Invalid("role", r.Name, fmt.Errorf("role %s serves no HTTP API, so it has no OpenAPI document", r.Name))
				}
			}
			b, err := OpenAPIYAML(selected)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringSliceVar(&names, "role", nil, "role(s): "+joinNames(roles.Names()))
	return cmd
}
