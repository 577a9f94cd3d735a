package tokenreview

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// reviewer sets up, in the test's namespace, the identity the execution role reviews tokens
// with: a service account bound to the built-in ClusterRole system:auth-delegator (create
// tokenreviews and subjectaccessreviews, nothing else), and returns a kubeconfig file with a
// token of it. It also creates the named service accounts.
func reviewer(t *testing.T, e *kubetest.Env, accounts ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range append([]string{"site-api"}, accounts...) {
		if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: e.Namespace + "-token-reviewer", Labels: map[string]string{kubetest.NamespaceLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "site-api", Namespace: e.Namespace}},
	}
	if _, err := e.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	user := kubeconfig.ServiceAccountUser(e.Namespace, "site-api")
	// The RBAC authorizer sees the new binding through its informers: ask it until it agrees.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
		}}
		out, err := e.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && out.Status.Allowed, err
	}); err != nil {
		t.Fatalf("the reviewer's binding never took effect: %v", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["site"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData, CertificateAuthority: e.Config.CAFile}
	cfg.AuthInfos["site-api"] = &clientcmdapi.AuthInfo{Token: e.ServiceAccountToken(e.Namespace, "site-api", time.Hour)}
	cfg.Contexts["site"] = &clientcmdapi.Context{Cluster: "site", AuthInfo: "site-api"}
	cfg.CurrentContext = "site"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Two environments served from one Site cluster, each with its own Runtime account and
// audience: each Runtime's token is its own environment's principal, never the other's, also
// when it asks for the other environment's audience; the reviewer needs only
// system:auth-delegator. Real: the API server's TokenReview and RBAC.
func TestEachConfiguredAccountAndAudienceIsItsOwnEnvironment(t *testing.T) {
	e := kubetest.New(t)
	reviewerKubeconfig := reviewer(t, e, "runtime-a", "runtime-b")
	a, err := New([]Target{
		{Environment: "alpha-k8s", Username: kubeconfig.ServiceAccountUser(e.Namespace, "runtime-a"), Audience: "metallo", Kubeconfig: reviewerKubeconfig},
		{Environment: "beta-k8s", Username: kubeconfig.ServiceAccountUser(e.Namespace, "runtime-b"), Audience: "metallo-beta", Kubeconfig: reviewerKubeconfig},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, c := range []struct {
		account, audience, want string
	}{
		{"runtime-a", "metallo", "alpha-k8s"},
		{"runtime-b", "metallo-beta", "beta-k8s"},
		{"runtime-a", "metallo-beta", ""},
		{"runtime-b", "metallo", ""},
		{"site-api", "metallo", ""},
	} {
		p, err := a.Authenticate(ctx, e.ServiceAccountToken(e.Namespace, c.account, 10*time.Minute, c.audience))
		switch {
		case c.want == "" && !errors.Is(err, auth.ErrUnauthenticated):
			t.Errorf("%s for %s: got %v %v, want ErrUnauthenticated", c.account, c.audience, p, err)
		case c.want != "" && (err != nil || !p.Is(auth.KindEnvironment, c.want)):
			t.Errorf("%s for %s: got %v %v, want environment:%s", c.account, c.audience, p, err, c.want)
		}
	}
}

// An accepted token is remembered for the cache's TTL and no longer: once the Runtime's service
// account is deleted the cluster rejects its token, the authenticator still accepts it until the
// TTL has passed on its clock, and then rejects it too.
func TestAnAcceptedTokenIsRememberedForTheCacheTTLOnly(t *testing.T) {
	e := kubetest.New(t)
	reviewerKubeconfig := reviewer(t, e, "runtime-k8s")
	a, err := New([]Target{{Environment: "alpha-k8s", Username: kubeconfig.ServiceAccountUser(e.Namespace, "runtime-k8s"), Audience: "metallo", Kubeconfig: reviewerKubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	ctx := t.Context()
	token := e.ServiceAccountToken(e.Namespace, "runtime-k8s", 10*time.Minute, "metallo")
	if p, err := a.Authenticate(ctx, token); err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
		t.Fatalf("fresh token: %v %v", p, err)
	}

	if err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Delete(ctx, "runtime-k8s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's service-account getter sees the deletion through an informer.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := e.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{"metallo"}},
		}, metav1.CreateOptions{})
		return err == nil && !r.Status.Authenticated, err
	}); err != nil {
		t.Fatalf("the cluster never rejected the deleted account's token: %v", err)
	}
	now = now.Add(DefaultCacheTTL - time.Second)
	if p, err := a.Authenticate(ctx, token); err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
		t.Fatalf("within the TTL: want the remembered principal, got %v %v", p, err)
	}
	now = now.Add(time.Second)
	if p, err := a.Authenticate(ctx, token); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("after the TTL: want ErrUnauthenticated, got %v %v", p, err)
	}
}

// A cluster that cannot be reached does not hide another cluster that recognises the token: the
// environment of the reachable one is the principal, whichever comes first.
func TestAnUnreachableClusterDoesNotHideOneThatRecognisesTheToken(t *testing.T) {
	e := kubetest.New(t)
	reviewerKubeconfig := reviewer(t, e, "runtime-k8s")
	down := filepath.Join(t.TempDir(), "down")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["down"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "none"}
	cfg.Contexts["down"] = &clientcmdapi.Context{Cluster: "down", AuthInfo: "u"}
	cfg.CurrentContext = "down"
	if err := clientcmd.WriteToFile(*cfg, down); err != nil {
		t.Fatal(err)
	}
	up := Target{Environment: "alpha-k8s", Username: kubeconfig.ServiceAccountUser(e.Namespace, "runtime-k8s"), Audience: "metallo", Kubeconfig: reviewerKubeconfig}
	gone := Target{Environment: "gamma-k8s", Username: "system:serviceaccount:metallo-runtime:runtime-k8s", Audience: "metallo", Kubeconfig: down}
	token := e.ServiceAccountToken(e.Namespace, "runtime-k8s", 10*time.Minute, "metallo")
	for _, targets := range [][]Target{{gone, up}, {up, gone}} {
		a, err := New(targets)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := a.Authenticate(t.Context(), token); err != nil || !p.Is(auth.KindEnvironment, "alpha-k8s") {
			t.Errorf("targets %s then %s: got %v %v, want environment:alpha-k8s", targets[0].Environment, targets[1].Environment, p, err)
		}
	}
}
