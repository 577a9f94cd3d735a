// Package servingtls serves a process's listeners (the public API and the
// admin listener) over TLS from a certificate and key file pair, re-read
// when the files change so that a rotated certificate is served without a
// restart, and holds the rule that plain HTTP is served on loopback
// addresses only (docs/operations.md#tls).
//
// The files are watched by controller-runtime's certwatcher (file events
// plus a poll every 10 s, so a Kubernetes Secret volume's symlink swap is
// seen too); handshakes are answered from its cached pair. A pair that
// cannot be read or parsed after a change is logged and the previous pair
// is kept.
package servingtls

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-logr/zapr"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pharos-metallo/metallo/platform/background"
	"github.com/pharos-metallo/metallo/platform/config"
)

// The flags that name the pair.
const (
	CertFlag = "tls-cert-file"
	KeyFlag  = "tls-key-file"
)

// ErrPlainHTTP is wrapped by CheckListen's refusal of plain HTTP on an
// address that is not loopback.
var ErrPlainHTTP = errors.New("plain http is served on loopback addresses only")

// Files is the serving certificate's pair: a PEM certificate chain (leaf
// first) and its PEM private key. Both empty serves plain HTTP.
type Files struct {
	CertFile, KeyFile string
}

// Enabled reports whether TLS is configured.
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

// Check validates the pair before anything starts: both flags or neither
// (a *config.FlagError naming the missing one), and, when given, a pair
// that reads and parses, the key matching the certificate (a
// *config.FlagError naming --tls-cert-file).
func (f Files) Check() error {
	switch {
	case !f.Enabled():
		return nil
	case f.CertFile == "":
		return config.Invalid(CertFlag, "", fmt.Errorf("--%s is set; give both or neither", KeyFlag))
	case f.KeyFile == "":
		return config.Invalid(KeyFlag, "", fmt.Errorf("--%s is set; give both or neither", CertFlag))
	}
	if _, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile); err != nil {
		return config.Invalid(CertFlag, f.CertFile, fmt.Errorf("load the pair with --%s %s: %w", KeyFlag, f.KeyFile, err))
	}
	return nil
}

// CheckListen refuses to serve plain HTTP on addr, the value of the
// listener flag flag (e.g. "listen"), unless addr's host is a loopback
// address or "localhost": an empty host, 0.0.0.0, [::] or any other
// address or name needs the TLS pair (a *config.FlagError wrapping
// ErrPlainHTTP that names the TLS flags). An empty addr (a disabled
// listener) passes.
func CheckListen(flag, addr string, f Files) error {
	if addr == "" || f.Enabled() || Loopback(addr) {
		return nil
	}
	return config.Invalid(flag, addr, fmt.Errorf("%w; listen on 127.0.0.1 or give --%s and --%s", ErrPlainHTTP, CertFlag, KeyFlag))
}

// Loopback reports whether the host of the listen address addr
// ("host:port") is a loopback IP address or "localhost".
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Certificates is the serving pair of a process, reloaded when its files
// change.
type Certificates struct {
	watcher *certwatcher.CertWatcher
}

// Load reads the pair (an error when it cannot be read or parsed) and
// returns Certificates that serve it; Watch keeps it current.
func Load(f Files) (*Certificates, error) {
	w, err := certwatcher.New(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, config.Invalid(CertFlag, f.CertFile, fmt.Errorf("load the pair with --%s %s: %w", KeyFlag, f.KeyFile, err))
	}
	return &Certificates{watcher: w}, nil
}

// ServerConfig returns a server TLS configuration (TLS 1.2 or later,
// HTTP/1.1 by ALPN) whose every handshake is answered with the current
// pair. HTTP/2 is not offered: the listeners' per-connection rules (the
// body read deadline, docs/operations.md#request-bodies) are those of
// HTTP/1.1 over TLS as over plain TCP.
func (c *Certificates) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: c.watcher.GetCertificate}
}

// Watch re-reads the pair when its files change until ctx ends; it returns
// an error only when the files cannot be watched at all.
func (c *Certificates) Watch(ctx context.Context) error {
	if err := c.watcher.Start(ctx); err != nil {
		return fmt.Errorf("watch the TLS pair: %w", err)
	}
	return nil
}

// Module provides *Certificates for f, watched for the lifetime of the
// app, when f is enabled; otherwise it provides nothing, and the listeners
// (which take *Certificates as optional) serve plain HTTP. certwatcher
// logs through controller-runtime's logger, which Module points at log:
// without it that logger would print a stack trace to standard error at
// its first line after 30 s.
func Module(f Files) fx.Option {
	if !f.Enabled() {
		return fx.Options()
	}
	return fx.Module("servingtls",
		fx.Provide(func(lc fx.Lifecycle, log *zap.Logger) (*Certificates, error) {
			ctrllog.SetLogger(zapr.NewLogger(log.Named("tls")))
			c, err := Load(f)
			if err != nil {
				return nil, err
			}
			background.Run(lc, "the TLS pair's watch", func(ctx context.Context) {
				if err := c.Watch(ctx); err != nil {
					log.Error("the TLS pair is not watched; a rotated certificate needs a restart", zap.Error(err))
				}
			})
			return c, nil
		}),
	)
}
