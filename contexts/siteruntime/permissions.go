package siteruntime

import (
	"net/http"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

// ParsePermissions reads http:<url> (an absolute https URL of the
// permission provider; plain http only to a loopback address, the rule of
// the Site API's authority) or policy:<file> (an existing file), Kind
// "http" or "policy". There is no default: a missing provider is an error.
func ParsePermissions(s string) (ProviderSource, error) {
	return parseProvider(s, "permission provider", "policy", "a file", "policy file")
}

// NewPermissions returns the RuntimePermissions adaptor the --permissions
// value chooses: the HTTP client of the permission contract (verifying the
// provider against --permissions-ca-file, the system roots when empty, and
// retrying an unavailable provider for up to --permissions-bound), or the
// policy file (docs/site-runtime.md#permission-providers). There is no
// default: an empty or unknown value is an error naming the flag; a CA
// bundle that cannot be read or holds no certificate is an error naming
// --permissions-ca-file.
func NewPermissions(c Config, clk application.Clock) (application.RuntimePermissions, error) {
	return newProvider("permissions", c.Permissions, "permissions-ca-file", c.PermissionsCAFile, permissions.RequestTimeout, ParsePermissions,
		func(url string, client *http.Client) application.RuntimePermissions {
			return permissions.NewHTTP(permissions.HTTPConfig{BaseURL: url, Bound: c.PermissionsBound, Client: client}, clk)
		},
		func(file string) (application.RuntimePermissions, error) { return permissions.NewPolicy(file, clk, 0) })
}
