package environments_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/environments"
	"github.com/pharos-metallo/metallo/platform/auth"
)

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func write(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "environments.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAValidFileMapsEachEnvironmentToItsSiteAndKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "beta.kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "environments.yaml")
	body := `environments:
  - id: alpha-k8s
    site: alpha
    authority: https://metallo.example.org
    auth: {key_sha256: ` + hashA + `}
  - id: beta-k8s
    site: beta
    authority: http://127.0.0.1:8080
    auth:
      tokenreview: {kubeconfig: beta.kubeconfig, username: "system:serviceaccount:metallo-runtime:runtime-k8s", audience: metallo}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := environments.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	env, ok := set.Environment("alpha-k8s")
	if !ok || env.Site != "alpha" || env.Authority != "https://metallo.example.org" {
		t.Fatalf("alpha-k8s: %+v %v", env, ok)
	}
	if _, ok := set.Environment("gamma-k8s"); ok {
		t.Fatal("an unlisted environment was found")
	}
	p, err := set.Keys().Authenticate(context.Background(), "test")
	if err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
		t.Fatalf("the static key: %v, %v", p, err)
	}
	if _, err := set.Keys().Authenticate(context.Background(), "other"); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("another key: %v", err)
	}
	rs := set.TokenReviews()
	if len(rs) != 1 || rs[0].Environment != "beta-k8s" || rs[0].Kubeconfig != filepath.Join(dir, "beta.kubeconfig") || rs[0].Audience != "metallo" {
		t.Fatalf("token reviews: %+v (a relative kubeconfig is relative to the file)", rs)
	}
}

func TestEveryInvalidEntryIsRefusedNamingTheEntry(t *testing.T) {
	entry := func(id, site, authority, auth string) string {
		return "  - id: " + id + "\n    site: " + site + "\n    authority: " + authority + "\n    auth: " + auth + "\n"
	}
	good := entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+"}")
	for name, tc := range map[string]struct{ body, want string }{
		"no environment":        {"environments: []\n", "no environment is configured"},
		"an unknown member":     {"environments:\n" + good + "    colour: blue\n", "unknown field"},
		"a bad id":              {"environments:\n" + entry("alpha k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+"}"), "environments[0] (alpha k8s): id"},
		"a duplicate id":        {"environments:\n" + good + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+strings.Repeat("a", 64)+"}"), "environments[1] (alpha-k8s): id is listed twice"},
		"no site":               {"environments:\n" + entry("alpha-k8s", `""`, "https://m.example.org", "{key_sha256: "+hashA+"}"), "environments[0] (alpha-k8s): site"},
		"plain http to a host":  {"environments:\n" + entry("alpha-k8s", "alpha", "http://m.example.org", "{key_sha256: "+hashA+"}"), "environments[0] (alpha-k8s): authority"},
		"a relative authority":  {"environments:\n" + entry("alpha-k8s", "alpha", "metallo", "{key_sha256: "+hashA+"}"), "environments[0] (alpha-k8s): authority"},
		"no auth":               {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{}"), "environments[0] (alpha-k8s): auth must give exactly one"},
		"both auths":            {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+hashA+", tokenreview: {kubeconfig: k, username: u, audience: a}}"), "environments[0] (alpha-k8s): auth must give exactly one"},
		"an upper-case hash":    {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{key_sha256: "+strings.ToUpper(hashA)+"}"), "environments[0] (alpha-k8s): auth.key_sha256"},
		"one key for two":       {"environments:\n" + good + entry("beta-k8s", "beta", "https://m.example.org", "{key_sha256: "+hashA+"}"), "environments[1] (beta-k8s): auth.key_sha256 is also the key of environment alpha-k8s"},
		"a partial tokenreview": {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{tokenreview: {kubeconfig: k, username: u}}"), "environments[0] (alpha-k8s): auth.tokenreview needs"},
		"a missing kubeconfig":  {"environments:\n" + entry("alpha-k8s", "alpha", "https://m.example.org", "{tokenreview: {kubeconfig: /nonexistent/k, username: u, audience: a}}"), "environments[0] (alpha-k8s): auth.tokenreview.kubeconfig"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := environments.Load(write(t, tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
