// Package certauthority stands in for the certificate authority of an
// operator or a Site, which lies outside Metallo (docs/operations.md#tls):
// it makes a CA and serving pairs it issues, written as PEM files, for
// tests of TLS listeners and the clients that trust them through a CA
// bundle (NewCA, Issue and the helpers taking a testing.TB); the demo uses
// ReadCA and IssuePair to serve the Site API with a certificate of the
// local cluster's CA.
package certauthority

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority. CAFile is its PEM certificate (the
// bundle a client trusts); Pool holds the same certificate.
type CA struct {
	CAFile string
	Pool   *x509.CertPool
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	serial atomic.Int64
}

// NewCA makes a CA valid for a day and writes its certificate into a
// temporary directory of tb.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metallo test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: tb.TempDir(), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.serial.Store(1)
	ca.CAFile = filepath.Join(ca.dir, "ca.crt")
	write(tb, ca.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Pair is an issued serving pair as PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
	// Serial is the certificate's serial number (each Issue a new one).
	Serial *big.Int
}

// Issue issues a serving certificate for hosts (DNS names or IP
// addresses), valid for a day, with a fresh key and serial number.
func (ca *CA) Issue(tb testing.TB, hosts ...string) Pair {
	tb.Helper()
	p, err := ca.IssuePair(hosts...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// IssuePair is Issue for a caller without a test (the demo): it returns
// an error when no host is given or signing fails.
func (ca *CA) IssuePair(hosts ...string) (Pair, error) {
	if len(hosts) == 0 {
		return Pair{}, errors.New("certauthority: a serving certificate needs at least one host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	serial := big.NewInt(ca.serial.Add(1))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("certauthority: sign the certificate for %v: %w", hosts, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Serial:  serial,
	}, nil
}

// Write writes the pair to certFile and keyFile, each by a rename of a
// complete temporary file (as a Secret volume's update replaces them), so
// a reader never sees half a file.
func (p Pair) Write(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	if err := p.WriteFiles(certFile, keyFile); err != nil {
		tb.Fatal(err)
	}
}

// WriteFiles is Write for a caller without a test; it returns the first
// write or rename error.
func (p Pair) WriteFiles(certFile, keyFile string) error {
	if err := writeFile(keyFile, p.KeyPEM); err != nil {
		return err
	}
	return writeFile(certFile, p.CertPEM)
}

// ServedSerial dials addr over TLS, trusting only pool and checking the
// certificate for serverName, and returns the serial number of the
// certificate served.
func ServedSerial(pool *x509.CertPool, addr, serverName string) (*big.Int, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// ServerCAFile writes the certificate of srv (an httptest TLS server's
// self-signed one) as a PEM bundle into a temporary directory of tb and
// returns its path: the CA file a client trusts srv through.
func ServerCAFile(tb testing.TB, srv *httptest.Server) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "server-ca.pem")
	write(tb, path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return path
}

func write(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := writeFile(path, b); err != nil {
		tb.Fatal(err)
	}
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadCA reads an existing certificate authority, its PEM certificate
// certFile and EC private key keyFile (for example the local cluster's
// pki/ca.crt and pki/ca.key, whose certificates the cluster's Pods trust),
// to issue serving pairs with Issue.
func LoadCA(tb testing.TB, certFile, keyFile string) *CA {
	tb.Helper()
	ca, err := ReadCA(certFile, keyFile)
	if err != nil {
		tb.Fatal(err)
	}
	return ca
}

// ReadCA is LoadCA for a caller without a test (the demo issues the Site
// API's certificate with the local cluster's CA). It returns an error when
// a file cannot be read, is not PEM, or the key is not an EC key.
func ReadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("certauthority: %s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certauthority: %s: %w", certFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certauthority: %s: %w (an EC key is expected)", keyFile, err)
	}
	ca := &CA{cert: cert, key: key, Pool: x509.NewCertPool(), CAFile: certFile}
	ca.Pool.AddCert(cert)
	ca.serial.Store(time.Now().UnixNano())
	return ca, nil
}
