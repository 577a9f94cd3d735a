package cluster

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	proxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	proxyvalidation "k8s.io/kubernetes/pkg/proxy/apis/config/validation"
)

// The pod subnet is refused when it overlaps an address of the machine, the cluster's Service or
// KWOK ranges or loopback, and when it is not a usable IPv4 CIDR.
func TestThePodSubnetIsRefusedWhenItCollides(t *testing.T) {
	cases := map[string]string{
		"not a CIDR":   "10.88.0.0",
		"IPv6":         "fd00:88::/64",
		"too small":    "10.88.0.0/30",
		"service IPs":  "10.96.0.0/24",
		"KWOK's Pods":  "10.244.3.0/24",
		"loopback":     "127.1.0.0/24",
		"wider than 8": "8.0.0.0/4",
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				ones, _ := n.Mask.Size()
				if ones <= 29 {
					cases["the address of "+i.Name] = n.String()
				}
			}
		}
	}
	for name, subnet := range cases {
		if err := checkSubnet(subnet); err == nil {
			t.Errorf("%s (%s) accepted", name, subnet)
		}
	}
}

// The pod network attaches Pods to the bridge with no gateway, no masquerade and one route, the
// Service range via the host's address (where kube-proxy's rules take it): no default route,
// nothing reaches beyond the machine.
func TestThePodNetworkHasNoGatewayNoMasqueradeAndOnlyTheServiceRoute(t *testing.T) {
	b, err := cniConfig("/state/node", "10.88.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			IPAM      struct {
				Type    string                `json:"type"`
				DataDir string                `json:"dataDir"`
				Routes  []map[string]string   `json:"routes"`
				Ranges  [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	p := conf.Plugins[0]
	if len(conf.Plugins) != 1 || p.Type != "bridge" || p.Bridge != realNodeBridge || p.IsGateway || p.IPMasq || p.IPAM.Type != "host-local" ||
		len(p.IPAM.Routes) != 1 || p.IPAM.Routes[0]["dst"] != serviceCIDR || p.IPAM.Routes[0]["gw"] != "10.88.0.1" || !strings.HasPrefix(p.IPAM.DataDir, "/state/node/") || p.IPAM.Ranges[0][0]["gateway"] != "10.88.0.1" {
		t.Fatalf("pod network %s", b)
	}
}

// The host check names every kind of leftover, and nothing when the host is as found.
func TestTheHostCheckNamesWhatTheNodeLeft(t *testing.T) {
	was := hostState{
		Sysctls: map[string]string{"vm/overcommit_memory": "0"}, Paths: map[string]bool{"/var/lib/kubelet": false},
		Cgroups: map[string]bool{"/sys/fs/cgroup/memory/kubepods": false}, Netns: []string{"other"}, Links: []string{"eth0"},
		KubeChains: []string{"iptables filter KUBE-FOUND"},
	}
	if d := diffHost(was, was); len(d) != 0 {
		t.Fatalf("the same host differs: %v", d)
	}
	now := hostState{
		Sysctls: map[string]string{"vm/overcommit_memory": "1"}, Paths: map[string]bool{"/var/lib/kubelet": true},
		Cgroups: map[string]bool{"/sys/fs/cgroup/memory/kubepods": true}, Netns: []string{"cni-1", "other", "tests-own"},
		Links:      []string{"eth0", "mlc0", "veth12", "testbr0"},
		KubeChains: []string{"iptables filter KUBE-FOUND", "iptables nat KUBE-SERVICES", "ip6tables filter KUBE-FORWARD"},
	}
	d := strings.Join(diffHost(was, now), "\n")
	for _, want := range []string{"vm.overcommit_memory is 1, was 0", "/var/lib/kubelet exists", "cgroup /sys/fs/cgroup/memory/kubepods", "cni-1", "mlc0", "veth12", "iptables nat KUBE-SERVICES is left", "ip6tables filter KUBE-FORWARD is left"} {
		if !strings.Contains(d, want) {
			t.Errorf("the difference does not name %q:\n%s", want, d)
		}
	}
	for _, other := range []string{"tests-own", "testbr0", "KUBE-FOUND"} {
		if strings.Contains(d, other) {
			t.Errorf("another program's %s is named as the node's:\n%s", other, d)
		}
	}
}

// kube-proxy's configuration as the node writes it decodes strictly with kube-proxy's own scheme
// (no unknown or misspelt field) into iptables mode for the real node, and passes kube-proxy's
// own validation.
func TestKubeProxyConfigurationIsValidForKubeProxy(t *testing.T) {
	raw := kubeProxyConfig("/state/node/kubeconfig-kube-proxy", "10.88.0.0/24", "10.88.0.1", 41001, 41002)
	obj, _, err := proxyscheme.Codecs.UniversalDecoder().Decode([]byte(raw), nil, nil)
	if err != nil {
		t.Fatalf("decode:\n%s\n%v", raw, err)
	}
	cfg, ok := obj.(*proxyconfig.KubeProxyConfiguration)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	if errs := proxyvalidation.Validate(cfg); len(errs) > 0 {
		t.Fatalf("kube-proxy refuses its configuration: %v", errs.ToAggregate())
	}
	if cfg.Mode != proxyconfig.ProxyModeIPTables || cfg.HostnameOverride != RealNodeName || len(cfg.DetectLocal.ClusterCIDRs) != 1 || cfg.DetectLocal.ClusterCIDRs[0] != "10.88.0.0/24" ||
		cfg.Linux.Conntrack.MaxPerCore == nil || *cfg.Linux.Conntrack.MaxPerCore != 0 || cfg.IPTables.LocalhostNodePorts == nil || *cfg.IPTables.LocalhostNodePorts {
		t.Fatalf("configuration %+v", cfg)
	}
}

// The cleanup of kube-proxy's chains deletes the jumps other chains make to them, then flushes and
// deletes the chains, per table, and leaves a KUBE-* chain found before and every other rule alone.
func TestKubeProxyChainsAreRemovedWithTheJumpsToThem(t *testing.T) {
	save := `# Generated by iptables-save
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ABC - [0:0]
:DOCKER - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j DOCKER
-A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-ABC
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-FOUND - [0:0]
-A INPUT -j KUBE-FOUND
COMMIT
`
	got := kubeChainRemovals("iptables", save, []string{"iptables filter KUBE-FOUND"})
	if len(got) != 1 || got[0].table != "nat" || got[0].chains != 2 || got[0].jumps != 2 {
		t.Fatalf("removals %+v", got)
	}
	want := `*nat
-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-F KUBE-SERVICES
-F KUBE-SVC-ABC
-X KUBE-SERVICES
-X KUBE-SVC-ABC
COMMIT
`
	if got[0].script != want {
		t.Fatalf("script:\n%s\nwant:\n%s", got[0].script, want)
	}
}
