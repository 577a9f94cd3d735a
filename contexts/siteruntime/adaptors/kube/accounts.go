package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberAccountUID returns the UID of the live service account account in
// namespace (application.ProjectNamespaces), read as the Runtime (its role
// grants get on service accounts in project namespaces,
// deploy/cluster/rbac/runtime.yaml). An account that does not exist, or
// that the Runtime may not read, is not found. Other API errors are
// returned. docs/site-protocol.md#the-accounts-uid-in-a-binding
func (w *Workloads) MemberAccountUID(ctx context.Context, namespace, account string) (string, bool, error) {
	sa, err := w.client.CoreV1().ServiceAccounts(namespace).Get(ctx, account, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(sa.UID), true, nil
}
