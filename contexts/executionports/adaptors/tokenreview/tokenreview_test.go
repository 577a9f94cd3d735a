package tokenreview_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/executionports/adaptors/tokenreview"
	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// TestAServiceAccountTokenIsItsEnvironmentsPrincipalThroughTokenReview runs
// TokenReviews against the local cluster's real API server: the Runtime's
// projected-style token (TokenRequest with the configured audience) is
// environment:<id>; a token for another audience, another service
// account's token and a forged token are not; a static key is never sent
// to the cluster.
func TestAServiceAccountTokenIsItsEnvironmentsPrincipalThroughTokenReview(t *testing.T) {
	env := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"runtime-k8s", "intruder"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := env.Client.CoreV1().ServiceAccounts(env.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := tokenreview.New([]tokenreview.Target{{
		Environment: "alpha-k8s", Username: kubeconfig.ServiceAccountUser(env.Namespace, "runtime-k8s"), Audience: "metallo", Kubeconfig: env.Kubeconfig,
	}})
	if err != nil {
		t.Fatal(err)
	}

	p, err := a.Authenticate(ctx, env.ServiceAccountToken(env.Namespace, "runtime-k8s", 10*time.Minute, "metallo"))
	if err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
		t.Fatalf("the Runtime's token: %v, %v", p, err)
	}
	for name, token := range map[string]string{
		"another audience":        env.ServiceAccountToken(env.Namespace, "runtime-k8s", 10*time.Minute, "another-service"),
		"another service account": env.ServiceAccountToken(env.Namespace, "intruder", 10*time.Minute, "metallo"),
		"a forged token":          "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6eDp5In0.c2lnbmF0dXJl",
		"a static key":            "mtl_not-a-service-account-token",
	} {
		if p, err := a.Authenticate(ctx, token); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: got %v, %v; want ErrUnauthenticated", name, p, err)
		}
	}
}

// TestAnUnreachableClusterIsAnInfrastructureErrorNotARejection proves a
// TokenReview that cannot be made is reported as such (the HTTP layer
// answers 503), never as an unknown token. No cluster is needed: the
// kubeconfig names a closed port.
func TestAnUnreachableClusterIsAnInfrastructureErrorNotARejection(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: admin}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := tokenreview.New([]tokenreview.Target{{Environment: "alpha-k8s", Username: "u", Audience: "metallo", Kubeconfig: kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(context.Background(), "eyJ.eyJ.sig")
	if err == nil || errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "TokenReview") {
		t.Fatalf("got %v", err)
	}
}
