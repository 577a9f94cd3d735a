package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/config"
)

// PermissionsSource is a parsed --permissions value.
type PermissionsSource struct {
	// Kind is "http" or "policy".
	Kind string
	// URL is the provider's base URL (http).
	URL string
	// File is the policy file (policy).
	File string
}

// ParsePermissions reads http:<url> (an absolute https URL of the
// permission provider; plain http only to a loopback address, the rule of
// the Site API's authority) or policy:<file> (an existing file). There is
// no default: a missing provider is an error.
func ParsePermissions(s string) (PermissionsSource, error) {
	src, err := parseProvider(s, "permission provider", "policy", "a file", "policy file")
	return PermissionsSource(src), err
}

// NewPermissions returns the RuntimePermissions adaptor the --permissions
// value chooses: the HTTP client of the permission contract (retrying an
// unavailable provider for up to --permissions-bound), or the policy file.
// There is no default: an empty or unknown value is an error naming the
// flag.
func NewPermissions(c Config, clk application.Clock) (application.RuntimePermissions, error) {
	src, err := ParsePermissions(c.Permissions)
	if err != nil {
		return nil, config.Invalid("permissions", c.Permissions, err)
	}
	if src.Kind == "http" {
		return permissions.NewHTTP(permissions.HTTPConfig{BaseURL: src.URL, Bound: c.PermissionsBound}, clk), nil
	}
	p, err := permissions.NewPolicy(src.File, clk, 0)
	if err != nil {
		return nil, config.Invalid("permissions", c.Permissions, err)
	}
	return p, nil
}
