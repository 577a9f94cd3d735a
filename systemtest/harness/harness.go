// Package harness runs the Site Runtime's system tests, process tests and
// benchmark on real processes: it builds the binaries, starts the
// execution role on a SQLite file, a recording proxy in front of it, and
// Runtime processes (the metallo binary or systemtest/testbin), and reads
// what they leave behind. NewSetup is the one setup of the process tests
// and the native benchmarks on the local cluster. It is test support: no
// production code and not the demo import it (platform/archtest checks).
package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/platform/testsetup"
)

// Binaries are the built executables.
type Binaries struct {
	// Metallo is app/cmd/metallo (the execution role runs from it).
	Metallo string
	// Runtime is systemtest/testbin (the runtime role with the stand-in
	// native executor).
	Runtime string
}

// Build compiles both binaries into dir (testsetup.Build).
func Build(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{Metallo: filepath.Join(dir, "metallo"), Runtime: filepath.Join(dir, "metallo-runtime-test")}
	for out, pkg := range map[string]string{b.Metallo: testsetup.Metallo, b.Runtime: "./systemtest/testbin"} {
		if err := testsetup.Build(ctx, out, pkg); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

// Process is a started subprocess with its output captured.
type Process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// Start starts bin with args and extra environment variables.
func Start(bin string, env []string, args ...string) (*Process, error) {
	p := &Process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	w := writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.out.Write(b)
	})
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Output returns everything the process wrote so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Killed reports whether the process died of SIGKILL (after it exited).
func (p *Process) Killed() bool {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// ExitErr is the exit error (nil for status 0), after the process exited.
func (p *Process) ExitErr() error { return p.err }

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (through its handle, so never to a
// later process that reused the pid).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the exit, up to timeout.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("process %d did not exit within %s; output:\n%s", p.Pid(), timeout, p.Output())
	}
}

// Stop sends SIGTERM and waits for a graceful exit.
func (p *Process) Stop(timeout time.Duration) error {
	if p.Exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait(timeout)
}

// Kill sends SIGKILL and waits.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WaitForLog waits until a line of the output matches re and returns the
// first submatch (or the line).
func (p *Process) WaitForLog(re *regexp.Regexp, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(p.Output(), "\n") {
			if m := re.FindStringSubmatch(line); m != nil {
				if len(m) > 1 {
					return m[1], nil
				}
				return line, nil
			}
		}
		if p.Exited() {
			return "", fmt.Errorf("process exited (%v) before logging %s; output:\n%s", p.err, re, p.Output())
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no log line %s within %s; output:\n%s", re, timeout, p.Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	apiAddr   = regexp.MustCompile(`"msg":"serving API","addr":"([^"]+)"`)
	adminAddr = regexp.MustCompile(`"msg":"serving metrics","addr":"([^"]+)"`)
)

// Site is an execution role on a SQLite file in Dir, reached by Runtimes
// through a recording Proxy (the authority they are configured with).
type Site struct {
	Bin         string
	Dir         string
	Environment string
	// EnvKey is the Runtime's static key file; ServiceKey is Execution's
	// service key.
	EnvKey     string
	ServiceKey string
	Proxy      *Proxy
	Server     *Process
	Addr       string
	client     *http.Client
	envSHA     string
	// direct is the server's own URL when Runtimes reach it without the
	// proxy (StartDirect).
	direct string
	// ServerArgs are appended to the execution server's command line (a
	// later flag overrides an earlier one), e.g. an admin listener for
	// profiling.
	ServerArgs []string
	// Auth, when set, is the environment's auth block in place of the
	// static key: YAML lines indented for the environment's auth: mapping,
	// e.g. a tokenreview block (docs/operations.md).
	Auth string
	// scheme is the server's URL scheme: http, or https after StartTLS.
	scheme string
}

// NewSite prepares keys and a proxy in dir (no server runs yet).
func NewSite(bin, dir string) (*Site, error) {
	s := &Site{Bin: bin, Dir: dir, Environment: "alpha-k8s", client: &http.Client{Timeout: 30 * time.Second}, scheme: "http"}
	envKey, envEntry, err := auth.NewKey(auth.Principal{Kind: auth.KindEnvironment, ID: s.Environment})
	if err != nil {
		return nil, err
	}
	svcKey, svcEntry, err := auth.NewKey(auth.Principal{Kind: "service", ID: "execution"})
	if err != nil {
		return nil, err
	}
	s.envSHA = envEntry.SHA256
	s.EnvKey, s.ServiceKey = filepath.Join(dir, "environment.key"), svcKey
	keys, _ := yaml.Marshal(auth.KeysFile{Keys: []auth.KeyEntry{svcEntry}})
	for name, content := range map[string][]byte{
		"environment.key": []byte(envKey + "\n"), "keys.yaml": keys, "provisioning.key": []byte("unused\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			return nil, err
		}
	}
	if s.Proxy, err = NewProxy(); err != nil {
		return nil, err
	}
	return s, nil
}

// Authority is the URL Runtimes use: the proxy's, or the server's own
// after StartDirect.
func (s *Site) Authority() string {
	if s.direct != "" {
		return s.direct
	}
	return s.Proxy.URL()
}

// StartDirect starts the server on a free loopback port that Runtimes
// reach directly (no proxy: the benchmark's path).
func (s *Site) StartDirect(db string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s.direct = "http://" + addr
	return s.start(db, s.direct, addr)
}

// StartServer starts an execution server on database file db (in Dir)
// whose environment names authority (the proxy's URL when empty), and
// points the proxy at it. A previous server is stopped first.
func (s *Site) StartServer(db, authority string) error {
	if authority == "" {
		authority = s.Authority()
	}
	return s.start(db, authority, "127.0.0.1:0")
}

// StartTLS starts the server over TLS on a free port of host (an address
// of this machine, e.g. the local cluster's bridge address where Pods
// reach it) with the serving pair certFile/keyFile, which must be valid
// for host; caFile verifies it for the test's own requests. Runtimes reach
// it directly (no proxy) at the returned authority, https://host:port.
func (s *Site) StartTLS(db, host, certFile, keyFile, caFile string) (string, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s.direct, s.scheme = "https://"+addr, "https"
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	s.ServerArgs = append(s.ServerArgs, "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	return s.direct, s.start(db, s.direct, addr)
}

func (s *Site) start(db, authority, listen string) error {
	if s.Server != nil {
		if err := s.Server.Stop(30 * time.Second); err != nil {
			return err
		}
	}
	auth := "      key_sha256: " + s.envSHA + "\n"
	if s.Auth != "" {
		auth = s.Auth
	}
	envs := fmt.Sprintf("environments:\n  - id: %s\n    site: alpha\n    authority: %s\n    auth:\n%s", s.Environment, authority, auth)
	envFile := filepath.Join(s.Dir, "environments-"+strings.TrimSuffix(db, ".sqlite")+".yaml")
	if err := os.WriteFile(envFile, []byte(envs), 0o600); err != nil {
		return err
	}
	args := append([]string{"serve", "--role", "execution", "--resource-owner", "http",
		"--provisioning-url", "http://127.0.0.1:1", "--provisioning-key-file", filepath.Join(s.Dir, "provisioning.key"),
		"--environments-file", envFile, "--keys-file", filepath.Join(s.Dir, "keys.yaml"),
		"--execution-database-url", "sqlite:" + filepath.Join(s.Dir, db), "--migrate",
		"--listen", listen, "--admin-listen", "", "--log-format", "json"}, s.ServerArgs...)
	p, err := Start(s.Bin, nil, args...)
	if err != nil {
		return err
	}
	addr, err := p.WaitForLog(apiAddr, time.Minute)
	if err != nil {
		p.Kill()
		return err
	}
	s.Server, s.Addr = p, addr
	s.Proxy.SetBackend(addr)
	return nil
}

// Close stops the server and the proxy.
func (s *Site) Close() {
	if s.Server != nil {
		_ = s.Server.Stop(30 * time.Second)
		s.Server.Kill()
	}
	s.Proxy.Close()
}

func (s *Site) execution(method, path string, body []byte, out any) (int, error) {
	req, err := http.NewRequest(method, s.scheme+"://"+s.Addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.ServiceKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(raw, out)
	}
	return resp.StatusCode, nil
}

// RuntimeStop is a stop report as the execution role's environment
// listing shows it (GET /execution/v1/environments;
// docs/operations.md#operator-reads).
type RuntimeStop struct {
	Reason         string `json:"reason"`
	Sequence       int64  `json:"sequence"`
	RuntimeVersion string `json:"runtime_version"`
	InstallationID string `json:"installation_id"`
	Message        string `json:"message"`
}

// ListedStop returns the stop the environment listing shows for the
// site's environment, nil when it shows none.
func (s *Site) ListedStop() (*RuntimeStop, error) {
	var body struct {
		Environments []struct {
			Environment string       `json:"environment"`
			Stop        *RuntimeStop `json:"stop"`
		} `json:"environments"`
	}
	if _, err := s.execution(http.MethodGet, "/execution/v1/environments", nil, &body); err != nil {
		return nil, err
	}
	for _, e := range body.Environments {
		if e.Environment == s.Environment {
			return e.Stop, nil
		}
	}
	return nil, fmt.Errorf("the listing has no environment %s", s.Environment)
}

// Append appends a command (Execution's route) and returns its sequence.
func (s *Site) Append(raw []byte) (int64, error) {
	var r siteprotocol.AppendReceipt
	_, err := s.execution(http.MethodPost, "/execution/v1/streams/"+s.Environment+"/commands", raw, &r)
	return r.Sequence, err
}

// Command reads a command and its recorded result (Execution's route).
func (s *Site) Command(id string) (siteprotocol.CommandRecord, error) {
	var r siteprotocol.CommandRecord
	_, err := s.execution(http.MethodGet, "/execution/v1/streams/"+s.Environment+"/commands/"+id, nil, &r)
	return r, err
}

// Runtime is how a Runtime process is configured.
type Runtime struct {
	Bin        string
	Site       *Site
	JournalDir string
	Record     string
	Heartbeat  string
	Effects    string
	Policy     string
	// Grants is the repository grants file (no credentials: the stand-in
	// executor checks nothing out).
	Grants      string
	Authority   string
	Environment string
	// KeyFile is the Runtime's --key-file (the Site's environment key
	// unless a test points it elsewhere, e.g. at a rotated credential).
	KeyFile string
	// Kubeconfig is the Site cluster's kubeconfig; NewRuntime writes one
	// naming an unreachable loopback API server (the stand-in executor
	// never calls it).
	Kubeconfig string
}

// unreachableKubeconfig names an API server on a loopback port nothing
// listens on.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`

// NewRuntime lays out a Runtime's files under dir (journals in
// dir/journals, which install creates).
func NewRuntime(bin string, site *Site, dir string) (*Runtime, error) {
	r := &Runtime{Bin: bin, Site: site, JournalDir: filepath.Join(dir, "journals"), Record: filepath.Join(dir, "installation.json"),
		Heartbeat: filepath.Join(dir, "heartbeat"), Effects: filepath.Join(dir, "effects.jsonl"), Policy: filepath.Join(dir, "policy.yaml"), Grants: filepath.Join(dir, "grants.yaml"),
		Authority: site.Authority(), Environment: site.Environment, KeyFile: site.EnvKey, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	if err := os.WriteFile(r.Kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(r.Grants, []byte("# repository credentials per Project\n[]\n"), 0o600); err != nil {
		return nil, err
	}
	return r, os.WriteFile(r.Policy, []byte("# members allowed per Project\n[]\n"), 0o600)
}

// Install runs `runtime install`.
func (r *Runtime) Install() (string, error) {
	out, err := exec.Command(r.Bin, "runtime", "install", "--journal-dir", r.JournalDir, "--environment", r.Environment,
		"--authority", r.Authority, "--installation-record", "file:"+r.Record, "--log-level", "error").CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("runtime install: %v: %s", err, out)
	}
	return string(out), nil
}

// Check runs `runtime check` (one read-only pull) and returns its output.
func (r *Runtime) Check() (string, error) {
	out, err := exec.Command(r.Bin, "runtime", "check", "--environment", r.Environment, "--authority", r.Authority,
		"--key-file", r.KeyFile, "--installation-record", "file:"+r.Record, "--retry-for", "10s").CombinedOutput()
	return string(out), err
}

// Args returns the serve command line; extra flags are appended.
func (r *Runtime) Args(extra ...string) []string {
	return append([]string{"serve", "--role", "runtime", "--journal-dir", r.JournalDir, "--environment", r.Environment,
		"--authority", r.Authority, "--key-file", r.KeyFile, "--heartbeat-file", r.Heartbeat,
		"--batch-image", BatchImage,
		"--permissions", "policy:" + r.Policy, "--repository-grants", "file:" + r.Grants, "--installation-record", "file:" + r.Record, "--kubeconfig", r.Kubeconfig,
		"--admin-listen", "127.0.0.1:0", "--liveness-bound", LivenessBound.String(), "--pull-wait", "1s",
		"--backoff-initial", "20ms", "--backoff-max", "500ms", "--log-format", "json"}, extra...)
}

// Start starts a Runtime; failpoints arms crash points (empty: none).
func (r *Runtime) Start(failpoints string, extra ...string) (*Process, error) {
	env := []string{EffectsEnv + "=" + r.Effects}
	if failpoints != "" {
		env = append(env, "METALLO_FAILPOINTS="+failpoints)
	}
	return Start(r.Bin, env, r.Args(extra...)...)
}

// AdminAddr waits for the Runtime's metrics listener address.
func AdminAddr(p *Process) (string, error) { return p.WaitForLog(adminAddr, time.Minute) }

// LivenessBound is the --liveness-bound of every Runtime the harness
// starts and of its liveness probe.
const LivenessBound = 3 * time.Second

// Liveness runs `runtime liveness` and returns its output and error.
func (r *Runtime) Liveness() (string, error) {
	out, err := exec.Command(r.Bin, "runtime", "liveness", "--heartbeat-file", r.Heartbeat, "--liveness-bound", LivenessBound.String()).CombinedOutput()
	return string(out), err
}

// Metric scrapes addr's /metrics and returns the value of the series
// written exactly as series (e.g. `metallo_runtime_stopped{reason="x"}`);
// found is false when absent.
func Metric(addr, series string) (value float64, found bool, err error) {
	values, err := Metrics(addr, series)
	if err != nil {
		return 0, false, err
	}
	value, found = values[series]
	return value, found, nil
}

// Metrics scrapes addr's /metrics once and returns the values of the
// series written exactly as given, read from the same scrape (so they
// describe one moment); a series that is absent has no entry.
func Metrics(addr string, series ...string) (map[string]float64, error) {
	// Uncompressed: a gzip writer (most of a megabyte) pooled by the
	// metrics handler would otherwise sit in the heap being measured.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	values := make(map[string]float64, len(series))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range series {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				if err != nil {
					return nil, fmt.Errorf("metric %s: %w", name, err)
				}
				values[name] = v
			}
		}
	}
	return values, sc.Err()
}

// Snapshot maps every file of dir (-wal and -shm included) to the
// SHA-256 of its bytes.
func Snapshot(dir string) (map[string]string, error) {
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return out, nil
}

// SnapshotDiff describes how two snapshots differ ("" when equal).
func SnapshotDiff(before, after map[string]string) string {
	var diff []string
	for k, v := range before {
		switch w, ok := after[k]; {
		case !ok:
			diff = append(diff, k+" vanished")
		case w != v:
			diff = append(diff, k+" changed")
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diff = append(diff, k+" appeared")
		}
	}
	sort.Strings(diff)
	return strings.Join(diff, ", ")
}

// Put is one result PUT that passed through the proxy.
type Put struct {
	Sequence int64
	Body     []byte
	Status   int
	Response []byte
	// Dropped is true when the proxy forwarded the PUT, the server
	// answered, and the proxy dropped the answer (closed the connection).
	Dropped bool
}

// Proxy forwards every request to the execution server, records result
// PUTs, and can drop the answers of the next PUTs after the server has
// committed them (a lost acknowledgement).
type Proxy struct {
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	mu       sync.Mutex
	backend  string
	puts     []Put
	dropNext int
}

// NewProxy listens on a loopback port.
func NewProxy() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetBackend points the proxy at addr (host:port).
func (p *Proxy) SetBackend(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = addr
}

// DropNextResponses drops the answers of the next n result PUTs.
func (p *Proxy) DropNextResponses(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropNext = n
}

// Puts returns the recorded result PUTs in order.
func (p *Proxy) Puts() []Put {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Put(nil), p.puts...)
}

// Close stops the proxy.
func (p *Proxy) Close() { _ = p.srv.Close() }

var resultPath = regexp.MustCompile(`/commands/(\d+)/result$`)

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+backend+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if m := resultPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPut {
		seq, _ := strconv.ParseInt(m[1], 10, 64)
		p.mu.Lock()
		drop := p.dropNext > 0
		if drop {
			p.dropNext--
		}
		p.puts = append(p.puts, Put{Sequence: seq, Body: body, Status: resp.StatusCode, Response: answer, Dropped: drop})
		p.mu.Unlock()
		if drop {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
