package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

func newMigrateCommand(env Env) *cobra.Command {
	roles := env.Roles()
	var (
		names []string
		logs  logFlags
	)
	cmd := &cobra.Command{
		Use:   "migrate --role ROLE[,ROLE]",
		Short: "Apply pending database migrations of the roles' contexts",
		Long: `Apply the embedded goose migrations of each chosen role's context to its own
database (version table goose_<context>). Takes the same database flags as serve.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, env); err != nil {
				return err
			}
			selected, err := roles.Select(names)
			if err != nil {
				return err
			}
			log, err := logs.build()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			for _, r := range selected {
				if r.Migrate == nil {
					return fmt.Errorf("role %s has no platform database to migrate", r.Name)
				}
				if err := r.Migrate(cmd.Context(), log.With(zap.String("context", r.Context))); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&names, "role", nil, "role(s): "+joinNames(roles.Names()))
	logs.register(cmd.Flags())
	// Only roles with a platform database take part: their flags (the
	// database URLs among them) are the ones migrate reads.
	for _, r := range roles {
		if r.Flags != nil && r.Migrate != nil {
			r.Flags(cmd.Flags())
		}
	}
	return cmd
}
