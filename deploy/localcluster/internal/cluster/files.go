package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// serviceCIDR is the Service cluster IP range; serviceIP is the kubernetes Service's address.
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	// podCIDR is where KWOK takes fake Pod IPs from.
	podCIDR = "10.244.0.1/16"
	// saIssuer is the service-account token issuer.
	saIssuer = "https://kubernetes.default.svc.cluster.local"
	// AdminUser is the cluster administrator's user name (group system:masters).
	adminUser = "metallo-admin"
)

// identity is one static-token user of the API server.
type identity struct {
	file   string // kubeconfig file name under the state directory
	user   string
	groups []string
}

// identities: the administrator (tests and the demo) and one user per component, so the audit
// log tells them apart. KWOK and the provisioner act as administrators for brevity; the controller
// manager and the scheduler have their bootstrap RBAC roles, the controller manager running
// each controller under its own service account as in a real cluster.
var identities = []identity{
	{"kubeconfig", adminUser, []string{"system:masters"}},
	{"kubeconfig-controller-manager", "system:kube-controller-manager", nil},
	{"kubeconfig-scheduler", "system:kube-scheduler", nil},
	{"kubeconfig-kwok", "localcluster:kwok", []string{"system:masters"}},
	{"kubeconfig-provisioner", "localcluster:provisioner", []string{"system:masters"}},
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeAuth writes the static token file of the API server and one kubeconfig per identity.
func writeAuth(dir, server string) error {
	caPEM, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	var csv strings.Builder
	for i, id := range identities {
		token, err := randomToken()
		if err != nil {
			return err
		}
		fmt.Fprintf(&csv, "%s,%s,%s", token, id.user, fmt.Sprintf("uid-%d", i))
		if len(id.groups) > 0 {
			fmt.Fprintf(&csv, ",\"%s\"", strings.Join(id.groups, ","))
		}
		csv.WriteString("\n")
		if err := writeKubeconfig(filepath.Join(dir, id.file), server, caPEM, id.user, token); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "auth"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "auth", "tokens.csv"), []byte(csv.String()), 0o600)
}

// writeKubeconfig writes a kubeconfig (mode 0600) for the API server at server that trusts
// caPEM and authenticates as user with a bearer token.
func writeKubeconfig(path, server string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: user}
	cfg.CurrentContext = "localcluster"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// auditPolicy records every request at Metadata level, except the control plane's and KServe's
// controller's own reads, leases, events and KWOK's status writes, which would drown the rest.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi*", "/api", "/apis", "/api/*", "/apis/*"]
- level: None
  users: ["system:apiserver", "system:kube-controller-manager", "system:kube-scheduler", "localcluster:kwok", "localcluster:provisioner", "system:serviceaccount:kserve:kserve-controller-manager"]
  verbs: ["get", "list", "watch"]
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
  verbs: ["get", "list", "watch"]
- level: None
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
  users: ["localcluster:kwok"]
  resources:
  - group: ""
    resources: ["nodes/status", "pods/status"]
- level: Metadata
`

func writeAuditPolicy(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "audit"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "auth", "audit-policy.yaml"), []byte(auditPolicy), 0o644)
}

// State is what cluster.json records about a running cluster; kubetest reads it.
type State struct {
	Version    string   `json:"version"`
	Server     string   `json:"server"`
	Kubeconfig string   `json:"kubeconfig"`
	AuditLog   string   `json:"auditLog"`
	Etcd       string   `json:"etcd"`
	KWOK       string   `json:"kwok"`
	Volumes    string   `json:"volumes"`
	Nodes      []string `json:"nodes"`
	StartedBy  string   `json:"startedBy"`
	// RealNode is the real node (realnode.go); nil in a cluster started before it existed.
	RealNode *RealNodeState `json:"realNode,omitempty"`
	// KServeWebhook is where KServe's webhooks listen (https://127.0.0.1:PORT); KServeHealth is
	// its controller's health probe (http://127.0.0.1:PORT, /readyz).
	KServeWebhook string `json:"kserveWebhook"`
	KServeHealth  string `json:"kserveHealth"`
}

func writeState(dir string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "cluster.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "cluster.json"))
}

func readState(dir string) (State, error) {
	var s State
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}
