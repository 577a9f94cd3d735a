package siteruntime

import (
	"net/http"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

// ParseRepositoryGrants reads http:<url> (an absolute https URL of the
// repository grant provider; plain http only to a loopback address) or
// file:<file> (an existing grants file), Kind "http" or "file". There is
// no default: a missing provider is an error
// (docs/site-runtime.md#repository-grants).
func ParseRepositoryGrants(s string) (ProviderSource, error) {
	return parseProvider(s, "repository grant provider", "file", "a grants file", "grants file")
}

// NewRepositoryGrants returns the RepositoryGrants adaptor the
// --repository-grants value chooses: the HTTP client of the grant
// contract (verifying the provider against --repository-grants-ca-file,
// the system roots when empty, and retrying an unavailable provider for up
// to --repository-grants-bound), or the grants file, loaded now so that a
// broken file refuses start-up (docs/site-runtime.md#repository-grants).
// Errors name the flag: --repository-grants, or
// --repository-grants-ca-file for a CA bundle that cannot be read or holds
// no certificate.
func NewRepositoryGrants(c Config, clk application.Clock) (application.RepositoryGrants, error) {
	return newProvider("repository-grants", c.RepositoryGrants, "repository-grants-ca-file", c.RepositoryGrantsCAFile, grants.RequestTimeout, ParseRepositoryGrants,
		func(url string, client *http.Client) application.RepositoryGrants {
			return grants.NewHTTP(grants.HTTPConfig{BaseURL: url, Bound: c.RepositoryGrantsBound, Client: client}, clk)
		},
		func(file string) (application.RepositoryGrants, error) { return grants.NewFile(file, clk) })
}
