package cabundle_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/platform/cabundle"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

func TestABundleThatCannotBeReadOrHoldsNoCertificateIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := cabundle.Pool(filepath.Join(dir, "absent.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: want fs.ErrNotExist, got %v", err)
	}
	noPEM := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(noPEM, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cabundle.Pool(noPEM); !errors.Is(err, cabundle.ErrNoCertificate) {
		t.Fatalf("a file without a certificate: want ErrNoCertificate, got %v", err)
	}
	if _, err := cabundle.Client(noPEM, time.Second); !errors.Is(err, cabundle.ErrNoCertificate) {
		t.Fatalf("a client of a file without a certificate: want ErrNoCertificate, got %v", err)
	}
}

// A client of the bundle reaches a server whose certificate it holds; a
// client of the system roots does not; both ask for TLS 1.2 at least.
func TestAClientTrustsTheBundleItIsGiven(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	ca := certauthority.ServerCAFile(t, srv)
	get := func(c *http.Client) error {
		resp, err := c.Get(srv.URL)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	}
	trusting, err := cabundle.Client(ca, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(trusting); err != nil {
		t.Fatalf("with the bundle: %v", err)
	}
	system, err := cabundle.Client("", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if err := get(system); !errors.As(err, &unknown) {
		t.Fatalf("with the system roots: want an unknown authority, got %v", err)
	}
	if cfg, err := cabundle.TLSConfig(""); err != nil || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs != nil {
		t.Fatalf("system roots: %+v %v", cfg, err)
	}
	if cfg, err := cabundle.TLSConfig(ca); err != nil || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs == nil {
		t.Fatalf("the bundle: %+v %v", cfg, err)
	}
}
