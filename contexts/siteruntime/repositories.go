package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/config"
)

// GrantsSource is a parsed --repository-grants value.
type GrantsSource struct {
	// Kind is "http" or "file".
	Kind string
	// URL is the provider's base URL (http).
	URL string
	// File is the grants file (file).
	File string
}

// ParseRepositoryGrants reads http:<url> (an absolute https URL of the
// repository grant provider; plain http only to a loopback address) or
// file:<file> (an existing grants file). There is no default: a missing
// provider is an error (docs/site-runtime.md#repository-grants).
func ParseRepositoryGrants(s string) (GrantsSource, error) {
	src, err := parseProvider(s, "repository grant provider", "file", "a grants file", "grants file")
	return GrantsSource(src), err
}

// NewRepositoryGrants returns the RepositoryGrants adaptor the
// --repository-grants value chooses: the HTTP client of the grant
// contract (retrying an unavailable provider for up to
// --repository-grants-bound), or the grants file, loaded now so that a
// broken file refuses start-up. Errors name the flag.
func NewRepositoryGrants(c Config, clk application.Clock) (application.RepositoryGrants, error) {
	src, err := ParseRepositoryGrants(c.RepositoryGrants)
	if err != nil {
		return nil, config.Invalid("repository-grants", c.RepositoryGrants, err)
	}
	if src.Kind == "http" {
		return grants.NewHTTP(grants.HTTPConfig{BaseURL: src.URL, Bound: c.RepositoryGrantsBound}, clk), nil
	}
	f, err := grants.NewFile(src.File, clk)
	if err != nil {
		return nil, config.Invalid("repository-grants", c.RepositoryGrants, err)
	}
	return f, nil
}
