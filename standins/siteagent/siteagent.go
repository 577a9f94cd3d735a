// Package siteagent stands in for the Site agent, which lies outside
// Metallo: it sets up a Site project namespace the way the agent does,
// for the local cluster's tests, the kill test, the benchmark and the
// demo. It labels the namespace (execution.pharos.dev/access-policy:
// pharos-site-runtime, project-id: <Project UUID> and Pod Security
// restricted), creates the
// member's service account member-<party UUID> bound to ClusterRole
// metallo-member, binds the Runtime (system:serviceaccount:metallo-runtime:
// runtime-k8s) to ClusterRole metallo-runtime with a RoleBinding named
// metallo-runtime, and writes the Runtime's kubeconfig from a token of the
// TokenRequest API. The ClusterRoles come from deploy/cluster. Every call
// acts with the administrator's client given to it.
package siteagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The Runtime's identity (deploy/runtime).
const (
	RuntimeNamespace = "metallo-runtime"
	RuntimeAccount   = "runtime-k8s"
)

// RuntimeUser is the Runtime's user name.
func RuntimeUser() string { return kubeconfig.ServiceAccountUser(RuntimeNamespace, RuntimeAccount) }

// EnsureRuntimeIdentity creates the namespace metallo-runtime and the
// service account runtime-k8s when they do not exist.
func EnsureRuntimeIdentity(ctx context.Context, admin kubernetes.Interface) error {
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RuntimeNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", RuntimeNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: RuntimeAccount}}
	if _, err := admin.CoreV1().ServiceAccounts(RuntimeNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s/%s: %w", RuntimeNamespace, RuntimeAccount, err)
	}
	return nil
}

// LabelNamespace merges labels into the namespace's labels.
func LabelNamespace(ctx context.Context, admin kubernetes.Interface, namespace string, labels map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := admin.CoreV1().Namespaces().Patch(ctx, namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label namespace %s: %w", namespace, err)
	}
	return nil
}

// Project makes namespace (which must exist) a project namespace of
// projectID: labels and the Runtime's RoleBinding. The labels are
// project-id; Pod Security warn and audit restricted always; and, only
// when guarded, the access-policy label (so the admission policies apply)
// and Pod Security enforce restricted — the last step of the order a Site
// follows (deploy/cluster/README.md), where the tests and the demo run.
// An unguarded namespace (recovery tests that create objects the policies
// would refuse outright) enforces nothing. It waits until RBAC lets the
// Runtime delete Jobs there.
func Project(ctx context.Context, admin kubernetes.Interface, namespace, projectID string, guarded bool) error {
	if err := EnsureRuntimeIdentity(ctx, admin); err != nil {
		return err
	}
	labels := map[string]string{kube.NamespaceProjectLabel: projectID,
		kube.NamespacePodSecurityWarn: kube.PodSecurityRestricted, kube.NamespacePodSecurityAudit: kube.PodSecurityRestricted}
	if guarded {
		labels[kube.NamespacePolicyLabel] = kube.NamespacePolicyValue
		labels[kube.NamespacePodSecurityEnforce] = kube.PodSecurityRestricted
	}
	if err := LabelNamespace(ctx, admin, namespace, labels); err != nil {
		return err
	}
	if err := bind(ctx, admin, namespace, "metallo-runtime", "metallo-runtime", rbacv1.Subject{Kind: "ServiceAccount", Name: RuntimeAccount, Namespace: RuntimeNamespace}); err != nil {
		return err
	}
	return WaitAllowed(ctx, admin, RuntimeUser(), namespace, "delete", "batch", "jobs", true)
}

// Member creates the member's service account member-<party> and binds it
// to metallo-member; it waits until RBAC lets the member create Jobs.
func Member(ctx context.Context, admin kubernetes.Interface, namespace, partyID string) error {
	account := siteprotocol.MemberAccount(partyID)
	if _, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s/%s: %w", namespace, account, err)
	}
	if err := bind(ctx, admin, namespace, account, "metallo-member", rbacv1.Subject{Kind: "ServiceAccount", Name: account, Namespace: namespace}); err != nil {
		return err
	}
	return WaitAllowed(ctx, admin, kubeconfig.ServiceAccountUser(namespace, account), namespace, "create", "batch", "jobs", true)
}

// RevokeMember removes the member's RoleBinding and waits until RBAC
// refuses its creates.
func RevokeMember(ctx context.Context, admin kubernetes.Interface, namespace, partyID string) error {
	account := siteprotocol.MemberAccount(partyID)
	if err := admin.RbacV1().RoleBindings(namespace).Delete(ctx, account, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete role binding %s/%s: %w", namespace, account, err)
	}
	return WaitAllowed(ctx, admin, kubeconfig.ServiceAccountUser(namespace, account), namespace, "create", "batch", "jobs", false)
}

func bind(ctx context.Context, admin kubernetes.Interface, namespace, name, clusterRole string, subject rbacv1.Subject) error {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create role binding %s/%s: %w", namespace, name, err)
	}
	return nil
}

// WaitAllowed asks the authorizer (SubjectAccessReview) until it answers
// want for the service account user doing verb on group/resource in
// namespace: new RoleBindings take effect through the authorizer's
// informers.
func WaitAllowed(ctx context.Context, admin kubernetes.Interface, user, namespace, verb, group, resource string, want bool) error {
	rest, _ := strings.CutPrefix(user, "system:serviceaccount:")
	saNamespace, _, _ := strings.Cut(rest, ":")
	groups := []string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:" + saNamespace}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group, Resource: resource},
		}}
		out, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && out.Status.Allowed == want, err
	})
	if err != nil {
		return fmt.Errorf("RBAC never answered %v for %s %s %s/%s in %s: %w", want, user, verb, group, resource, namespace, err)
	}
	return nil
}

// RuntimeToken returns a token of the Runtime's service account from the
// TokenRequest API, valid for expiration, for audiences (none: the API
// server's own).
func RuntimeToken(ctx context.Context, admin kubernetes.Interface, expiration time.Duration, audiences ...string) (string, error) {
	secs := int64(expiration / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &secs}}
	out, err := admin.CoreV1().ServiceAccounts(RuntimeNamespace).CreateToken(ctx, RuntimeAccount, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s: %w", RuntimeUser(), err)
	}
	return out.Status.Token, nil
}

// WriteKubeconfig writes a kubeconfig at path that reaches the API server
// of admin (its host and CA) with token.
func WriteKubeconfig(path string, admin *rest.Config, token string) error {
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		var err error
		if ca, err = readFile(admin.CAFile); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["site"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["runtime"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["runtime"] = &clientcmdapi.Context{Cluster: "site", AuthInfo: "runtime"}
	cfg.CurrentContext = "runtime"
	return clientcmd.WriteToFile(*cfg, path)
}

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the cluster CA: %w", err)
	}
	return b, nil
}

// SiteConfigMap is the ConfigMap of a project namespace naming the Site's
// fixed platform image (key PlatformImageKey), the parameter of the
// admission policy metallo-workspace-helpers (deploy/cluster/README.md).
const (
	SiteConfigMap    = "metallo-site"
	PlatformImageKey = "platform-image"
)

// PlatformImage creates (or updates) the namespace's ConfigMap
// SiteConfigMap naming image, as the Site agent does: without it every
// workspace helper is refused.
func PlatformImage(ctx context.Context, admin kubernetes.Interface, namespace, image string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SiteConfigMap, Namespace: namespace}, Data: map[string]string{PlatformImageKey: image}}
	_, err := admin.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = admin.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("configmap %s/%s: %w", namespace, SiteConfigMap, err)
	}
	return nil
}
