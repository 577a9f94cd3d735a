package policytest

import (
	"context"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// access is one request checked with the caller's own token (SelfSubjectAccessReview).
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func allowed(t *testing.T, cs kubernetes.Interface, a access) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx(t), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject access review %+v: %v", a, err)
	}
	return r.Status.Allowed
}

// expectAccess checks each request's answer for the client's own identity.
func expectAccess(t *testing.T, who string, cs kubernetes.Interface, want map[access]bool) {
	t.Helper()
	for a, ok := range want {
		if got := allowed(t, cs, a); got != ok {
			t.Errorf("%s %s %s/%s %q in %q: allowed %v, want %v", who, a.verb, a.resource, a.subresource, a.name, a.namespace, got, ok)
		}
	}
}

// The Runtime's own token reaches what metallo-runtime grants in its project namespace and
// nothing else: no other namespace, no cluster-wide Secrets, no nodes, no create or change of
// anything, no exec, no role grants, no tokens, and it impersonates only service accounts of its
// project namespaces (never a controller, a user or a group), adding only its own user extra.
func TestRuntimeReachesOnlyWhatItNeedsInItsProjectNamespaces(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	rt := s.asRuntime(t)
	ns := s.namespace
	expectAccess(t, "the Runtime", rt, map[access]bool{
		{verb: "get", resource: "namespaces", name: ns, namespace: ns}:                               true,
		{verb: "impersonate", resource: "serviceaccounts", name: "member-" + s.alice, namespace: ns}: true,
		{verb: "get", resource: "serviceaccounts", name: "member-" + s.alice, namespace: ns}:         true,
		{verb: "list", resource: "serviceaccounts", namespace: ns}:                                   false,
		{verb: "get", resource: "serviceaccounts", name: "job-controller", namespace: "kube-system"}: false,
		{verb: "list", group: "batch", resource: "jobs", namespace: ns}:                              true,
		{verb: "watch", resource: "pods", namespace: ns}:                                             true,
		{verb: "delete", resource: "persistentvolumeclaims", namespace: ns}:                          true,
		{verb: "get", resource: "secrets", namespace: ns}:                                            true,
		{verb: "delete", resource: "secrets", namespace: ns}:                                         true,
		{verb: "get", resource: "pods", subresource: "log", namespace: ns}:                           true,
		{verb: "list", resource: "events", namespace: ns}:                                            true,
		{verb: "get", resource: "resourcequotas", namespace: ns}:                                     true,
		{verb: "get", group: "apps", resource: "deployments", namespace: ns}:                         true,
		{verb: "watch", group: "apps", resource: "deployments", namespace: ns}:                       true,
		{verb: "delete", group: "apps", resource: "deployments", namespace: ns}:                      true,
		{verb: "list", group: "apps", resource: "replicasets", namespace: ns}:                        true,
		{verb: "delete", group: "apps", resource: "replicasets", namespace: ns}:                      true,
		{verb: "list", resource: "services", namespace: ns}:                                          true,
		{verb: "delete", resource: "services", namespace: ns}:                                        true,
		{verb: "get", group: "serving.kserve.io", resource: "inferenceservices", namespace: ns}:      true,
		{verb: "watch", group: "serving.kserve.io", resource: "inferenceservices", namespace: ns}:    true,
		{verb: "delete", group: "serving.kserve.io", resource: "inferenceservices", namespace: ns}:   true,
		{verb: "patch", group: "serving.kserve.io", resource: "inferenceservices", namespace: ns}:    false,
		{verb: "create", group: "serving.kserve.io", resource: "inferenceservices", namespace: ns}:   false,
		{verb: "get", resource: "services", subresource: "proxy", namespace: ns}:                     true,
		{verb: "create", resource: "services", subresource: "proxy", namespace: ns}:                  true,

		{verb: "list", resource: "secrets", namespace: ns}:                                                   false,
		{verb: "create", group: "batch", resource: "jobs", namespace: ns}:                                    false,
		{verb: "patch", group: "batch", resource: "jobs", namespace: ns}:                                     false,
		{verb: "create", resource: "pods", namespace: ns}:                                                    false,
		{verb: "create", resource: "pods", subresource: "exec", namespace: ns}:                               false,
		{verb: "deletecollection", group: "batch", resource: "jobs", namespace: ns}:                          false,
		{verb: "create", group: "apps", resource: "deployments", namespace: ns}:                              false,
		{verb: "patch", group: "apps", resource: "deployments", namespace: ns}:                               false,
		{verb: "update", group: "apps", resource: "deployments", subresource: "scale", namespace: ns}:        false,
		{verb: "create", group: "apps", resource: "replicasets", namespace: ns}:                              false,
		{verb: "patch", group: "apps", resource: "replicasets", namespace: ns}:                               false,
		{verb: "create", resource: "services", namespace: ns}:                                                false,
		{verb: "update", resource: "services", namespace: ns}:                                                false,
		{verb: "create", resource: "endpoints", namespace: ns}:                                               false,
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: ns}:               false,
		{verb: "list", group: "apps", resource: "deployments", namespace: "kube-system"}:                     false,
		{verb: "list", resource: "services", namespace: "kube-system"}:                                       false,
		{verb: "get", resource: "services", subresource: "proxy", namespace: "kube-system"}:                  false,
		{verb: "create", resource: "pods", subresource: "proxy", namespace: ns}:                              false,
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: ns}:                   false,
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: ns}:        false,
		{verb: "list", resource: "namespaces"}:                                                               false,
		{verb: "get", resource: "namespaces", name: "kube-system", namespace: "kube-system"}:                 false,
		{verb: "list", resource: "secrets"}:                                                                  false,
		{verb: "get", resource: "secrets", namespace: "kube-system"}:                                         false,
		{verb: "list", resource: "nodes"}:                                                                    false,
		{verb: "impersonate", resource: "serviceaccounts", name: "job-controller", namespace: "kube-system"}: false,
		{verb: "impersonate", resource: "users", name: kubetest.AdminUser}:                                   false,
		{verb: "impersonate", resource: "groups", name: "system:masters"}:                                    false,
		{verb: "update", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicies"}:     false,
		// The one cluster-wide grant: its user extra, that key with that value only.
		{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: extraCreatedThrough, name: extraSiteRuntime}: true,
		{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: extraCreatedThrough, name: "administrator"}:  false,
		{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: "scopes", name: extraSiteRuntime}:            false,
		{verb: "impersonate", group: "authentication.k8s.io", resource: "uids"}:                                                                 false,
	})
	// The same, as real requests: another namespace's Secrets and an impersonated controller.
	c := ctx(t)
	if _, err := rt.CoreV1().Secrets("kube-system").List(c, metav1.ListOptions{}); !isRBACRefusal(err) {
		t.Errorf("the Runtime listing kube-system's Secrets: want 403, got %v", err)
	}
	asController := s.e.ClientFor(kubeconfig.Impersonate(s.runtimeConfig(t), kubeconfig.ServiceAccountUser("kube-system", "job-controller")))
	if _, err := asController.CoreV1().Pods(ns).List(c, metav1.ListOptions{}); !isRBACRefusal(err) {
		t.Errorf("the Runtime impersonating the Job controller: want 403, got %v", err)
	}
	waitRefusedByRBAC(t, "the Runtime creating a Job as itself", createJob(rt, ns, s.attempt(s.alice).job("1")))
	waitRefusedByRBAC(t, "the Runtime creating a Deployment as itself", createDeployment(rt, ns, s.attempt(s.alice).deployment()))
	waitRefusedByRBAC(t, "the Runtime creating a Service as itself", createService(rt, ns, s.attempt(s.alice).service()))
}

// A member may only create its Attempts' Jobs, claims, credentials, helper Pods, application
// Deployments and Services and InferenceServices: it reads,
// changes and deletes nothing, so a second member of the Project cannot read the first one's
// claim, credential, Job or logs, nor exec into its Pods, nor grant itself anything
// (docs/site-runtime.md#admission-policies-and-rbac).
func TestMembersOnlyCreateAndReadNothing(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	bob := s.asMember(t, s.bob)
	ns := s.namespace
	want := map[access]bool{
		{verb: "create", group: "batch", resource: "jobs", namespace: ns}:                          true,
		{verb: "create", resource: "persistentvolumeclaims", namespace: ns}:                        true,
		{verb: "create", resource: "secrets", namespace: ns}:                                       true,
		{verb: "create", resource: "pods", namespace: ns}:                                          true,
		{verb: "create", group: "apps", resource: "deployments", namespace: ns}:                    true,
		{verb: "create", resource: "services", namespace: ns}:                                      true,
		{verb: "create", group: "serving.kserve.io", resource: "inferenceservices", namespace: ns}: true,
	}
	for _, verb := range []string{"get", "list", "watch", "update", "patch", "delete"} {
		for _, r := range []access{
			{group: "batch", resource: "jobs"}, {resource: "persistentvolumeclaims"}, {resource: "secrets"}, {resource: "pods"},
			{group: "apps", resource: "deployments"}, {group: "apps", resource: "replicasets"}, {resource: "services"},
			{group: "serving.kserve.io", resource: "inferenceservices"},
		} {
			r.verb, r.namespace = verb, ns
			want[r] = false
		}
	}
	for _, a := range []access{
		{verb: "get", resource: "pods", subresource: "log"},
		{verb: "create", resource: "pods", subresource: "exec"},
		{verb: "create", resource: "serviceaccounts", subresource: "token"},
		{verb: "create", group: "apps", resource: "replicasets"},
		{verb: "update", group: "apps", resource: "deployments", subresource: "scale"},
		{verb: "create", resource: "endpoints"},
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings"},
		{verb: "get", resource: "namespaces", name: ns},
		{verb: "impersonate", resource: "serviceaccounts", name: "member-" + s.alice},
		{verb: "impersonate", resource: "serviceaccounts", name: "member-" + s.bob},
	} {
		a.namespace = ns
		want[a] = false
	}
	want[access{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: extraCreatedThrough, name: extraSiteRuntime}] = false
	expectAccess(t, "bob", bob, want)

	alice := s.attempt(s.alice)
	accepted(t, "alice's workspace claim", createClaim(s.viaRuntime(t, s.alice), ns, alice.claim()))
	accepted(t, "alice's credential", createSecret(s.viaRuntime(t, s.alice), ns, alice.credential()))
	for what, read := range map[string]func(context.Context) error{
		"bob reading alice's claim": func(c context.Context) error {
			_, err := bob.CoreV1().PersistentVolumeClaims(ns).Get(c, alice.claimName(), metav1.GetOptions{})
			return err
		},
		"bob reading alice's credential": func(c context.Context) error {
			_, err := bob.CoreV1().Secrets(ns).Get(c, alice.secretName(), metav1.GetOptions{})
			return err
		},
	} {
		if err := read(ctx(t)); !isRBACRefusal(err) {
			t.Errorf("%s: want 403 from RBAC, got %v", what, err)
		}
	}
}

// selfReview is who the API server takes the client's requests to come from (SelfSubjectReview:
// the user after authentication and impersonation, as admission sees it in request.userInfo).
func selfReview(c context.Context, cs kubernetes.Interface) (authenticationv1.UserInfo, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(c, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// The Runtime's user extra reaches the API server with the member's identity and its
// service-account groups, and nobody but the Runtime can add it: a member's own token carries no
// such extra, and a member impersonating itself or another member to add it is refused by RBAC
// (members impersonate nothing), as is the Runtime adding another value of it or another extra.
func TestOnlyTheRuntimeAddsItsUserExtraAndTheAPIServerSeesIt(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	c := ctx(t)
	alice := s.memberUser(s.alice)

	got, err := selfReview(c, s.viaRuntime(t, s.alice))
	if err != nil {
		t.Fatalf("the Runtime as alice: %v", err)
	}
	if got.Username != alice || !slices.Equal(got.Extra[extraCreatedThrough], authenticationv1.ExtraValue{extraSiteRuntime}) ||
		!slices.Contains(got.Groups, "system:serviceaccounts:"+s.namespace) {
		t.Errorf("the Runtime as alice: the API server sees %+v; want %s with extra %s=%s and her service-account groups", got, alice, extraCreatedThrough, extraSiteRuntime)
	}
	got, err = selfReview(c, s.asMember(t, s.alice))
	if err != nil {
		t.Fatalf("alice's own token: %v", err)
	}
	if got.Username != alice || len(got.Extra[extraCreatedThrough]) != 0 {
		t.Errorf("alice's own token: the API server sees %+v; want %s without extra %s", got, alice, extraCreatedThrough)
	}

	forged := func(cfg *rest.Config, user, value string) *rest.Config {
		out := rest.CopyConfig(cfg)
		out.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: map[string][]string{extraCreatedThrough: {value}}}
		return out
	}
	own := s.e.ServiceAccountConfig(s.namespace, "member-"+s.alice)
	for what, cfg := range map[string]*rest.Config{
		"alice's own token impersonating herself with the extra":   forged(own, alice, extraSiteRuntime),
		"alice's own token impersonating bob with the extra":       forged(own, s.memberUser(s.bob), extraSiteRuntime),
		"the Runtime impersonating alice with another extra value": forged(s.runtimeConfig(t), alice, "administrator"),
	} {
		if _, err := selfReview(c, s.e.ClientFor(cfg)); !isRBACRefusal(err) {
			t.Errorf("%s: want 403 from RBAC, got %v", what, err)
		}
	}
	other := rest.CopyConfig(s.runtimeConfig(t))
	other.Impersonate = rest.ImpersonationConfig{UserName: alice, Extra: map[string][]string{"scopes": {extraSiteRuntime}}}
	if _, err := selfReview(c, s.e.ClientFor(other)); !isRBACRefusal(err) {
		t.Errorf("the Runtime impersonating alice with another extra: want 403 from RBAC, got %v", err)
	}
	// And a create with a forged extra never reaches admission.
	waitRefusedByRBAC(t, "alice's Job with her own token and a forged extra",
		createJob(s.e.ClientFor(forged(own, alice, extraSiteRuntime)), s.namespace, s.attempt(s.alice).job("1")))
}
