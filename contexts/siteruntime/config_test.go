package siteruntime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/heartbeat"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/standins/certauthority"
)

// validConfig returns a serve configuration whose files exist.
func validConfig(t *testing.T) siteruntime.Config {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	policy := filepath.Join(dir, "policy.yaml")
	grantsFile := filepath.Join(dir, "grants.yaml")
	for f, body := range map[string]string{key: "k\n", policy: "[]\n", grantsFile: "[]\n"} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return siteruntime.Config{
		JournalDir: filepath.Join(dir, "journals"), Environment: "alpha-k8s", Authority: "https://site.example",
		KeyFile: key, HeartbeatFile: filepath.Join(dir, "heartbeat"), LivenessBound: 2 * time.Minute,
		BatchImage:  "registry.example/batch@sha256:" + strings.Repeat("a", 64),
		Permissions: "policy:" + policy, RepositoryGrants: "file:" + grantsFile, RepositoryGrantsBound: 2 * time.Minute, InstallationRecord: "file:" + filepath.Join(dir, "installation.json"),
		DeletionWait: 2 * time.Minute, KubeAPIQPS: 50, KubeAPIBurst: 100, ProgressDeadline: 600 * time.Second, PermissionsBound: 2 * time.Minute, PullLimit: 100, PullWait: 30 * time.Second,
		BackoffInitial: 200 * time.Millisecond, BackoffMax: 30 * time.Second,
	}
}

// flagsNamed returns the flags of the *config.FlagError values joined in err.
func flagsNamed(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*config.FlagError); ok {
			out = append(out, fe.Flag)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

func TestServeConfigurationIsRefusedNamingTheFlag(t *testing.T) {
	if err := validConfig(t).Validate(); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ca := certauthority.NewCA(t).CAFile
	noPEM := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	overHTTPS := validConfig(t)
	overHTTPS.Permissions, overHTTPS.PermissionsCAFile = "http:https://perms.example", ca
	overHTTPS.RepositoryGrants, overHTTPS.RepositoryGrantsCAFile = "http:https://grants.example", ca
	overHTTPS.CAFile = ca
	if err := overHTTPS.Validate(); err != nil {
		t.Fatalf("http: providers with their CA bundles: %v", err)
	}
	cases := map[string]struct {
		flag   string
		change func(c *siteruntime.Config)
	}{
		"no environment": {"environment", func(c *siteruntime.Config) { c.Environment = "" }},
		"serving runtime format not a DNS label": {"serving-runtimes", func(c *siteruntime.Config) {
			c.ServingRuntimes = map[string]string{"Sk_Learn": "metallo-sklearnserver"}
		}},
		"serving runtime not a DNS subdomain": {"serving-runtimes", func(c *siteruntime.Config) {
			c.ServingRuntimes = map[string]string{"sklearn": "Not A Runtime"}
		}},
		"environment not an ID":      {"environment", func(c *siteruntime.Config) { c.Environment = "alpha k8s/x" }},
		"relative authority":         {"authority", func(c *siteruntime.Config) { c.Authority = "site.example/api" }},
		"authority without a host":   {"authority", func(c *siteruntime.Config) { c.Authority = "https:///api" }},
		"plain http off loopback":    {"authority", func(c *siteruntime.Config) { c.Authority = "http://site.example" }},
		"authority with credentials": {"authority", func(c *siteruntime.Config) { c.Authority = "https://u:p@site.example" }},
		"missing key file":           {"key-file", func(c *siteruntime.Config) { c.KeyFile = filepath.Join(notADir, "x") }},
		"token and key":              {"key-file", func(c *siteruntime.Config) { c.TokenFile = c.KeyFile }},
		"no credential":              {"token-file", func(c *siteruntime.Config) { c.KeyFile = "" }},
		"missing CA":                 {"ca-file", func(c *siteruntime.Config) { c.CAFile = filepath.Join(t.TempDir(), "ca.pem") }},
		"CA without PEM":             {"ca-file", func(c *siteruntime.Config) { c.CAFile = noPEM }},
		"missing permissions CA": {"permissions-ca-file", func(c *siteruntime.Config) {
			c.Permissions, c.PermissionsCAFile = "http:https://perms.example", filepath.Join(t.TempDir(), "ca.pem")
		}},
		"permissions CA without PEM": {"permissions-ca-file", func(c *siteruntime.Config) {
			c.Permissions, c.PermissionsCAFile = "http:https://perms.example", noPEM
		}},
		"permissions CA with a policy": {"permissions-ca-file", func(c *siteruntime.Config) { c.PermissionsCAFile = ca }},
		"missing grants CA": {"repository-grants-ca-file", func(c *siteruntime.Config) {
			c.RepositoryGrants, c.RepositoryGrantsCAFile = "http:https://grants.example", filepath.Join(t.TempDir(), "ca.pem")
		}},
		"grants CA without PEM": {"repository-grants-ca-file", func(c *siteruntime.Config) {
			c.RepositoryGrants, c.RepositoryGrantsCAFile = "http:https://grants.example", noPEM
		}},
		"grants CA with a grants file": {"repository-grants-ca-file", func(c *siteruntime.Config) { c.RepositoryGrantsCAFile = ca }},
		"missing kubeconfig":           {"kubeconfig", func(c *siteruntime.Config) { c.Kubeconfig = filepath.Join(t.TempDir(), "kc") }},
		"no heartbeat file":            {"heartbeat-file", func(c *siteruntime.Config) { c.HeartbeatFile = "" }},
		"permissions over plain http":  {"permissions", func(c *siteruntime.Config) { c.Permissions = "http:http://perms.example" }},
		"permissions relative URL":     {"permissions", func(c *siteruntime.Config) { c.Permissions = "http:perms.example" }},
		"no grant provider":            {"repository-grants", func(c *siteruntime.Config) { c.RepositoryGrants = "" }},
		"grants over plain http":       {"repository-grants", func(c *siteruntime.Config) { c.RepositoryGrants = "http:http://grants.example" }},
		"missing grants file":          {"repository-grants", func(c *siteruntime.Config) { c.RepositoryGrants = "file:" + filepath.Join(notADir, "x") }},
		"unknown grants kind":          {"repository-grants", func(c *siteruntime.Config) { c.RepositoryGrants = "vault:x" }},
		"zero grants bound":            {"repository-grants-bound", func(c *siteruntime.Config) { c.RepositoryGrantsBound = 0 }},
		"no record":                    {"installation-record", func(c *siteruntime.Config) { c.InstallationRecord = "" }},
		"zero deletion wait":           {"deletion-wait", func(c *siteruntime.Config) { c.DeletionWait = 0 }},
		"negative proxy timeout":       {"proxy-timeout", func(c *siteruntime.Config) { c.ProxyTimeout = -time.Second }},
		"negative read-logs timeout":   {"read-logs-timeout", func(c *siteruntime.Config) { c.ReadLogsTimeout = -time.Second }},
		"read-file wait below timeout": {"read-file-wait", func(c *siteruntime.Config) { c.ReadFileWait = 30 * time.Second }},
		"checkout wait below timeout":  {"checkout-wait", func(c *siteruntime.Config) { c.CheckoutWait = 10 * time.Minute }},
		"zero kube API QPS":            {"kube-api-qps", func(c *siteruntime.Config) { c.KubeAPIQPS = 0 }},
		"kube API burst below QPS":     {"kube-api-burst", func(c *siteruntime.Config) { c.KubeAPIBurst = 10 }},
		"zero progress deadline":       {"progress-deadline", func(c *siteruntime.Config) { c.ProgressDeadline = 0 }},
		"fractional progress deadline": {"progress-deadline", func(c *siteruntime.Config) { c.ProgressDeadline = 1500 * time.Millisecond }},
		"negative permissions bound":   {"permissions-bound", func(c *siteruntime.Config) { c.PermissionsBound = -time.Second }},
		"zero pull wait":               {"pull-wait", func(c *siteruntime.Config) { c.PullWait = 0 }},
		"pull wait over 30s":           {"pull-wait", func(c *siteruntime.Config) { c.PullWait = 31 * time.Second }},
		"pull limit over 100":          {"pull-limit", func(c *siteruntime.Config) { c.PullLimit = 101 }},
		"zero initial backoff":         {"backoff-initial", func(c *siteruntime.Config) { c.BackoffInitial = 0 }},
		"backoff max below initial":    {"backoff-max", func(c *siteruntime.Config) { c.BackoffMax = 100 * time.Millisecond }},
		"negative liveness bound":      {"liveness-bound", func(c *siteruntime.Config) { c.LivenessBound = -time.Minute }},
		"liveness bound at wait+max":   {"liveness-bound", func(c *siteruntime.Config) { c.LivenessBound = time.Minute }},
		"bad gpu mapping":              {"gpu-resources", func(c *siteruntime.Config) { c.GPUResources = map[string]string{"gpu.amd": "gpu"} }},
		"bad annotation":               {"batch-pod-annotations", func(c *siteruntime.Config) { c.BatchPodAnnotations = map[string]string{"not a key!": "x"} }},
		"bad node selector":            {"pod-node-selector", func(c *siteruntime.Config) { c.PodNodeSelector = map[string]string{"pool": "a b"} }},
		"bad toleration":               {"pod-tolerations", func(c *siteruntime.Config) { c.PodTolerations = []string{"k:Sometimes"} }},
		"negative run-as-user":         {"pod-run-as-user", func(c *siteruntime.Config) { c.PodRunAsUser = -1 }},
		"fs group beyond a gid":        {"pod-fs-group", func(c *siteruntime.Config) { c.PodFSGroup = 1 << 40 }},
		"fractional read-file timeout": {"read-file-timeout", func(c *siteruntime.Config) { c.ReadFileTimeout = 1500 * time.Millisecond }},
		"read-file timeout over 1h":    {"read-file-timeout", func(c *siteruntime.Config) { c.ReadFileTimeout = time.Hour + time.Second }},
	}
	for name, tc := range cases {
		c := validConfig(t)
		tc.change(&c)
		err := c.Validate()
		if got := flagsNamed(err); len(got) != 1 || got[0] != tc.flag {
			t.Errorf("%s: want one error naming --%s, got %v (%v)", name, tc.flag, got, err)
		}
	}
}

// runtime install checks the flags it shares with serve by serve's rules,
// before it writes anything.
func TestInstallAndCheckConfigurationsAreRefusedByServesRules(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	install := map[string]struct {
		flag   string
		change func(c *siteruntime.Config)
	}{
		"no journal dir":          {"journal-dir", func(c *siteruntime.Config) { c.JournalDir = "" }},
		"journal dir is a file":   {"journal-dir", func(c *siteruntime.Config) { c.JournalDir = notADir }},
		"environment not an ID":   {"environment", func(c *siteruntime.Config) { c.Environment = "-alpha" }},
		"plain http off loopback": {"authority", func(c *siteruntime.Config) { c.Authority = "http://10.0.0.1:8080" }},
		"not a URL":               {"authority", func(c *siteruntime.Config) { c.Authority = "site.example" }},
		"unknown record kind":     {"installation-record", func(c *siteruntime.Config) { c.InstallationRecord = "secret:ns/x" }},
		"missing kubeconfig":      {"kubeconfig", func(c *siteruntime.Config) { c.Kubeconfig = filepath.Join(t.TempDir(), "kc") }},
	}
	if err := validConfig(t).ValidateInstall(); err != nil {
		t.Fatalf("a valid install: %v", err)
	}
	for name, tc := range install {
		c := validConfig(t)
		tc.change(&c)
		if got := flagsNamed(c.ValidateInstall()); len(got) != 1 || got[0] != tc.flag {
			t.Errorf("install, %s: want one error naming --%s, got %v", name, tc.flag, got)
		}
	}
	if err := validConfig(t).ValidateCheck(time.Minute); err != nil {
		t.Fatalf("a valid check: %v", err)
	}
	c := validConfig(t)
	c.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	if got := flagsNamed(c.ValidateCheck(time.Minute)); len(got) != 1 || got[0] != "ca-file" {
		t.Errorf("check with a missing CA bundle: %v", got)
	}
	if got := flagsNamed(validConfig(t).ValidateCheck(0)); len(got) != 1 || got[0] != "retry-for" {
		t.Errorf("check with --retry-for 0: %v", got)
	}
}

// serve writes the first heartbeat before the worker starts and refuses to
// start when it cannot.
func TestTheFirstHeartbeatIsWrittenAtStartOrTheStartIsRefused(t *testing.T) {
	c := validConfig(t)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if err := siteruntime.StartHeartbeat(context.Background(), c, clock.NewManual(now)); err != nil {
		t.Fatal(err)
	}
	if r, err := heartbeat.Check(c.HeartbeatFile, time.Minute, now); err != nil || !r.BeatAt.Equal(now) {
		t.Fatalf("first beat %+v %v", r, err)
	}
	c.HeartbeatFile = filepath.Join(t.TempDir(), "absent", "heartbeat")
	err := siteruntime.StartHeartbeat(context.Background(), c, clock.NewManual(now))
	if got := flagsNamed(err); len(got) != 1 || got[0] != "heartbeat-file" {
		t.Fatalf("an unwritable heartbeat: %v", err)
	}
}
