package app

import (
	"context"
	"fmt"

	"github.com/danielgtaylor/huma/v2"
	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
)

// ExecutionRole is the execution role: the execution_ports context (the
// Site protocol's server side, owner ports, capacity planning) on its own
// database. It needs an owner adaptor for resource_provisioning
// (--resource-owner); without one it refuses to start, naming the owner.
func ExecutionRole() Role {
	var (
		cfg      executionports.Config
		owner    string
		services []string
	)
	return Role{
		Name:    "execution",
		Context: executionports.Name,
		Central: true,
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.DatabaseURL, "execution-database-url", "", "execution_ports database: postgres://… or sqlite:<path> (default: the embedded SQLite file "+executionports.DefaultDatabasePath+")")
			fs.Int32Var(&cfg.MaxConns, "execution-database-max-conns", executionports.DefaultMaxConns, "most PostgreSQL connections of execution_ports (a waiting pull holds none)")
			fs.StringVar(&cfg.EnvironmentsFile, "environments-file", "environments.yaml", "environments.yaml: each execution environment's Site, authority and how its Runtime authenticates")
			fs.StringVar(&owner, "resource-owner", "", "how execution reads its owner resource_provisioning: in-process (with --role provisioning,execution) or http (with --provisioning-url and --provisioning-key-file); required")
			fs.StringVar(&cfg.ProvisioningURL, "provisioning-url", "", "base URL of the provisioning role's API, for --resource-owner http")
			fs.StringVar(&cfg.ProvisioningKeyFile, "provisioning-key-file", "", "file holding a service key of the provisioning role, for --resource-owner http")
			fs.DurationVar(&cfg.DeliveryInterval, "binding-delivery-interval", application.DefaultDeliveryInterval, "period of the full reconcile that delivers member bindings (bind-member / retire-member) to each environment's stream: a retirement is appended within about this bound (docs/execution-ports.md#delivery-of-member-bindings)")
			fs.StringSliceVar(&services, "execution-services", []string{httpapi.DefaultService}, "service principal IDs (service:<id> in keys.yaml) allowed on /execution/v1 routes")
		},
		Preflight: func(log *zap.Logger) error {
			target, err := database.ParseURL(cfg.DatabaseURL, executionports.DefaultDatabasePath)
			if err != nil {
				return config.Invalid("execution-database-url", cfg.DatabaseURL, err)
			}
			if target.Default {
				log.Info("using the embedded default SQLite " + target.Path + " (set --execution-database-url for PostgreSQL)")
			}
			if cfg.DeliveryInterval <= 0 {
				return config.Invalid("binding-delivery-interval", cfg.DeliveryInterval.String(), fmt.Errorf("must be positive"))
			}
			if cfg.MaxConns < 1 {
				return config.Invalid("execution-database-max-conns", fmt.Sprint(cfg.MaxConns), fmt.Errorf("must be at least 1"))
			}
			switch executionports.ResourceOwner(owner) {
			case executionports.OwnerRefusing, executionports.OwnerInProcess, executionports.OwnerHTTP:
			default:
				return config.Invalid("resource-owner", owner, fmt.Errorf("want in-process or http"))
			}
			return nil
		},
		Module: func(migrate bool) fx.Option {
			c := cfg
			c.Migrate = migrate
			c.ResourceOwner = executionports.ResourceOwner(owner)
			c.Services = services
			return executionports.Module(c)
		},
		OpenAPI: func(api huma.API) { httpapi.Register(api, &httpapi.Handlers{}) },
		Migrate: func(ctx context.Context, log *zap.Logger) error {
			return executionports.Migrate(ctx, cfg.DatabaseURL, log)
		},
		CheckMigrated: func(ctx context.Context, log *zap.Logger) error {
			return executionports.CheckMigrated(ctx, cfg.DatabaseURL, log)
		},
		DatabaseFlags: []string{"execution-database-url"},
	}
}
