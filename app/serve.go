package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/environments"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/servingtls"
)

func newServeCommand(env Env) *cobra.Command {
	roles := env.Roles()
	var (
		roleNames       []string
		common          Common
		logs            logFlags
		environmentSite *config.Removed
	)
	cmd := &cobra.Command{
		Use:   "serve --role ROLE[,ROLE]",
		Short: "Serve one or more roles: " + joinNames(roles.Names()),
		Long: `Serve the chosen roles in this process. Central roles (provisioning,
execution) share one public API and one keys file, each with its own database.
The runtime role runs alone. Every flag has a METALLO_* environment equivalent
(--provisioning-database-url is METALLO_PROVISIONING_DATABASE_URL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every fault of the flags is named at once: the variables',
			// the common flags' and each selected role's (its context's
			// Config.Validate).
			var faults []error
			if err := bindEnv(cmd, env); err != nil {
				faults = append(faults, err)
			}
			selected, err := roles.Select(roleNames)
			if err != nil {
				return errors.Join(append(faults, err)...)
			}
			faults = append(faults, environmentSite.Err(), refuseForeignFlags(cmd, roles, selected))
			if common.BodyReadTimeout <= 0 {
				faults = append(faults, config.Invalid("body-read-timeout", common.BodyReadTimeout.String(), errors.New("must be a positive duration, e.g. 10s")))
			}
			if common.AdminProfiling && common.AdminListen == "" {
				faults = append(faults, config.Invalid("admin-profiling", "true", errors.New("needs an admin listener; --admin-listen is empty")))
			}
			faults = append(faults, checkListeners(cmd, selected, common))
			log, err := logs.build()
			if err != nil {
				return errors.Join(append(faults, err)...)
			}
			defer func() { _ = log.Sync() }()
			for _, r := range selected {
				if r.Preflight != nil {
					faults = append(faults, r.Preflight(log.With(zap.String("context", r.Context))))
				}
			}
			if err := errors.Join(faults...); err != nil {
				return err
			}
			build := buildinfo.Read()
			log.Info("starting", zap.Strings("roles", namesOf(selected)), zap.String("version", build.Version), zap.String("revision", build.Revision))
			err = runApp(cmd.Context(), Compose(selected, common, log), common.StopTimeout)
			if errors.Is(err, database.ErrPendingMigrations) {
				// Start stops at the first context it finds behind; name
				// every one, so one `metallo migrate` fixes them all.
				if all := checkMigrated(cmd.Context(), selected, log); all != nil {
					return all
				}
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&roleNames, "role", nil, "roles to serve, comma separated: "+joinNames(roles.Names()))
	fs.StringVar(&common.Listen, "listen", "127.0.0.1:8080", "public API listen address (central roles)")
	fs.StringVar(&common.AdminListen, "admin-listen", "127.0.0.1:9090", "admin listener for Prometheus /metrics; empty disables it")
	fs.BoolVar(&common.AdminProfiling, "admin-profiling", false, "also serve Go's runtime profiles (net/http/pprof) at /debug/pprof/ on the admin listener")
	fs.StringVar(&common.KeysFile, auth.KeysFlag, "keys.yaml", "keys file: principals and the SHA-256 of their bearer keys (central roles; re-read when it changes)")
	fs.StringVar(&common.EnvironmentsFile, environments.Flag, "environments.yaml", "environments.yaml: each execution environment's Site, authority, backend and how its Runtime authenticates (central roles: both read it; re-read when it changes)")
	fs.StringVar(&common.TLS.CertFile, servingtls.CertFlag, "", "PEM certificate chain the public API and the admin listener serve (central roles), re-read when it changes; with --tls-key-file")
	fs.StringVar(&common.TLS.KeyFile, servingtls.KeyFlag, "", "PEM private key of --tls-cert-file (central roles), re-read when it changes")
	fs.BoolVar(&common.Migrate, "migrate", false, "apply pending database migrations at start")
	fs.DurationVar(&common.BodyReadTimeout, "body-read-timeout", httpserver.DefaultBodyReadTimeout, "how long a request body may take to arrive after its headers, on every route of the public API (central roles); later is 408")
	fs.DurationVar(&common.StartTimeout, "start-timeout", 60*time.Second, "bound on start-up")
	fs.DurationVar(&common.StopTimeout, "stop-timeout", 30*time.Second, "bound on graceful shutdown")
	// The provisioning role's --environment-site is gone: environments.yaml is
	// the one description of an environment (docs/operations.md#upgrades).
	environmentSite = config.RemovedFlag(fs, EnvironmentSiteFlag,
		"each environment's Site is read from environments.yaml (--"+environments.Flag+", "+config.EnvName(environments.Flag)+"), the file the execution role reads; "+
			"give the provisioning role that file and move each <environment>=<site> to its entry's site (docs/operations.md#upgrades)")
	logs.register(fs)
	for _, r := range roles {
		if r.Flags != nil {
			r.Flags(fs)
		}
	}
	return cmd
}

// EnvironmentSiteFlag is the provisioning role's flag removed by the one
// environments file: serve refuses a start that still gives it, whatever
// the roles.
const EnvironmentSiteFlag = "environment-site"

// checkListeners applies the listener rule of the central roles
// (docs/operations.md#tls): the TLS pair is both flags or neither and
// loads, and without it --listen and --admin-listen must be loopback
// addresses. The runtime role has no public API and is refused the TLS
// flags; its admin listener is guarded by the cluster's network policy.
func checkListeners(cmd *cobra.Command, selected []Role, c Common) error {
	if !selected[0].Central {
		var errs []error
		for _, f := range []string{servingtls.CertFlag, servingtls.KeyFlag} {
			if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
				errs = append(errs, config.Invalid(f, fl.Value.String(), fmt.Errorf("role %s serves no public API; remove --%s", selected[0].Name, f)))
			}
		}
		return errors.Join(errs...)
	}
	if err := c.TLS.Check(); err != nil {
		return err
	}
	return errors.Join(servingtls.CheckListen("listen", c.Listen, c.TLS), servingtls.CheckListen("admin-listen", c.AdminListen, c.TLS))
}

// refuseForeignFlags fails when a database flag of a role that is not
// selected was given (on the command line or in the environment) to a
// process serving a role without a platform database (the runtime), so a
// Runtime can never be handed a platform database by mistake.
func refuseForeignFlags(cmd *cobra.Command, all RoleSet, selected []Role) error {
	for _, s := range selected {
		if s.Central {
			return nil
		}
	}
	var errs []error
	for _, r := range all {
		for _, f := range r.DatabaseFlags {
			if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
				errs = append(errs, config.Invalid(f, fl.Value.String(), fmt.Errorf("role %s has no platform database; remove --%s", selected[0].Name, f)))
			}
		}
	}
	return errors.Join(errs...)
}

// checkMigrated checks every selected role's database for pending
// migrations and returns one error naming all the contexts that have some
// (wrapping database.ErrPendingMigrations). Other failures (a database that
// cannot be reached) are left to the start itself, which reports them.
func checkMigrated(ctx context.Context, roles []Role, log *zap.Logger) error {
	var pending []error
	var names []string
	for _, r := range roles {
		if r.CheckMigrated == nil {
			continue
		}
		err := r.CheckMigrated(ctx, log.With(zap.String("context", r.Context)))
		if errors.Is(err, database.ErrPendingMigrations) {
			pending = append(pending, err)
			names = append(names, r.Name)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return fmt.Errorf("%d context(s) have pending migrations; run `metallo migrate --role %s` or start with --migrate: %w",
		len(pending), strings.Join(names, ","), errors.Join(pending...))
}

func namesOf(rs []Role) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func joinNames(n []string) string {
	s := ""
	for i, x := range n {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}
