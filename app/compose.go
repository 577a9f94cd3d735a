package app

import (
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/admin"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/environments"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/logging"
	"github.com/pharos-metallo/metallo/platform/servingtls"
)

// Common is the configuration every serving process shares.
type Common struct {
	// Listen is the public API address (central roles).
	Listen string
	// AdminListen is the metrics listener's address; empty disables it.
	AdminListen string
	// AdminProfiling serves Go's profiles at /debug/pprof/ on the admin
	// listener.
	AdminProfiling bool
	// KeysFile is the path of keys.yaml (central roles).
	KeysFile string
	// EnvironmentsFile is the path of environments.yaml (central roles:
	// both read it; docs/architecture.md#configuration-files).
	EnvironmentsFile string
	// Migrate applies pending migrations at start.
	Migrate bool
	// BodyReadTimeout is the read deadline of every request body on the
	// public API (0: httpserver.DefaultBodyReadTimeout).
	BodyReadTimeout time.Duration
	// TLS is the serving pair of the central roles' listeners (public and
	// admin); none serves plain HTTP, which serve allows on loopback only
	// (docs/operations.md#tls).
	TLS servingtls.Files
	// StartTimeout and StopTimeout bound Fx's start and stop.
	StartTimeout, StopTimeout time.Duration
}

// Compose returns the Fx options of a process serving roles (already
// validated by RoleSet.Select): the platform modules the roles need, then
// each role's context module. Central roles share one public API, one keys
// file and one environments file, each watched and reloaded while the
// process runs; the runtime role gets none of them.
func Compose(roles []Role, c Common, log *zap.Logger) fx.Option {
	opts := []fx.Option{
		logging.Module(log),
		clock.Module(),
		admin.Module(admin.Config{Listen: c.AdminListen, Profiling: c.AdminProfiling}),
	}
	if len(roles) > 0 && roles[0].Central {
		opts = append(opts,
			servingtls.Module(c.TLS),
			auth.Module(c.KeysFile),
			environments.Module(c.EnvironmentsFile),
			httpserver.Module(httpserver.Config{Listen: c.Listen, Title: Title(roles), BodyReadTimeout: c.BodyReadTimeout}),
		)
	}
	for _, r := range roles {
		opts = append(opts, r.Module(c.Migrate))
	}
	if c.StartTimeout > 0 {
		opts = append(opts, fx.StartTimeout(c.StartTimeout))
	}
	if c.StopTimeout > 0 {
		opts = append(opts, fx.StopTimeout(c.StopTimeout))
	}
	return fx.Options(opts...)
}

// Title is the OpenAPI title of a process serving roles, e.g.
// "Metallo provisioning".
func Title(roles []Role) string {
	names := make([]string, 0, len(roles))
	for _, r := range roles {
		names = append(names, r.Name)
	}
	return "Metallo " + strings.Join(names, " + ")
}
