package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/contexts/executionports"
	epapp "github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/servingtls"
	"github.com/pharos-metallo/metallo/platform/testsetup"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

// siteAPIName is the Site API's name in the certificate and the Runtime's authority: not a
// loopback name, so the Runtime must use TLS to it and verify the certificate.
const siteAPIName = "site-api.metallo.test"

// connectProxy is an HTTP CONNECT proxy on loopback that sends every tunnel to target,
// whatever host the client asked for: it stands in for the name service that would resolve
// siteAPIName to the server (the Runtime reaches it through HTTPS_PROXY, unchanged), so the
// TLS handshake and the certificate check are the Runtime's own, end to end.
func connectProxy(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil || req.Method != http.MethodConnect || req.Host != siteAPIName+":443" {
					_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
					return
				}
				defer up.Close()
				_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// The execution role's HTTP owner reads a provisioning role served over TLS
// with a certificate of a test CA when --provisioning-ca-file names that
// CA; with the system roots every read is unavailable, a certificate
// error; a bundle that holds no certificate, or one given without
// --resource-owner http, is refused at preflight naming the flag.
func TestTheHTTPOwnerTrustsTheProvisioningRoleThroughItsCAFile(t *testing.T) {
	dir := t.TempDir()
	files := executionFiles(t)
	ca := certauthority.NewCA(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, "127.0.0.1").Write(t, certFile, keyFile)
	prov := startProvisioningOwnerOver(t, dir, files, clock.System{}, servingtls.Files{CertFile: certFile, KeyFile: keyFile})
	defer prov.app.RequireStop()
	url := "https://" + prov.srv.Addr()

	trusting, err := executionports.NewHTTPOwner(url, prov.keyFile, ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if head, err := trusting.FeedHead(context.Background()); err != nil || head == "" {
		t.Fatalf("with --provisioning-ca-file: head %q, %v", head, err)
	}
	system, err := executionports.NewHTTPOwner(url, prov.keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := system.FeedHead(context.Background()); !errors.Is(err, epapp.ErrResourceLookupUnavailable) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("with the system roots: want unavailable after a certificate error, got %v", err)
	}

	noPEM := filepath.Join(dir, "no-cert.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := executionports.NewHTTPOwner(url, prov.keyFile, noPEM); !errors.Is(err, config.ErrInvalidFlag) || !strings.Contains(err.Error(), "--provisioning-ca-file") {
		t.Fatalf("a bundle without a certificate: %v", err)
	}
	for name, args := range map[string][]string{
		"no certificate": {"--resource-owner", "http", "--provisioning-url", url, "--provisioning-key-file", prov.keyFile, "--provisioning-ca-file", noPEM},
		"missing file":   {"--resource-owner", "http", "--provisioning-url", url, "--provisioning-key-file", prov.keyFile, "--provisioning-ca-file", filepath.Join(dir, "absent.pem")},
		"in-process":     {"--resource-owner", "in-process", "--provisioning-ca-file", ca.CAFile},
	} {
		err := configured(t, ExecutionRole(), executionArgs(t, files, args...)...).Preflight(zap.NewNop())
		var fe *config.FlagError
		if !errors.As(err, &fe) || fe.Flag != "provisioning-ca-file" || !strings.Contains(err.Error(), "METALLO_PROVISIONING_CA_FILE") {
			t.Errorf("%s: want a flag error naming --provisioning-ca-file, got %v", name, err)
		}
	}
	ok := executionArgs(t, files, "--resource-owner", "http", "--provisioning-url", url, "--provisioning-key-file", prov.keyFile, "--provisioning-ca-file", ca.CAFile)
	if err := configured(t, ExecutionRole(), ok...).Preflight(zap.NewNop()); err != nil {
		t.Fatalf("--provisioning-ca-file with --resource-owner http: %v", err)
	}
}

// adminAddr finds the admin listener's address in a served process's log.
func adminAddr(t *testing.T, p *servedProcess) string {
	t.Helper()
	for _, line := range strings.Split(p.logText(), "\n") {
		var e struct {
			Msg, Addr, Scheme string
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "serving metrics" {
			if e.Scheme != "https" {
				t.Errorf("admin listener scheme %q, want https", e.Scheme)
			}
			return e.Addr
		}
	}
	t.Fatalf("no admin listener in the log:\n%s", p.logText())
	return ""
}

// The execution role served over TLS with a certificate a test CA issued for a name that is
// not loopback: the Runtime's own client (`metallo runtime check`, trusting the CA through
// --ca-file) proves its identity against it; a client without the CA is refused; the admin
// listener serves the same pair; a rotated pair is served by the same process without a
// restart, and the Runtime checks against it again.
func TestTheRuntimeTrustsACentralRoleServedOverTLSAndARotatedPairWithoutARestart(t *testing.T) {
	bin := testsetup.Binary(t)
	dir := t.TempDir()
	authority := "https://" + siteAPIName
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: authority}})
	ca := certauthority.NewCA(t)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := ca.Issue(t, siteAPIName, "127.0.0.1")
	first.Write(t, certFile, keyFile)
	ownerKey := filepath.Join(dir, "provisioning.key")
	if err := os.WriteFile(ownerKey, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServed(t, bin, "--role", "execution", "--migrate", "--keys-file", files.KeysFile, "--environments-file", files.EnvironmentsFile,
		"--execution-database-url", "sqlite:"+filepath.Join(dir, "execution.sqlite"), "--resource-owner", "http",
		"--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", ownerKey,
		"--admin-listen", "127.0.0.1:0", "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	addr := strings.TrimPrefix(p.base, "http://")

	// Plain HTTP to the TLS listener is not served.
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Error("plain http /healthz answered 200 on the TLS listener")
		}
		_ = resp.Body.Close()
	}
	// A client without the test CA does not trust the server.
	if _, err := http.Get("https://" + addr + "/healthz"); err == nil {
		t.Error("a client with the system roots trusted the test CA's certificate")
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}}}
	for _, u := range []string{"https://" + addr + "/readyz", "https://" + adminAddr(t, p) + "/metrics"} {
		resp, err := trusting.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", u, resp.StatusCode)
		}
	}

	proxy := connectProxy(t, addr)
	key := filepath.Join(dir, "runtime.key")
	if err := os.WriteFile(key, []byte(files.EnvironmentKeys["alpha-k8s"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	record := "file:" + filepath.Join(dir, "installation.json")
	runtime := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"runtime"}, args...)...)
		cmd.Env = []string{"HTTPS_PROXY=" + proxy, "PATH=" + os.Getenv("PATH"), "METALLO_LOG_LEVEL=error"}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := runtime("install", "--journal-dir", filepath.Join(dir, "journals"), "--environment", "alpha-k8s",
		"--authority", authority, "--installation-record", record); err != nil {
		t.Fatalf("runtime install: %v\n%s", err, out)
	}
	check := []string{"check", "--environment", "alpha-k8s", "--authority", authority, "--key-file", key,
		"--installation-record", record, "--retry-for", "1s", "--ca-file", ca.CAFile}
	out, err := runtime(check...)
	if err != nil || !strings.Contains(out, "stream alpha-k8s at "+authority) {
		t.Fatalf("runtime check over TLS: %v\n%s", err, out)
	}
	// Without the CA bundle the Runtime refuses the server's certificate.
	if out, err := runtime(check[:len(check)-2]...); err == nil || !strings.Contains(out, "certificate") {
		t.Errorf("runtime check without --ca-file: want a certificate refusal, got %v\n%s", err, out)
	}

	second := ca.Issue(t, siteAPIName, "127.0.0.1")
	second.Write(t, certFile, keyFile)
	// The bound only ends a test whose rotation never happens (the watcher polls every 10 s).
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := certauthority.ServedSerial(ca.Pool, addr, siteAPIName)
		if err != nil {
			t.Fatalf("handshake during the rotation: %v", err)
		}
		if got.Cmp(second.Serial) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate (serial %v) was never served; still %v", second.Serial, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := certauthority.ServedSerial(ca.Pool, adminAddr(t, p), "127.0.0.1"); err != nil || got.Cmp(second.Serial) != 0 {
		t.Errorf("admin listener after the rotation: serial %v (%v), want %v", got, err, second.Serial)
	}
	if out, err := runtime(check...); err != nil {
		t.Fatalf("runtime check after the rotation: %v\n%s", err, out)
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("the server exited during the rotation")
	}
}

// A central role refuses to serve plain HTTP on an address that is not loopback, the public
// API's or the admin listener's, naming the flag and the TLS flags; the TLS flags come both or
// neither, and the runtime role (no public API) refuses them.
func TestServeRefusesPlainHTTPOffLoopbackAndAHalfPairNamingTheFlags(t *testing.T) {
	base := []string{"serve", "--role", "provisioning", "--waldur-instance", "https://waldur.example.org", "--log-level", "error"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--listen", ":8080"}, []string{"--listen", "--tls-cert-file", "--tls-key-file"}},
		{[]string{"--listen", "0.0.0.0:8080"}, []string{"--listen", "--tls-cert-file"}},
		{[]string{"--admin-listen", ":9090"}, []string{"--admin-listen", "--tls-cert-file", "--tls-key-file"}},
		{[]string{"--tls-cert-file", "tls.crt"}, []string{"--tls-key-file", "both or neither"}},
		{[]string{"--tls-key-file", "tls.key"}, []string{"--tls-cert-file", "both or neither"}},
		{[]string{"--tls-cert-file", "absent.crt", "--tls-key-file", "absent.key"}, []string{"--tls-cert-file", "absent.crt"}},
	} {
		code, stderr := runMain(t, nil, append(slices.Clone(base), tc.args...)...)
		if code == 0 {
			t.Errorf("%v: started", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: the refusal does not say %q:\n%s", tc.args, w, stderr)
			}
		}
	}
	code, stderr := runMain(t, nil, with(runtimeArgs(t, t.TempDir()), "--tls-cert-file", "tls.crt")...)
	if code == 0 || !strings.Contains(stderr, "--tls-cert-file") {
		t.Errorf("runtime with --tls-cert-file: exit %d\n%s", code, stderr)
	}
	if !errors.Is(servingtls.CheckListen("listen", ":1", servingtls.Files{}), servingtls.ErrPlainHTTP) {
		t.Error("CheckListen does not refuse :1")
	}
}
