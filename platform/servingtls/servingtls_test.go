package servingtls_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/servingtls"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

func TestThePairIsBothFlagsOrNeitherAndMustLoad(t *testing.T) {
	ca := certauthority.NewCA(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, "metallo.example.org").Write(t, cert, key)
	other := filepath.Join(dir, "other.key")
	if err := os.WriteFile(other, ca.Issue(t, "metallo.example.org").KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (servingtls.Files{}).Check(); err != nil {
		t.Errorf("neither: %v", err)
	}
	if err := (servingtls.Files{CertFile: cert, KeyFile: key}).Check(); err != nil {
		t.Errorf("a good pair: %v", err)
	}
	for _, tc := range []struct {
		files servingtls.Files
		flag  string
	}{
		{servingtls.Files{CertFile: cert}, "tls-key-file"},
		{servingtls.Files{KeyFile: key}, "tls-cert-file"},
		{servingtls.Files{CertFile: cert, KeyFile: other}, "tls-cert-file"},
		{servingtls.Files{CertFile: filepath.Join(dir, "absent.crt"), KeyFile: key}, "tls-cert-file"},
		{servingtls.Files{CertFile: key, KeyFile: cert}, "tls-cert-file"},
	} {
		err := tc.files.Check()
		var fe *config.FlagError
		if !errors.As(err, &fe) || fe.Flag != tc.flag {
			t.Errorf("%+v: want an error naming --%s, got %v", tc.files, tc.flag, err)
		}
	}
}

func TestPlainHTTPIsServedOnLoopbackOnly(t *testing.T) {
	pair := servingtls.Files{CertFile: "tls.crt", KeyFile: "tls.key"}
	for _, addr := range []string{"", "127.0.0.1:8080", "127.0.0.2:1", "localhost:8080", "LOCALHOST:1", "[::1]:9090"} {
		if err := servingtls.CheckListen("listen", addr, servingtls.Files{}); err != nil {
			t.Errorf("%q without TLS: %v", addr, err)
		}
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "10.1.2.3:8080", "192.168.0.1:80", "metallo.example.org:443", "127.0.0.1", "localhost.example.org:1"} {
		err := servingtls.CheckListen("admin-listen", addr, servingtls.Files{})
		var fe *config.FlagError
		if !errors.As(err, &fe) || fe.Flag != "admin-listen" || !errors.Is(err, servingtls.ErrPlainHTTP) ||
			!strings.Contains(err.Error(), "--tls-cert-file") || !strings.Contains(err.Error(), "--tls-key-file") {
			t.Errorf("%q without TLS: want a refusal naming --admin-listen and the TLS flags, got %v", addr, err)
		}
		if err := servingtls.CheckListen("admin-listen", addr, pair); err != nil {
			t.Errorf("%q with TLS: %v", addr, err)
		}
	}
}

// A pair replaced on disk (each file by a rename, as a Secret volume is updated) is served on
// the next handshakes without a restart; until the change is seen the previous pair is.
func TestARotatedPairIsServedWithoutARestart(t *testing.T) {
	ca := certauthority.NewCA(t)
	dir := t.TempDir()
	files := servingtls.Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	first := ca.Issue(t, "metallo.example.org", "10.96.0.20")
	first.Write(t, files.CertFile, files.KeyFile)

	var certs *servingtls.Certificates
	app := fxtest.New(t, fx.Supply(zap.NewNop()), servingtls.Module(files), fx.Populate(&certs))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), TLSConfig: certs.ServerConfig(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	for _, name := range []string{"metallo.example.org", "10.96.0.20"} {
		if got, err := certauthority.ServedSerial(ca.Pool, ln.Addr().String(), name); err != nil || got.Cmp(first.Serial) != 0 {
			t.Fatalf("%s: served serial %v (%v), want %v", name, got, err, first.Serial)
		}
	}
	second := ca.Issue(t, "metallo.example.org", "10.96.0.20")
	second.Write(t, files.CertFile, files.KeyFile)
	// The watcher sees the change by a file event or, at the latest, its 10 s poll; the bound
	// only ends a test whose rotation never happens.
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := certauthority.ServedSerial(ca.Pool, ln.Addr().String(), "metallo.example.org")
		if err != nil {
			t.Fatalf("handshake during the rotation: %v", err)
		}
		if got.Cmp(second.Serial) == 0 {
			break
		}
		if got.Cmp(first.Serial) != 0 {
			t.Fatalf("served serial %v, neither %v nor %v", got, first.Serial, second.Serial)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated pair (serial %v) was never served; still %v", second.Serial, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A client that trusts the CA but asks for another name is refused.
	if _, err := certauthority.ServedSerial(ca.Pool, ln.Addr().String(), "other.example.org"); err == nil {
		t.Error("a name the certificate does not hold was accepted")
	}
	// TLS below 1.2 is refused.
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool, ServerName: "metallo.example.org", MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}) //nolint:gosec // the point of the test
	if err == nil {
		_ = conn.Close()
		t.Error("a TLS 1.1 handshake was accepted")
	}
}

// The listeners speak HTTP/1.1 over TLS: a client offering h2 gets HTTP/1.1.
func TestHTTP2IsNotOffered(t *testing.T) {
	ca := certauthority.NewCA(t)
	dir := t.TempDir()
	files := servingtls.Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	ca.Issue(t, "127.0.0.1").Write(t, files.CertFile, files.KeyFile)
	certs, err := servingtls.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.Proto)) }),
		TLSConfig: certs.ServerConfig(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Errorf("served %s, want HTTP/1.1", resp.Proto)
	}
}
