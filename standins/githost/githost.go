// Package githost stands in for a Git host outside Metallo (the member's
// repositories; docs/site-runtime.md#repository-grants): a real HTTPS Git
// host with LFS, Gitea (built from source by deploy/githost into
// ~/.cache/metallo/githost, keyed by its go.mod and go.sum), on a database
// its owner gives it, with a TLS certificate of a CA made for it. Its
// owner creates users, private repositories and scoped access tokens
// through Gitea's API and pushes content with git and git-lfs; everything
// is removed when the owner ends (the process stopped, the directories
// deleted).
//
// The owner is a test (platform/gittest starts a host on a fresh database
// of the local PostgreSQL server and marks the Git host lane) or a program
// standing in for one (make demo, deploy/demo).
package githost

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Owner is what a Host needs of its owner: a test (testing.TB has every
// method), or a program standing in for one. Fatal and Fatalf must not
// return; Cleanup's functions run when the owner ends, the last first.
type Owner interface {
	Helper()
	Log(args ...any)
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

// Host is a running Gitea for one test.
type Host struct {
	// URL is the host's base URL, https://127.0.0.1:PORT (no trailing /),
	// or https://IP:PORT when StartReachableAt named IP.
	URL     string
	extraIP net.IP
	// ProtocolV0URL is the same host behind a proxy that drops the
	// Git-Protocol header, so it speaks only Git's protocol v0 and refuses
	// a fetch of an unadvertised commit (an older server).
	ProtocolV0URL string
	// CAFile is the PEM file of the CA the host's certificate chains to.
	CAFile string
	// Admin is the administrator.
	Admin User

	tb         Owner
	dir        string
	adminToken string
	client     *http.Client
	log        string
}

// User is a Gitea user with its password.
type User struct {
	Name     string
	Password string
}

// Repo is a repository on the host.
type Repo struct {
	Owner, Name string
	// URL is its HTTPS clone URL (no credentials).
	URL string
	// V0URL is its clone URL through the protocol v0 proxy.
	V0URL string
}

// Token is an access token as the host lists it.
type Token struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

// coldBuildBudget is what a test binary's -timeout must allow for building
// Gitea when it is not in the cache.
const coldBuildBudget = 25 * time.Minute

// Options are where a Host keeps its data and listens.
type Options struct {
	// DatabaseURL is an empty PostgreSQL database of its own
	// (postgres://…); the owner creates and removes it.
	DatabaseURL string
	// ReachableAt, when set, is an IP address of this machine to listen on
	// instead of loopback (the real node's bridge address, where its Pods
	// reach this machine; docs/testing.md#the-real-node): Gitea's ROOT_URL
	// names it, so the LFS batch API's hrefs do too, and the server
	// certificate names it as well as 127.0.0.1 and localhost.
	ReachableAt string
}

// Start builds Gitea if needed, starts it for its owner and returns it;
// URL is https://127.0.0.1:PORT, or https://IP:PORT at Options.ReachableAt.
// It is stopped and its files removed when the owner ends. It fails the
// owner (Fatalf) when git or git-lfs is missing, the build fails, the
// address is no IP address or Gitea does not start.
func Start(tb Owner, o Options) *Host {
	tb.Helper()
	var addr net.IP
	if o.ReachableAt != "" {
		if addr = net.ParseIP(o.ReachableAt); addr == nil {
			tb.Fatalf("Git host: %q is no IP address", o.ReachableAt)
		}
	}
	h, err := start(tb, addr, o.DatabaseURL)
	if err != nil {
		tb.Fatalf("Git host cannot start: %v", err)
	}
	return h
}

func start(tb Owner, extraIP net.IP, database string) (*Host, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, errors.New("git is not installed (make test installs git and git-lfs)")
	}
	if err := exec.Command("git", "lfs", "version").Run(); err != nil {
		return nil, errors.New("git-lfs is not installed (make test installs it: apt-get install git-lfs)")
	}
	cache, err := build()
	if err != nil {
		return nil, err
	}
	dir := tb.TempDir()
	h := &Host{tb: tb, dir: dir, log: filepath.Join(dir, "log", "gitea.log"), extraIP: extraIP}
	certFile, keyFile, pool, err := h.certificates()
	if err != nil {
		return nil, err
	}
	h.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	dbURL, err := url.Parse(database)
	if err != nil {
		return nil, err
	}
	listen := net.IPv4(127, 0, 0, 1)
	if extraIP != nil {
		listen = extraIP
	}
	port, err := freePort(listen)
	if err != nil {
		return nil, err
	}
	h.URL = "https://" + net.JoinHostPort(listen.String(), strconv.Itoa(port))
	ini := filepath.Join(dir, "custom", "conf", "app.ini")
	if err := os.MkdirAll(filepath.Dir(ini), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(ini, []byte(appIni(dir, filepath.Join(cache, "share"), listen.String(), port, certFile, keyFile, dbURL)), 0o600); err != nil {
		return nil, err
	}
	gitea := filepath.Join(cache, "bin", "gitea")
	env := append(os.Environ(), "GITEA_WORK_DIR="+dir, "GITEA_CUSTOM="+filepath.Join(dir, "custom"),
		"GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT=true", "HOME="+filepath.Join(dir, "home"))
	run := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gitea, append(args, "--config", ini)...)
		cmd.Env, cmd.Dir = env, dir
		return cmd.CombinedOutput()
	}
	if out, err := run("migrate"); err != nil {
		return nil, fmt.Errorf("gitea migrate: %v: %s", err, lastLines(string(out), 20))
	}
	var b [9]byte
	_, _ = rand.Read(b[:])
	h.Admin = User{Name: "metallo-admin", Password: "A1-" + hex.EncodeToString(b[:])}
	out, err := run("admin", "user", "create", "--admin", "--username", h.Admin.Name, "--password", h.Admin.Password,
		"--email", "admin@metallo.invalid", "--must-change-password=false", "--access-token", "--access-token-name", "tests",
		"--access-token-scopes", "all")
	if err != nil {
		return nil, fmt.Errorf("gitea admin user create: %v: %s", err, lastLines(string(out), 20))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, tok, ok := strings.Cut(line, "Access token was successfully created... "); ok {
			h.adminToken = strings.TrimSpace(tok)
		}
	}
	if h.adminToken == "" {
		return nil, fmt.Errorf("gitea admin user create printed no access token: %s", lastLines(string(out), 10))
	}
	cmd := exec.Command(gitea, "web", "--config", ini)
	cmd.Env, cmd.Dir = env, dir
	stderr, err := os.Create(filepath.Join(dir, "gitea.stderr"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gitea web: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-exited:
			_ = err // stopped by the signal
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			tb.Logf("githost: Gitea did not stop within 10 s of SIGTERM; killed: %v", <-exited)
		}
		_ = stderr.Close()
		if tb.Failed() {
			b, _ := os.ReadFile(h.log)
			tb.Logf("githost: the last lines of the Gitea log:\n%s", lastLines(string(b), 30))
		}
	})
	if err := h.waitReady(exited); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "gitea.stderr"))
		return nil, fmt.Errorf("%v\n%s", err, lastLines(string(b), 30))
	}
	if err := h.startV0Proxy(certFile, keyFile, pool); err != nil {
		return nil, err
	}
	tb.Logf("githost: Gitea on %s (protocol v0 proxy %s), data in %s", h.URL, h.ProtocolV0URL, dir)
	return h, nil
}

// build returns the cache directory of the Gitea build, building it when
// absent (deploy/githost/githost.sh).
func build() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "deploy", "githost", "githost.sh")
	if exec.Command("bash", script, "built").Run() != nil {
		if timeout := testTimeout(); timeout > 0 && timeout < coldBuildBudget {
			return "", fmt.Errorf("gitea is not built: a cold build takes about 10 minutes, more than this test binary's -timeout %s allows; run `make githost-build` first", timeout)
		}
		fmt.Fprintf(os.Stderr, "githost: building Gitea with %s build (a first build takes about 10 minutes)\n", script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), coldBuildBudget)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "build")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s build: %v\n%s", script, err, lastLines(stderr.String(), 30))
	}
	return strings.TrimSpace(string(out)), nil
}

// appIni is Gitea's configuration: it listens on addr:port and its
// ROOT_URL (the base of every URL it hands out, LFS hrefs included) is
// https://addr:port/.
func appIni(dir, share, addr string, port int, certFile, keyFile string, db *url.URL) string {
	host := addr
	if strings.Contains(addr, ":") {
		host = "[" + addr + "]"
	}
	return fmt.Sprintf(`APP_NAME = metallo tests
RUN_MODE = prod
WORK_PATH = %[1]s

[server]
PROTOCOL = https
HTTP_ADDR = %[10]s
HTTP_PORT = %[3]d
ROOT_URL = https://%[11]s:%[3]d/
DOMAIN = %[10]s
CERT_FILE = %[4]s
KEY_FILE = %[5]s
STATIC_ROOT_PATH = %[2]s
APP_DATA_PATH = %[1]s/data
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = true

[lfs]
PATH = %[1]s/data/lfs

[database]
DB_TYPE = postgres
HOST = %[6]s
NAME = %[7]s
USER = %[8]s
PASSWD = %[9]s
SSL_MODE = disable

[repository]
ROOT = %[1]s/repositories
DEFAULT_PRIVATE = private
DISABLE_STARS = true

[git]
; no uploadpack.allowAnySHA1InWant: over protocol v0 a fetch of an unadvertised commit is refused
DISABLE_PARTIAL_CLONE = true

[security]
INSTALL_LOCK = true
PASSWORD_COMPLEXITY = off
MIN_PASSWORD_LENGTH = 8

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = true
DEFAULT_KEEP_EMAIL_PRIVATE = true
ENABLE_NOTIFY_MAIL = false

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[queue]
TYPE = channel

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[oauth2]
ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = file
LEVEL = Info
ROOT_PATH = %[1]s/log
`, dir, share, port, certFile, keyFile, db.Host, strings.TrimPrefix(db.Path, "/"), db.User.Username(), password(db), addr, host)
}

func password(u *url.URL) string {
	p, _ := u.User.Password()
	return p
}

func (h *Host) waitReady(exited <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("gitea web exited: %v", err)
		default:
		}
		resp, err := h.client.Get(h.URL + "/api/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gitea web did not become healthy at %s within 2 minutes: %v", h.URL, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startV0Proxy serves the host through a reverse proxy that drops the
// Git-Protocol header (so Git falls back to protocol v0).
func (h *Host) startV0Proxy(certFile, keyFile string, pool *x509.CertPool) error {
	target, _ := url.Parse(h.URL)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.Out.Header.Del("Git-Protocol")
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	srv := httptest.NewUnstartedServer(proxy)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	h.tb.Cleanup(srv.Close)
	h.ProtocolV0URL = srv.URL
	return nil
}

// certificates writes a CA and a server certificate for 127.0.0.1 and
// localhost into the host's directory.
func (h *Host) certificates() (certFile, keyFile string, pool *x509.CertPool, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metallo githost CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	if h.extraIP != nil {
		leaf.IPAddresses = append(leaf.IPAddresses, h.extraIP)
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	tlsDir := filepath.Join(h.dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return "", "", nil, err
	}
	h.CAFile = filepath.Join(tlsDir, "ca.pem")
	certFile, keyFile = filepath.Join(tlsDir, "cert.pem"), filepath.Join(tlsDir, "key.pem")
	for f, block := range map[string]*pem.Block{
		h.CAFile: {Type: "CERTIFICATE", Bytes: caDER},
		certFile: {Type: "CERTIFICATE", Bytes: der},
		keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(f, pem.EncodeToMemory(block), 0o600); err != nil {
			return "", "", nil, err
		}
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return certFile, keyFile, pool, nil
}

func freePort(ip net.IP) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// api calls the host's API as the administrator (or as user with its
// password when user is not nil); out, when not nil, receives the JSON
// answer. It returns the status.
func (h *Host) api(ctx context.Context, user *User, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.URL+"/api/v1"+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if user != nil {
		req.SetBasicAuth(user.Name, user.Password)
	} else {
		req.Header.Set("Authorization", "token "+h.adminToken)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (h *Host) must(status int, err error) {
	h.tb.Helper()
	if err != nil {
		h.tb.Fatalf("githost: %v", err)
	}
}

// CreateUser creates a user with a random password.
func (h *Host) CreateUser(name string) User {
	h.tb.Helper()
	var b [9]byte
	_, _ = rand.Read(b[:])
	u := User{Name: name, Password: "P1-" + hex.EncodeToString(b[:])}
	h.must(h.api(context.Background(), nil, http.MethodPost, "/admin/users", map[string]any{
		"username": name, "email": name + "@metallo.invalid", "password": u.Password, "must_change_password": false,
	}, nil))
	return u
}

// CreateRepo creates an empty private repository of owner.
func (h *Host) CreateRepo(owner User, name string) Repo {
	h.tb.Helper()
	h.must(h.api(context.Background(), nil, http.MethodPost, "/admin/users/"+owner.Name+"/repos", map[string]any{
		"name": name, "private": true, "default_branch": "main",
	}, nil))
	return Repo{Owner: owner.Name, Name: name, URL: h.URL + "/" + owner.Name + "/" + name + ".git",
		V0URL: h.ProtocolV0URL + "/" + owner.Name + "/" + name + ".git"}
}

// AddReader gives user read access to repo.
func (h *Host) AddReader(repo Repo, user User) {
	h.tb.Helper()
	h.must(h.api(context.Background(), nil, http.MethodPut, "/repos/"+repo.Owner+"/"+repo.Name+"/collaborators/"+user.Name,
		map[string]any{"permission": "read"}, nil))
}

// CreateToken mints an access token of user with scopes (e.g.
// "read:repository"); name must be unique for the user. It returns the
// token's ID and its secret.
func (h *Host) CreateToken(ctx context.Context, user User, name string, scopes ...string) (int64, string, error) {
	var out struct {
		ID   int64  `json:"id"`
		SHA1 string `json:"sha1"`
	}
	if _, err := h.api(ctx, &user, http.MethodPost, "/users/"+user.Name+"/tokens", map[string]any{"name": name, "scopes": scopes}, &out); err != nil {
		return 0, "", err
	}
	if out.ID == 0 || out.SHA1 == "" {
		return 0, "", fmt.Errorf("token %s of %s: no ID or secret in the answer", name, user.Name)
	}
	return out.ID, out.SHA1, nil
}

// DeleteToken deletes user's token id; existed is false when the host had
// no such token (404).
func (h *Host) DeleteToken(ctx context.Context, user User, id int64) (existed bool, err error) {
	status, err := h.api(ctx, &user, http.MethodDelete, fmt.Sprintf("/users/%s/tokens/%d", user.Name, id), nil, nil)
	if status == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// Tokens lists user's access tokens.
func (h *Host) Tokens(ctx context.Context, user User) ([]Token, error) {
	var out []Token
	_, err := h.api(ctx, &user, http.MethodGet, "/users/"+user.Name+"/tokens?limit=50", nil, &out)
	return out, err
}

// Client returns an HTTP client that trusts the host's CA.
func (h *Host) Client() *http.Client { return h.client }

// GitEnv is the environment for git and git-lfs run by a test against the
// host: no system or global configuration, the host's CA, no prompts.
func (h *Host) GitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_SSL_CAINFO="+h.CAFile, "LC_ALL=C", "HOME="+filepath.Join(h.dir, "home"))
}

// repoRoot walks up from the working directory to the main module's
// go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/pharos-metallo/metallo\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no github.com/pharos-metallo/metallo go.mod above the working directory")
		}
		dir = parent
	}
}

// testTimeout is the test binary's -timeout (0: none).
func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return d
		}
	}
	return 0
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
