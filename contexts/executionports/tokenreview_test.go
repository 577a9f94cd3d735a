package executionports_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// TestARuntimeAuthenticatedByTokenReviewUsesOnlyItsOwnStream configures
// environment gamma-k8s with a TokenReview against the local cluster: the
// Runtime's service-account token pulls gamma-k8s's stream and is 403 on
// alpha-k8s's; a token of another service account is 401.
func TestARuntimeAuthenticatedByTokenReviewUsesOnlyItsOwnStream(t *testing.T) {
	kt := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"runtime-k8s", "intruder"} {
		if _, err := kt.Client.CoreV1().ServiceAccounts(kt.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, options{environments: []executiontest.Environment{
		{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"},
		{ID: "gamma-k8s", Site: "gamma", Authority: "https://metallo.example.org", TokenReview: &executiontest.TokenReview{
			Kubeconfig: kt.Kubeconfig, Username: kubeconfig.ServiceAccountUser(kt.Namespace, "runtime-k8s"), Audience: "metallo",
		}},
	}})
	token := kt.ServiceAccountToken(kt.Namespace, "runtime-k8s", 10*time.Minute, "metallo")
	wantStatus(t, s.appendCommand(t, "gamma-k8s", observe(1, issued)), http.StatusCreated, "")
	page := decode[siteprotocol.Pull](t, s.pull(t, "gamma-k8s", token, installA, 0, 10, 0))
	if len(page.Commands) != 1 {
		t.Fatalf("the Runtime pulled %d commands", len(page.Commands))
	}
	wantStatus(t, s.pull(t, "alpha-k8s", token, installA, 0, 10, 0), http.StatusForbidden, siteprotocol.ProblemForbidden)
	wantStatus(t, s.pull(t, "gamma-k8s", kt.ServiceAccountToken(kt.Namespace, "intruder", 10*time.Minute, "metallo"), installA, 0, 10, 0), http.StatusUnauthorized, "")
}
