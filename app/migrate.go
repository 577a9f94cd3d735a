package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
database (version table goose_<context>). Takes serve's database URL flags
(and the logging flags), nothing else.`,
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
	// Only roles with a platform database take part, and of their flags only
	// the database ones are migrate's: the others are registered on a set of
	// their own (so their defaults are set) and never offered or listed.
	for _, r := range roles {
		if r.Flags == nil || r.Migrate == nil {
			continue
		}
		all := pflag.NewFlagSet(r.Name, pflag.ContinueOnError)
		r.Flags(all)
		for _, name := range r.DatabaseFlags {
			if f := all.Lookup(name); f != nil {
				cmd.Flags().AddFlag(f)
			}
		}
	}
	return cmd
}
