package siteruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/sitehttp"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/buildinfo"
	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// StaticImages is application.BatchImages from configuration.
type StaticImages struct{ batch string }

// NewStaticImages returns the configured batch image; it must be pinned by
// digest with an explicit registry (siteprotocol.IsPinnedImage), a tag alone is refused.
func NewStaticImages(batch string) (StaticImages, error) {
	if !siteprotocol.IsPinnedImage(batch) {
		return StaticImages{}, config.Invalid("batch-image", batch, errors.New("the batch execution image must be an image reference with an explicit registry, pinned by digest (<registry>/<repository>@sha256:<64 hex>)"))
	}
	return StaticImages{batch: batch}, nil
}

// BatchImage returns the batch execution image.
func (s StaticImages) BatchImage() string { return s.batch }

// StartHeartbeat writes the first heartbeat before the worker starts, so a
// Runtime whose --heartbeat-file cannot be written refuses to start (its
// liveness probe could never pass) instead of running unobserved.
func StartHeartbeat(ctx context.Context, c Config, clk application.Clock) error {
	if err := heartbeat.NewFile(c.HeartbeatFile, clk, 0).Beat(ctx); err != nil {
		return config.Invalid("heartbeat-file", c.HeartbeatFile, fmt.Errorf("the heartbeat cannot be written: %w", err))
	}
	return nil
}

// NewSiteClient returns the Site HTTPS client for the installation; its
// pulls carry this binary's version (docs/site-protocol.md#the-runtimes-version).
func NewSiteClient(c Config, installationID string) (*sitehttp.Client, error) {
	path, _ := c.Credential()
	return sitehttp.New(sitehttp.Config{Authority: c.Authority, Environment: c.Environment, InstallationID: installationID,
		RuntimeVersion: buildinfo.Read().Version, TokenFile: path, CAFile: c.CAFile})
}

// ProviderSource is a parsed provider flag (--permissions,
// --repository-grants): http:<url> or <fileKind>:<file>.
type ProviderSource struct {
	// Kind is "http" or the flag's file kind ("policy", "file").
	Kind string
	// URL is the provider's base URL (http).
	URL string
	// File is the provider's file (the file kind).
	File string
}

// newProvider returns the adaptor a provider flag's value chooses, read
// by parse: for http:<url>, overHTTP of the base URL and a client that
// verifies the provider against caFile (the CA bundle of the flag caFlag;
// the system roots when empty) and bounds each request by timeout; else
// fromFile of the file. Errors are config.Invalid naming flag and value,
// or caFlag and caFile for a bundle that cannot be read or holds no
// certificate.
func newProvider[T any](flag, value, caFlag, caFile string, timeout time.Duration, parse func(string) (ProviderSource, error),
	overHTTP func(url string, client *http.Client) T, fromFile func(file string) (T, error)) (T, error) {
	var none T
	src, err := parse(value)
	if err != nil {
		return none, config.Invalid(flag, value, err)
	}
	if src.Kind == "http" {
		client, err := cabundle.Client(caFile, timeout)
		if err != nil {
			return none, config.Invalid(caFlag, caFile, err)
		}
		return overHTTP(src.URL, client), nil
	}
	p, err := fromFile(src.File)
	if err != nil {
		return none, config.Invalid(flag, value, err)
	}
	return p, nil
}

// parseProvider reads a provider flag value s: http:<url> (an absolute
// https URL of the provider; plain http only to a loopback address, the
// rule of the Site API's authority) or fileKind:<file> (an existing file).
// There is no default: a missing provider is an error. provider names the
// provider in messages, needs what fileKind:<file> lacks when the file is
// empty, and file the file when it cannot be read.
func parseProvider(s, provider, fileKind, needs, file string) (ProviderSource, error) {
	kind, rest, _ := strings.Cut(s, ":")
	switch kind {
	case "http":
		if _, err := sitehttp.ParseAuthority(rest); err != nil {
			return ProviderSource{}, fmt.Errorf("http:<url> needs the %s's base URL: %w", provider, err)
		}
		return ProviderSource{Kind: kind, URL: rest}, nil
	case fileKind:
		if rest == "" {
			return ProviderSource{}, fmt.Errorf("%s:<file> needs %s", fileKind, needs)
		}
		if _, err := os.Stat(rest); err != nil {
			return ProviderSource{}, fmt.Errorf("%s: %w", file, err)
		}
		return ProviderSource{Kind: kind, File: rest}, nil
	}
	return ProviderSource{}, fmt.Errorf("choose the %s explicitly: http:<url> or %s:<file>", provider, fileKind)
}
