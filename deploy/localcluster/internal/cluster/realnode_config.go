package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// realNodeFiles are the paths of the node's configuration.
type realNodeFiles struct {
	containerdConfig, containerdSocket, kubeletConfig, kubeletKubeconfig string
}

// writeKubeletClientPKI writes the API server's client certificate towards kubelets (user
// kube-apiserver-kubelet-client), signed by the cluster CA: the API server needs it at start,
// whether the cluster gets a real node or not.
func writeKubeletClientPKI(dir string) error {
	pki := filepath.Join(dir, "pki")
	return signLeaf(pki, pki, "apiserver-kubelet-client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: kubeletClientUser},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// signLeaf writes <name>.crt and <name>.key under pki: a new P-256 key and a certificate from
// tmpl signed by the cluster CA in caDir (valid for ten years).
func signLeaf(caDir, pki, name string, tmpl *x509.Certificate) error {
	caCert, caKey, err := readCA(caDir)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, now, now.Add(10*365*24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pki, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func readCA(pki string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(pki, "ca.key"))
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("the cluster CA in " + pki + " is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// writeRealNodeConfig writes, under the node's directory, the kubelet's certificates (client:
// system:node:<name> in system:nodes, for the Node authorizer; serving: hostIP, the Node's
// address the API server dials for logs, exec and proxy), its kubeconfig and configuration, containerd's
// configuration and the CNI network.
func writeRealNodeConfig(dir, server, subnet, hostIP, pauseImage string, kubeletPort, healthzPort int) (realNodeFiles, error) {
	node := realNodeDir(dir)
	var f realNodeFiles
	for _, d := range []string{"pki", "containerd/root", "containerd/state", "runc", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(filepath.Join(node, d), 0o755); err != nil {
			return f, err
		}
	}
	pki := filepath.Join(node, "pki")
	clusterPKI := filepath.Join(dir, "pki")
	if err := copyFile(filepath.Join(clusterPKI, "ca.crt"), filepath.Join(pki, "ca.crt")); err != nil {
		return f, err
	}
	if err := signLeaf(clusterPKI, pki, "kubelet-client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return f, err
	}
	if err := signLeaf(clusterPKI, pki, "kubelet", &x509.Certificate{
		Subject:     pkix.Name{CommonName: RealNodeName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{RealNodeName, "localhost"},
		IPAddresses: []net.IP{net.ParseIP(hostIP), net.ParseIP("127.0.0.1")},
	}); err != nil {
		return f, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return f, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(pki, "kubelet-client.crt"), ClientKey: filepath.Join(pki, "kubelet-client.key")}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "kubelet"}
	kc.CurrentContext = "localcluster"
	f.kubeletKubeconfig = filepath.Join(node, "kubeconfig-kubelet")
	if err := clientcmd.WriteToFile(*kc, f.kubeletKubeconfig); err != nil {
		return f, err
	}

	f.containerdSocket = filepath.Join(node, "containerd", "containerd.sock")
	f.containerdConfig = filepath.Join(node, "containerd", "config.toml")
	if err := os.WriteFile(f.containerdConfig, []byte(containerdConfig(node, f.containerdSocket, pauseImage)), 0o644); err != nil {
		return f, err
	}
	cni, err := cniConfig(node, subnet)
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(filepath.Join(node, "cni", "net.d", "10-localcluster.conflist"), cni, 0o644); err != nil {
		return f, err
	}
	f.kubeletConfig = filepath.Join(node, "kubelet-config.yaml")
	return f, os.WriteFile(f.kubeletConfig, []byte(kubeletConfig(node, f.containerdSocket, hostIP, kubeletPort, healthzPort)), 0o644)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// containerdConfig is containerd's configuration: its own root, state and socket under the
// node's directory; the CRI plugin with the overlayfs snapshotter, runc without systemd
// cgroups (the kubelet's cgroupfs driver), the locally built pause image, the CNI network of
// the node's directory, and restrict_oom_score_adj (the machine's sandbox withholds
// CAP_SYS_RESOURCE: without it every sandbox fails with "can't get final child's PID from
// pipe: EOF"). Plugins that would use fixed paths of the host (/opt/containerd) or other
// snapshotters are disabled; the stream server listens on loopback on a free port.
func containerdConfig(node, socket, pauseImage string) string {
	q := strconv.Quote
	return `version = 2
root = ` + q(filepath.Join(node, "containerd", "root")) + `
state = ` + q(filepath.Join(node, "containerd", "state")) + `
oom_score = 0
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing"]

[grpc]
  address = ` + q(socket) + `

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ` + q(pauseImage) + `
  restrict_oom_score_adj = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  disable_hugetlb_controller = true
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = ` + q(filepath.Join(node, "runc")) + `

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ` + q(cniBinDir) + `
    conf_dir = ` + q(filepath.Join(node, "cni", "net.d")) + `
    max_conf_num = 1
`
}

// cniConfig is the pod network: a bridge (created beforehand with the host's address) with
// host-local addresses from subnet kept under the node's directory; isGateway false (the
// plugin itself leaves IP forwarding alone), no masquerade, no default route: Pods reach each
// other, the host, and the Service cluster IPs through the host (one route, to serviceCIDR via
// the host's address, where kube-proxy's rules rewrite them), nothing beyond.
func cniConfig(node, subnet string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "localcluster",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": realNodeBridge, "isGateway": false, "isDefaultGateway": false,
				"ipMasq": false, "hairpinMode": false, "promiscMode": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(node, "cni", "ipam"),
					"ranges":  [][]map[string]string{{{"subnet": subnet, "gateway": hostAddress(subnet)}}},
					"routes":  []map[string]string{{"dst": serviceCIDR, "gw": hostAddress(subnet)}},
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the kubelet's configuration: serving on the host's address on the pod
// network's bridge only (a free port; the Node's InternalIP, which the API server dials for
// logs, exec and proxy: the kubelet refuses a loopback node IP), healthz on loopback, clients authenticated by the cluster CA and authorized by the API
// server (SubjectAccessReview), cgroupfs, cgroup v1 allowed, swap tolerated, no iptables
// chains, no host resolv.conf, its logs and plugin directories under the node's directory,
// image garbage collection off (the images cannot be pulled again: no registry), eviction only
// when the machine is nearly full.
func kubeletConfig(node, socket, hostIP string, port, healthz int) string {
	q := strconv.Quote
	pki := filepath.Join(node, "pki")
	return strings.TrimLeft(`
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: `+hostIP+`
port: `+strconv.Itoa(port)+`
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: `+strconv.Itoa(healthz)+`
tlsCertFile: `+q(filepath.Join(pki, "kubelet.crt"))+`
tlsPrivateKeyFile: `+q(filepath.Join(pki, "kubelet.key"))+`
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: `+q(filepath.Join(pki, "ca.crt"))+`
authorization:
  mode: Webhook
containerRuntimeEndpoint: `+q("unix://"+socket)+`
imageServiceEndpoint: `+q("unix://"+socket)+`
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
podLogsDir: `+q(filepath.Join(node, "pod-logs"))+`
volumePluginDir: `+q(filepath.Join(node, "volume-plugins"))+`
registerNode: true
registerWithTaints:
- key: `+RealNodeTaint+`
  value: "true"
  effect: NoSchedule
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
maxPods: 110
shutdownGracePeriod: 0s
rotateCertificates: false
serverTLSBootstrap: false
`, "\n")
}

// writeKubeProxyConfig writes kube-proxy's client certificate (user system:kube-proxy, which
// the API server's bootstrap policy binds to system:node-proxier), its kubeconfig and its
// configuration under the node's directory, and returns the configuration's path.
func writeKubeProxyConfig(dir, server, subnet, hostIP string, healthz, metrics int) (string, error) {
	node := realNodeDir(dir)
	pki := filepath.Join(node, "pki")
	if err := signLeaf(filepath.Join(dir, "pki"), pki, "kube-proxy-client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:kube-proxy"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return "", err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["kube-proxy"] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(pki, "kube-proxy-client.crt"), ClientKey: filepath.Join(pki, "kube-proxy-client.key")}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "kube-proxy"}
	kc.CurrentContext = "localcluster"
	kubeconfig := filepath.Join(node, "kubeconfig-kube-proxy")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return "", err
	}
	path := filepath.Join(node, "kube-proxy-config.yaml")
	return path, os.WriteFile(path, []byte(kubeProxyConfig(kubeconfig, subnet, hostIP, healthz, metrics)), 0o644)
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode for the real node (its Node name,
// the host's bridge address as its node IP), the pod network as the cluster CIDR (traffic from
// outside it to a Service is masqueraded), NodePorts only on the bridge address and never on
// loopback (no route_localnet), conntrack settings left as the host has them (no sysctl written),
// the OOM score left alone (the machine's sandbox withholds CAP_SYS_RESOURCE), healthz and
// metrics on loopback.
func kubeProxyConfig(kubeconfig, subnet, hostIP string, healthz, metrics int) string {
	q := strconv.Quote
	return strings.TrimLeft(`
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: `+q(kubeconfig)+`
hostnameOverride: `+RealNodeName+`
bindAddress: `+hostIP+`
healthzBindAddress: 127.0.0.1:`+strconv.Itoa(healthz)+`
metricsBindAddress: 127.0.0.1:`+strconv.Itoa(metrics)+`
mode: iptables
clusterCIDR: `+subnet+`
detectLocalMode: ClusterCIDR
nodePortAddresses:
- `+hostIP+`/32
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, "\n")
}
