package environments

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/background"
)

// Module loads environments.yaml at path (a start error names
// --environments-file and every fault) and provides its *Source, watched
// for the lifetime of the app: the central roles of a process share it, so
// they use one version at a time (docs/operations.md#configuration-reloads).
func Module(path string) fx.Option {
	return fx.Module("environments",
		fx.Provide(func(lc fx.Lifecycle, log *zap.Logger, reg prometheus.Registerer) (*Source, error) {
			s, err := Load(path, log.Named("config"), reg)
			if err != nil {
				return nil, err
			}
			background.Run(lc, "the environments file's watch", s.Watch)
			return s, nil
		}),
	)
}
