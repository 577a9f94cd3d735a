package auth

import (
	"fmt"

	"go.uber.org/fx"
)

// AsAuthenticator annotates a constructor returning an Authenticator so Fx
// adds it to the chain after the static keys (e.g. a TokenReview
// authenticator for Site Runtimes).
func AsAuthenticator(constructor any) any {
	return fx.Annotate(constructor, fx.As(new(Authenticator)), fx.ResultTags(`group:"auth.authenticators"`))
}

type chainParams struct {
	fx.In
	Keys   *KeyStore
	Others []Authenticator `group:"auth.authenticators"`
}

// Module loads the keys file at keysFile and provides the *KeyStore and the
// process's Authenticator: the static keys first, then every authenticator
// contributed to the "auth.authenticators" group.
func Module(keysFile string) fx.Option {
	return fx.Module("auth",
		fx.Provide(
			func() (*KeyStore, error) {
				ks, err := LoadKeys(keysFile)
				if err != nil {
					return nil, fmt.Errorf("--keys-file: %w (create keys with `metallo keys new --principal <kind>:<id>`)", err)
				}
				return ks, nil
			},
			func(p chainParams) Authenticator {
				return append(Chain{p.Keys}, p.Others...)
			},
		),
	)
}
