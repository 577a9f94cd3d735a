// Package cabundle builds the HTTPS clients that verify a server against a
// PEM CA bundle file instead of the system roots: the Site Runtime's Site
// API client (--ca-file), its permission and repository grant providers
// (--permissions-ca-file, --repository-grants-ca-file), the execution
// role's client of the provisioning role (--provisioning-ca-file) and
// `metallo provisioning waldur-report --post` (--provisioning-ca-file)
// (docs/operations.md#runtime-flags). Every client it builds refuses TLS
// below 1.2.
//
// The standard library reads PEM bundles (x509.CertPool.AppendCertsFromPEM)
// but not from a file with an error worth showing an operator; that is all
// this package adds, in one place.
package cabundle

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// ErrNoCertificate is wrapped by Pool's error for a bundle that holds no
// PEM certificate.
var ErrNoCertificate = errors.New("holds no valid PEM certificate (a -----BEGIN CERTIFICATE----- block that parses as X.509)")

// Pool reads the PEM bundle at path into a certificate pool. It fails,
// wrapping the cause, when the file cannot be read, and wrapping
// ErrNoCertificate when it holds no PEM certificate; the message does not
// repeat path beyond what os.ReadFile says, so callers name the flag and
// the path.
func Pool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, ErrNoCertificate
	}
	return pool, nil
}

// TLSConfig returns a client TLS configuration with TLS 1.2 at least that
// verifies servers against the bundle at caFile, or against the system
// roots when caFile is empty. Errors are Pool's.
func TLSConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pool, err := Pool(caFile)
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// Client returns an HTTP client whose requests are bounded by timeout (0:
// none) over a transport like http.DefaultTransport (proxy from the
// environment, its dial, handshake and idle timeouts) whose TLS is
// TLSConfig(caFile). Errors are Pool's.
func Client(caFile string, timeout time.Duration) (*http.Client, error) {
	cfg, err := TLSConfig(caFile)
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return &http.Client{Transport: t, Timeout: timeout}, nil
}
