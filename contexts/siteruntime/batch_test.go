package siteruntime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/clock"
)

// The batch executors refuse to be built — so the runtime role refuses to
// start — without an explicit permission provider, with a policy file that
// cannot be parsed, with a batch image not pinned by digest, or outside a
// cluster without --kubeconfig; each error names its flag.
func TestBatchExecutorsNeedEveryProviderExplicitlyAndNameTheMissingFlag(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	policy := filepath.Join(dir, "policy.yaml")
	broken := filepath.Join(dir, "broken.yaml")
	for f, body := range map[string]string{
		kubeconfig: "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
		policy:     "[]\n",
		broken:     "- member: someone\n",
	} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good := siteruntime.Config{Kubeconfig: kubeconfig, Permissions: "policy:" + policy,
		BatchImage: "registry.example/batch@sha256:" + strings.Repeat("a", 64)}
	build := func(c siteruntime.Config) error {
		_, _, err := siteruntime.NewBatchExecutor(c, nil, nil, application.NoFailpoints{}, clock.System{}, nil, nil)
		return err
	}
	if err := build(good); err != nil {
		t.Fatalf("a complete configuration: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, c := range []struct {
		flag string
		cfg  siteruntime.Config
	}{
		{"--permissions", siteruntime.Config{Kubeconfig: kubeconfig, BatchImage: good.BatchImage}},
		{"--permissions", siteruntime.Config{Kubeconfig: kubeconfig, BatchImage: good.BatchImage, Permissions: "policy:" + broken}},
		{"--batch-image", siteruntime.Config{Kubeconfig: kubeconfig, Permissions: good.Permissions, BatchImage: "registry.example/batch:latest"}},
		{"--kubeconfig", siteruntime.Config{Permissions: good.Permissions, BatchImage: good.BatchImage}},
	} {
		if err := build(c.cfg); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: want an error naming %s, got %v", c.cfg, c.flag, err)
		}
	}
}
