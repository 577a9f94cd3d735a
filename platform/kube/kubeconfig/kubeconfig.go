// Package kubeconfig is the one place that loads Kubernetes client
// configuration: from a kubeconfig file, or from the service account of the
// Pod the process runs in. It also derives copies of a configuration that
// act as another user. The architecture test (platform/archtest) keeps
// kubeconfig loading here: every context that talks to a cluster gets its
// *rest.Config from Load.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load loads the kubeconfig at path (its current context), or, when path is
// empty, the in-cluster configuration of the Pod's service account. The
// error names the file, or says the in-cluster configuration is missing
// (outside a Pod: KUBERNETES_SERVICE_HOST unset, no service account token).
func Load(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes configuration: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// Impersonate returns a copy of cfg whose requests act as user (and groups), through the API
// server's impersonation; cfg's own identity needs the impersonate permission.
func Impersonate(cfg *rest.Config, user string, groups ...string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return c
}

// ServiceAccountUser is the user name the API server gives a service account's tokens.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}
