package app

import (
	"github.com/danielgtaylor/huma/v2"
	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/contexts/executionports/application"
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
	// current is the configuration the flags give.
	current := func() executionports.Config {
		c := cfg
		c.ResourceOwner = executionports.ResourceOwner(owner)
		c.Services = services
		return c
	}
	return centralDatabase(Role{
		Name:    "execution",
		Context: executionports.Name,
		Central: true,
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.DatabaseURL, executionports.Database().URLFlag, "", "execution_ports database: postgres://… or sqlite:<path> (default: the embedded SQLite file "+executionports.Database().DefaultPath+")")
			fs.Int32Var(&cfg.MaxConns, executionports.Database().MaxConnsFlag, executionports.DefaultMaxConns, "most PostgreSQL connections of execution_ports (a waiting pull holds none)")
			fs.StringVar(&owner, "resource-owner", "", "how execution reads its owner resource_provisioning: in-process (with --role provisioning,execution) or http (with --provisioning-url and --provisioning-key-file); required")
			fs.StringVar(&cfg.ProvisioningURL, "provisioning-url", "", "base URL of the provisioning role's API, for --resource-owner http")
			fs.StringVar(&cfg.ProvisioningKeyFile, "provisioning-key-file", "", "file holding a service key of the provisioning role, for --resource-owner http")
			fs.StringVar(&cfg.ProvisioningCAFile, "provisioning-ca-file", "", "PEM bundle to verify the provisioning role's certificate, for --resource-owner http (system roots when empty)")
			fs.DurationVar(&cfg.DeliveryInterval, "binding-delivery-interval", application.DefaultDeliveryInterval, "period of the full reconcile that delivers member bindings (bind-member / retire-member) to each environment's stream: a retirement is appended within about this bound (docs/execution-ports.md#delivery-of-member-bindings)")
			fs.DurationVar(&cfg.FeedInterval, "binding-feed-interval", application.DefaultFeedInterval, "how often binding delivery reads the owner's change feed when caught up: a member-binding change is delivered within about this bound, the full reconcile of --binding-delivery-interval being the safety net (docs/execution-ports.md#following-the-change-feed)")
			fs.DurationVar(&cfg.ReadResultRetention, "read-result-retention", application.DefaultReadResultRetention, "how long the content of a read's result (read-logs, read-file, proxy) is kept after its acknowledgement; then a sweep drops it and keeps only its digest, so GET …/commands/{id} says it expired (docs/execution-ports.md#read-results-retention)")
			fs.StringSliceVar(&services, "execution-services", []string{httpapi.DefaultService}, "service principal IDs (service:<id> in keys.yaml) allowed on /execution/v1 routes")
		},
		Preflight: func(log *zap.Logger) error {
			if err := current().Validate(); err != nil {
				return err
			}
			executionports.Database().Describe(log, current().DatabaseSettings())
			return nil
		},
		Module: func(migrate bool) fx.Option {
			c := current()
			c.Migrate = migrate
			return executionports.Module(c)
		},
		OpenAPI: func(api huma.API) { httpapi.Register(api, &httpapi.Handlers{}) },
	}, executionports.Database(), func() database.Settings { return current().DatabaseSettings() })
}
