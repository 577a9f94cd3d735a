package siteruntime

import (
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
// contract (retrying an unavailable provider for up to
// --repository-grants-bound), or the grants file, loaded now so that a
// broken file refuses start-up. Errors name the flag.
func NewRepositoryGrants(c Config, clk application.Clock) (application.RepositoryGrants, error) {
	return newProvider("repository-grants", c.RepositoryGrants, ParseRepositoryGrants,
		func(url string) application.RepositoryGrants {
			return grants.NewHTTP(grants.HTTPConfig{BaseURL: url, Bound: c.RepositoryGrantsBound}, clk)
		},
		func(file string) (application.RepositoryGrants, error) { return grants.NewFile(file, clk) })
}
