// Package app is the only place that picks modules: it defines the roles a
// metallo process can take, composes the chosen contexts with the platform
// modules under Fx, and builds the cobra command tree
// (docs/architecture.md#how-a-process-is-composed).
package app

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/spf13/pflag"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/database"
)

// Role is one value of `serve --role`: a bounded context and how to compose
// it. A Role value owns its configuration; Roles() returns fresh values.
type Role struct {
	// Name is the role value, e.g. "provisioning".
	Name string
	// Context is the bounded context's name, e.g. "resource_provisioning".
	Context string
	// Central roles are served behind the public HTTP API with keys.yaml
	// authentication; the runtime role is not central.
	Central bool
	// Flags registers the role's own flags. It is called for every role so
	// that any flag parses whatever roles are selected.
	Flags func(fs *pflag.FlagSet)
	// Preflight validates the role's configuration for serve — the
	// context's Config.Validate, the one place it is checked; errors name
	// the flag — and logs what it will use (e.g. the embedded default
	// database). It runs before Fx starts.
	Preflight func(log *zap.Logger) error
	// Module composes the context. migrate says whether pending migrations
	// are applied at start (--migrate).
	Module func(migrate bool) fx.Option
	// OpenAPI registers the role's operations on api without any service
	// behind them, to print or check the role's OpenAPI document.
	OpenAPI func(api huma.API)
	// Migrate validates the role's database flags, says which database it
	// uses and applies the context's migrations (`metallo migrate`, which
	// needs no other flag of the role); nil for roles without a platform
	// database.
	Migrate func(ctx context.Context, log *zap.Logger) error
	// CheckMigrated returns an error wrapping database.ErrPendingMigrations
	// when the context's database has pending migrations; nil for roles
	// without a platform database. serve runs it for every selected role
	// before it starts, so the start error names every pending context.
	CheckMigrated func(ctx context.Context, log *zap.Logger) error
	// DatabaseFlags names the role's database flags, the URL and the pool
	// bound: `metallo migrate` offers only these, and a role without a
	// platform database refuses them.
	DatabaseFlags []string
}

// RoleSet is the registry of roles a binary knows.
type RoleSet []Role

// Names returns the valid role names, sorted.
func (rs RoleSet) Names() []string {
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names
}

// Select returns the roles named by the --role value (comma separated or
// repeated), in registry order. It fails naming the flag and listing the
// valid roles for an unknown or empty selection, and refuses to combine the
// runtime role with any other (the Runtime never shares a process).
func (rs RoleSet) Select(names []string) ([]Role, error) {
	var picked []string
	for _, n := range names {
		for _, part := range strings.Split(n, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if !slices.Contains(picked, part) {
				picked = append(picked, part)
			}
		}
	}
	valid := strings.Join(rs.Names(), ", ")
	if len(picked) == 0 {
		return nil, config.Invalid("role", "", fmt.Errorf("choose at least one role: %s", valid))
	}
	var out []Role
	for _, r := range rs {
		if slices.Contains(picked, r.Name) {
			out = append(out, r)
		}
	}
	for _, p := range picked {
		if !slices.ContainsFunc(out, func(r Role) bool { return r.Name == p }) {
			return nil, config.Invalid("role", strings.Join(names, ","), fmt.Errorf("unknown role %q; valid roles: %s", p, valid))
		}
	}
	if len(out) > 1 {
		for _, r := range out {
			if !r.Central {
				return nil, config.Invalid("role", strings.Join(names, ","), fmt.Errorf("role %s runs alone in its process; it cannot be combined with other roles", r.Name))
			}
		}
	}
	return out, nil
}

// centralDatabase sets the database members of a central role r, whose
// context keeps its own database db with the settings settings returns
// (called after the flags are parsed): Migrate, CheckMigrated and
// DatabaseFlags. Both central roles use it, so they migrate and check the
// same way (docs/architecture.md#a-central-contexts-database).
func centralDatabase(r Role, db database.Context, settings func() database.Settings) Role {
	r.Migrate = func(ctx context.Context, log *zap.Logger) error {
		s := settings()
		if err := db.Validate(s); err != nil {
			return err
		}
		db.Describe(log, s)
		return db.Migrate(ctx, s, log)
	}
	r.CheckMigrated = func(ctx context.Context, _ *zap.Logger) error { return db.CheckMigrated(ctx, settings()) }
	r.DatabaseFlags = []string{db.URLFlag, db.MaxConnsFlag}
	return r
}
