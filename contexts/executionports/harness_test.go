package executionports_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/admin"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/environments"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/logging"
)

// server is the execution_ports context composed under Fx with the
// platform's auth and HTTP modules on a loopback port.
type server struct {
	executiontest.Client
	serviceKey, betoKey string
	alphaKey, betaKey   string
	clock               *clock.Manual
	dir                 string
	files               executiontest.Files
	app                 *fxtest.App
	// stop stops the app (once; the cleanup then does not).
	stop func() error
}

type options struct {
	databaseURL string
	// owner defaults to http against a closed port (the owner unreachable).
	owner    executionports.ResourceOwner
	ownerURL string
	recheck  time.Duration
	// environments replaces alpha-k8s and beta-k8s (each with a static key).
	environments []executiontest.Environment
}

func startServer(t testing.TB, o options) *server {
	t.Helper()
	s := &server{dir: t.TempDir(), clock: clock.NewManual(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))}
	if o.environments == nil {
		o.environments = []executiontest.Environment{
			{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"},
			{ID: "beta-k8s", Site: "beta", Authority: "https://metallo.example.org"},
		}
	}
	files := executiontest.WriteFiles(t, s.dir, o.environments, "service:beto")
	s.files = files
	s.serviceKey, s.betoKey = files.ServiceKey, files.ExtraKeys["service:beto"]
	s.alphaKey, s.betaKey = files.EnvironmentKeys["alpha-k8s"], files.EnvironmentKeys["beta-k8s"]
	if o.databaseURL == "" {
		o.databaseURL = "sqlite:" + filepath.Join(s.dir, "execution.sqlite")
	}
	if o.owner == "" {
		o.owner = executionports.OwnerHTTP
	}
	if o.ownerURL == "" {
		o.ownerURL = "http://127.0.0.1:1"
	}
	ownerKey := filepath.Join(s.dir, "provisioning.key")
	dbtest.Must(t, os.WriteFile(ownerKey, []byte("a-provisioning-service-key\n"), 0o600))
	var srv *httpserver.Server
	app := fxtest.New(t,
		logging.Module(zap.NewNop()),
		fx.Provide(func() clock.Clock { return s.clock }),
		admin.Module(admin.Config{}),
		auth.Module(files.KeysFile),
		environments.Module(files.EnvironmentsFile),
		httpserver.Module(httpserver.Config{Listen: "127.0.0.1:0", Title: "test"}),
		executionports.Module(executionports.Config{
			DatabaseURL: o.databaseURL, Migrate: true,
			ResourceOwner: o.owner, ProvisioningURL: o.ownerURL, ProvisioningKeyFile: ownerKey,
			PullRecheck: o.recheck,
		}),
		fx.Populate(&srv),
	)
	app.RequireStart()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			app.RequireStop()
		}
	})
	s.app = app
	s.stop = func() error { stopped = true; return app.Stop(context.Background()) }
	s.Base = "http://" + srv.Addr()
	return s
}
