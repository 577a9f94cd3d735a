package auth

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/background"
	"github.com/pharos-metallo/metallo/platform/reload"
)

// KeysFlag names the keys file's flag.
const KeysFlag = "keys-file"

// Keys is keys.yaml as a serving process holds it: the KeyStore of the
// version in use, replaced whole when the file changes (platform/reload;
// docs/operations.md#configuration-reloads).
type Keys = reload.File[*KeyStore]

// WatchKeys reads the keys file at path into Keys whose reloads log to
// log and count in reg (nil: no metrics). Errors name --keys-file and every
// fault of the file.
func WatchKeys(path string, log *zap.Logger, reg prometheus.Registerer) (*Keys, error) {
	return reload.Load(reload.Options{Name: "keys", Flag: KeysFlag, Path: path, Log: log, Registerer: reg}, ParseKeys)
}

// CurrentKeys authenticates with the version of keys in use at each call:
// a key removed from the file is refused from the first request after the
// reload is applied.
type CurrentKeys struct{ Keys *Keys }

// Authenticate implements Authenticator.
func (c CurrentKeys) Authenticate(ctx context.Context, token string) (Principal, error) {
	return c.Keys.Current().Authenticate(ctx, token)
}

// AsAuthenticator annotates a constructor returning an Authenticator so Fx
// adds it to the chain after the static keys (e.g. a TokenReview
// authenticator for Site Runtimes).
func AsAuthenticator(constructor any) any {
	return fx.Annotate(constructor, fx.As(new(Authenticator)), fx.ResultTags(`group:"auth.authenticators"`))
}

type chainParams struct {
	fx.In
	Keys   *Keys
	Others []Authenticator `group:"auth.authenticators"`
}

// Module loads the keys file at keysFile, watched for the lifetime of the
// app, and provides its *Keys and the process's Authenticator: the static
// keys in use first, then every authenticator contributed to the
// "auth.authenticators" group.
func Module(keysFile string) fx.Option {
	return fx.Module("auth",
		fx.Provide(
			func(lc fx.Lifecycle, log *zap.Logger, reg prometheus.Registerer) (*Keys, error) {
				k, err := WatchKeys(keysFile, log.Named("config"), reg)
				if err != nil {
					return nil, fmt.Errorf("%w (create keys with `metallo keys new --principal <kind>:<id>`)", err)
				}
				background.Run(lc, "the keys file's watch", k.Watch)
				return k, nil
			},
			func(p chainParams) Authenticator {
				return append(Chain{CurrentKeys{p.Keys}}, p.Others...)
			},
		),
	)
}
