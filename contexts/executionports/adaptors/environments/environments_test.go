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
	envfile "github.com/pharos-metallo/metallo/platform/environments"
)

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func parse(t *testing.T, dir, body string) *envfile.Set {
	t.Helper()
	set, err := envfile.Parse([]byte(body), dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// The execution role's view: each environment with its Site, authority and backend, its static
// key authenticating as environment:<id>, its TokenReview with the kubeconfig resolved against
// the file's directory.
func TestTheViewMapsEachEnvironmentToItsSiteAndKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "beta.kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	view, err := environments.NewView(parse(t, dir, `environments:
  - id: alpha-k8s
    site: alpha
    authority: https://metallo.example.org
    auth: {key_sha256: `+hashA+`}
  - id: beta-k8s
    site: beta
    authority: http://127.0.0.1:8080
    backend: slurm
    auth:
      tokenreview: {kubeconfig: beta.kubeconfig, username: "system:serviceaccount:metallo-runtime:runtime-k8s", audience: metallo}
`))
	if err != nil {
		t.Fatal(err)
	}
	env, ok := view.Environment("alpha-k8s")
	if !ok || env.Site != "alpha" || env.Authority != "https://metallo.example.org" || env.Backend != "kubernetes" {
		t.Fatalf("alpha-k8s: %+v %v", env, ok)
	}
	if env, _ := view.Environment("beta-k8s"); env.Backend != "slurm" {
		t.Fatalf("beta-k8s: %+v", env)
	}
	if _, ok := view.Environment("gamma-k8s"); ok {
		t.Fatal("an unlisted environment was found")
	}
	if ids := view.IDs(); strings.Join(ids, ",") != "alpha-k8s,beta-k8s" {
		t.Fatalf("IDs %v", ids)
	}
	p, err := view.Keys().Authenticate(context.Background(), "test")
	if err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
		t.Fatalf("the static key: %v, %v", p, err)
	}
	if _, err := view.Keys().Authenticate(context.Background(), "other"); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("another key: %v", err)
	}
	rs := view.TokenReviews()
	if len(rs) != 1 || rs[0].Environment != "beta-k8s" || rs[0].Kubeconfig != filepath.Join(dir, "beta.kubeconfig") || rs[0].Audience != "metallo" {
		t.Fatalf("token reviews: %+v (a relative kubeconfig is relative to the file)", rs)
	}
}

// A kubeconfig that is not there is the execution role's refusal of the file (the provisioning
// role, which never reads it, accepts the same file), naming every environment at fault.
func TestAMissingKubeconfigIsRefusedNamingEachEnvironment(t *testing.T) {
	set := parse(t, t.TempDir(), `environments:
  - id: alpha-k8s
    site: alpha
    authority: https://m.example.org
    auth: {tokenreview: {kubeconfig: /nonexistent/a, username: u, audience: a}}
  - id: beta-k8s
    site: beta
    authority: https://m.example.org
    auth: {tokenreview: {kubeconfig: missing.kubeconfig, username: u, audience: a}}
`)
	_, err := environments.NewView(set)
	if err == nil || !strings.Contains(err.Error(), "environment alpha-k8s: auth.tokenreview.kubeconfig") || !strings.Contains(err.Error(), "environment beta-k8s: auth.tokenreview.kubeconfig") {
		t.Fatalf("got %v", err)
	}
}

// Current answers from the view stored last, and its authenticator.
func TestCurrentAnswersFromTheViewInUse(t *testing.T) {
	dir := t.TempDir()
	one, err := environments.NewView(parse(t, dir, "environments:\n  - {id: alpha-k8s, site: alpha, authority: 'https://m.example.org', auth: {key_sha256: "+hashA+"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	two, err := environments.NewView(parse(t, dir, "environments:\n  - {id: beta-k8s, site: beta, authority: 'https://m.example.org', auth: {key_sha256: "+hashA+"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var c environments.Current
	c.Store(one, one.Keys())
	if p, err := c.Authenticate(t.Context(), "test"); err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
		t.Fatalf("first version: %v %v", p, err)
	}
	c.Store(two, two.Keys())
	if _, ok := c.Environment("alpha-k8s"); ok {
		t.Error("the removed environment is still known")
	}
	if p, err := c.Authenticate(t.Context(), "test"); err != nil || !p.Is(auth.KindEnvironment, "beta-k8s") {
		t.Fatalf("second version: %v %v", p, err)
	}
}
