package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cri "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// hostSysctls are the settings the kubelet (setupKernelTunables) and the pod network may change,
// as paths under /proc/sys.
var hostSysctls = []string{
	"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/ipv4/conf/all/forwarding", "net/ipv6/conf/all/forwarding",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
}

// hostPaths are the fixed paths kubelet, containerd and the CNI plugins create whatever their
// configured directories: removed by cluster-down when they did not exist before (parents after
// children).
var hostPaths = []string{
	"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/var/lib/kubelet",
	"/var/log/containers", "/var/log/pods",
	"/var/lib/cni/results", "/var/lib/cni/networks", "/var/lib/cni",
	"/run/containerd/s", "/run/containerd/fifo", "/run/containerd/runc", "/run/containerd",
	"/run/netns",
	"/etc/cni/net.d", "/etc/cni", "/opt/cni/bin", "/opt/cni", "/opt/containerd",
	"/var/lib/containerd", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", "/usr/libexec/kubernetes",
}

// hostCgroups are the top-level cgroups the kubelet (cgroupfs driver) and containerd create in
// every hierarchy.
var hostCgroups = []string{"kubepods", "k8s.io", "kubepods.slice", "system.slice"}

// hostState is what the node may change, as found before it started.
type hostState struct {
	// Sysctls maps /proc/sys paths to their values (absent: the setting does not exist).
	Sysctls map[string]string `json:"sysctls"`
	// Paths maps each of hostPaths to whether it existed.
	Paths map[string]bool `json:"paths"`
	// Netns are the network namespaces in /run/netns.
	Netns []string `json:"netns"`
	// Cgroups maps each cgroup directory hostCgroups names, in each hierarchy, to whether it
	// existed.
	Cgroups map[string]bool `json:"cgroups"`
	// Links are the network interfaces.
	Links []string `json:"links"`
	// KubeChains are the packet filter chains named KUBE-* (kube-proxy's), as
	// "<tool> <table> <chain>" for iptables and ip6tables.
	KubeChains []string `json:"kubeChains"`
}

// filterTools are the packet filter tools whose KUBE-* chains kube-proxy makes (it programs
// both families when the host has both).
var filterTools = []string{"iptables", "ip6tables"}

// kubeChains lists the KUBE-* chains of every table of tool's save output (none when the tool
// is missing).
func kubeChains(tool string) []string {
	out, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return nil
	}
	var chains []string
	table := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":KUBE-"):
			chains = append(chains, tool+" "+table+" "+strings.Fields(l[1:])[0])
		}
	}
	return chains
}

// removeKubeChains removes from tool's tables the KUBE-* chains not in found, and every rule
// that jumps to one of them, in one iptables-restore transaction per table (--noflush: nothing
// else changes).
func removeKubeChains(tool string, found []string, log func(string, ...any)) {
	out, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return
	}
	for _, r := range kubeChainRemovals(tool, string(out), found) {
		cmd := exec.Command(tool+"-restore", "--noflush")
		cmd.Stdin = strings.NewReader(r.script)
		if out, err := cmd.CombinedOutput(); err != nil {
			log("%s-restore (removing kube-proxy's %d chains of table %s): %v: %s", tool, r.chains, r.table, err, out)
			continue
		}
		log("removed kube-proxy's %d chains and %d jumps to them from %s table %s", r.chains, r.jumps, tool, r.table)
	}
}

// chainRemoval is the iptables-restore script that removes one table's new KUBE-* chains.
type chainRemoval struct {
	table         string
	chains, jumps int
	script        string
}

// kubeChainRemovals reads tool's save output and returns, per table with KUBE-* chains not in
// found, the script that deletes the rules of other chains jumping to them, then flushes and
// deletes them.
func kubeChainRemovals(tool, save string, found []string) []chainRemoval {
	type tableRules struct{ jumps, chains []string }
	tables := map[string]*tableRules{}
	var order []string
	table := ""
	isNew := func(chain string) bool {
		return strings.HasPrefix(chain, "KUBE-") && !slices.Contains(found, tool+" "+table+" "+chain)
	}
	for _, l := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
			tables[table] = &tableRules{}
			order = append(order, table)
		case strings.HasPrefix(l, ":") && tables[table] != nil:
			if c := strings.Fields(l[1:])[0]; isNew(c) {
				tables[table].chains = append(tables[table].chains, c)
			}
		case strings.HasPrefix(l, "-A ") && tables[table] != nil:
			f := strings.Fields(l)
			if len(f) < 2 || isNew(f[1]) {
				continue // flushed with its chain
			}
			if j := slices.Index(f, "-j"); j > 0 && j+1 < len(f) && isNew(f[j+1]) {
				tables[table].jumps = append(tables[table].jumps, "-D"+strings.TrimPrefix(l, "-A"))
			}
		}
	}
	var out []chainRemoval
	for _, t := range order {
		r := tables[t]
		if len(r.chains) == 0 && len(r.jumps) == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString("*" + t + "\n")
		for _, j := range r.jumps {
			b.WriteString(j + "\n")
		}
		for _, c := range r.chains {
			b.WriteString("-F " + c + "\n")
		}
		for _, c := range r.chains {
			b.WriteString("-X " + c + "\n")
		}
		b.WriteString("COMMIT\n")
		out = append(out, chainRemoval{table: t, chains: len(r.chains), jumps: len(r.jumps), script: b.String()})
	}
	return out
}

func snapshotHost() (hostState, error) {
	s := hostState{Sysctls: map[string]string{}, Paths: map[string]bool{}, Cgroups: map[string]bool{}}
	for _, k := range hostSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		s.Paths[p] = err == nil
	}
	s.Netns = netnsNames()
	for _, c := range cgroupDirs() {
		_, err := os.Stat(c)
		s.Cgroups[c] = err == nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return s, err
	}
	for _, i := range ifs {
		s.Links = append(s.Links, i.Name)
	}
	slices.Sort(s.Links)
	for _, tool := range filterTools {
		s.KubeChains = append(s.KubeChains, kubeChains(tool)...)
	}
	return s, nil
}

func netnsNames() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// cgroupHierarchies are the mount points of the cgroup file systems (v1 and v2).
func cgroupHierarchies() []string {
	var out []string
	for _, m := range mountInfo() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.point)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func cgroupDirs() []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		for _, c := range hostCgroups {
			out = append(out, filepath.Join(h, c))
		}
	}
	return out
}

type mount struct{ point, fstype string }

func mountInfo() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// checkSubnet refuses a pod subnet that overlaps an address or a route of the machine (the
// node's own bridge of a previous run is deleted before).
func checkSubnet(subnet string) error {
	_, pn, err := net.ParseCIDR(subnet)
	if err != nil || pn.IP.To4() == nil {
		return fmt.Errorf("pod subnet %q (METALLO_CLUSTER_POD_SUBNET): want an IPv4 CIDR such as %s", subnet, defaultPodSubnet)
	}
	if ones, _ := pn.Mask.Size(); ones > 29 {
		return fmt.Errorf("pod subnet %s is too small: at most /29", subnet)
	}
	overlaps := func(n *net.IPNet) bool { return n.Contains(pn.IP) || pn.Contains(n.IP) }
	for _, fixed := range []string{serviceCIDR, podCIDR, "127.0.0.0/8"} {
		if _, n, _ := net.ParseCIDR(fixed); n != nil && overlaps(n) {
			return fmt.Errorf("pod subnet %s overlaps the cluster's %s", subnet, fixed)
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		if i.Name == realNodeBridge {
			return fmt.Errorf("the network interface %s exists already (left by a real node that was not stopped, or another program's): "+
				"remove it (ip link del %s) if it is not in use", realNodeBridge, realNodeBridge)
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && overlaps(n) {
				return fmt.Errorf("pod subnet %s collides with the address %s of %s: choose another with METALLO_CLUSTER_POD_SUBNET", subnet, n, i.Name)
			}
		}
	}
	routes, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(routes), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, mask := hexIP(f[1]), hexIP(f[7])
		if dst == nil || mask == nil || mask.Equal(net.IPv4zero) {
			continue // the default route
		}
		if n := (&net.IPNet{IP: dst, Mask: net.IPMask(mask.To4())}); overlaps(n) {
			return fmt.Errorf("pod subnet %s collides with the route to %s via %s: choose another with METALLO_CLUSTER_POD_SUBNET", subnet, n, f[0])
		}
	}
	return nil
}

// hexIP decodes /proc/net/route's little-endian hexadecimal IPv4 addresses.
func hexIP(s string) net.IP {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return nil
	}
	return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// hostAddress is the pod subnet's first address, the host's on the bridge.
func hostAddress(subnet string) string {
	_, pn, err := net.ParseCIDR(subnet)
	if err != nil {
		return ""
	}
	ip := pn.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
}

// createBridge creates the pod network's bridge with the host's address on it: the host (the
// API server proxying to Pods) reaches Pods through it; the bridge plugin then attaches each
// Pod with isGateway false, so it never enables IP forwarding, and nothing masquerades.
func createBridge(subnet string) error {
	ones, _ := mustMask(subnet)
	for _, args := range [][]string{
		{"link", "add", "name", realNodeBridge, "type", "bridge"},
		{"addr", "add", hostAddress(subnet) + "/" + strconv.Itoa(ones), "dev", realNodeBridge},
		{"link", "set", realNodeBridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func mustMask(subnet string) (int, int) {
	_, pn, err := net.ParseCIDR(subnet)
	if err != nil {
		return 0, 0
	}
	return pn.Mask.Size()
}

// teardownNode stops the node's processes in dir: kube-proxy and the API server's forwarder,
// the kubelet, then every Pod sandbox through
// the CRI (containers stopped, the network torn down by the CNI plugins), then containerd, and
// kills what is left (container processes, shims).
func teardownNode(dir, nodeDir string, log func(string, ...any)) error {
	var errs []error
	// kube-proxy first, so it rewrites no rule that restoreHost removes; then the forwarder.
	for _, c := range []string{kubeProxyComponent, forwardComponent} {
		if stopped, err := stop(dir, c, 15*time.Second); err != nil {
			errs = append(errs, err)
		} else if stopped {
			log("stopped %s", c)
		}
	}
	if stopped, err := stop(dir, "kubelet", 15*time.Second); err != nil {
		errs = append(errs, err)
	} else if stopped {
		log("stopped kubelet")
	}
	socket := filepath.Join(nodeDir, "containerd", "containerd.sock")
	if componentAlive(dir, "containerd") {
		if n, err := stopSandboxes(socket); err != nil {
			log("stopping the Pod sandboxes through the CRI: %v (their processes are killed instead)", err)
		} else if n > 0 {
			log("stopped and removed %d Pod sandboxes", n)
		}
	}
	if stopped, err := stop(dir, "containerd", 15*time.Second); err != nil {
		errs = append(errs, err)
	} else if stopped {
		log("stopped containerd")
	}
	killCgroupProcesses(log)
	killMatching(socket, log)
	return errors.Join(errs...)
}

// stopSandboxes stops and removes every Pod sandbox of the containerd at socket.
func stopSandboxes(socket string) (int, error) {
	logger := klog.Background()
	rs, err := cri.NewRemoteRuntimeService("unix://"+socket, 10*time.Second, nil, &logger)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, sb := range sandboxes {
		if err := rs.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
			continue
		}
		if err := rs.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	return len(sandboxes), errors.Join(errs...)
}

// killCgroupProcesses kills every process left in the kubelet's Pod cgroups (containers whose
// shim was killed).
func killCgroupProcesses(log func(string, ...any)) {
	for _, h := range cgroupHierarchies() {
		for _, c := range hostCgroups {
			_ = filepath.WalkDir(filepath.Join(h, c), func(path string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
				if err != nil {
					return nil
				}
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						log("killing process %d left in %s", pid, path)
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
	}
}

// killMatching kills the processes whose command line names s (the shims of our containerd
// name its socket).
func killMatching(s string, log func(string, ...any)) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), s) {
			log("killing %s (pid %d)", strings.SplitN(string(cmd), "\x00", 2)[0], pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// restoreHost undoes what the real node recorded in h changed: it detaches every mount under
// the node's directory and the network namespaces it made, deletes the bridge, removes the
// cgroups, kube-proxy's KUBE-* packet filter chains (and the rules jumping to them) and the
// fixed paths it created, and sets the sysctls back. It then compares the host with
// h.Found and fails naming what differs.
func restoreHost(h holderRecord, log func(string, ...any)) error {
	nodeDir := realNodeDir(h.Dir)
	killCgroupProcesses(log)
	killMatching(filepath.Join(nodeDir, "containerd", "containerd.sock"), log)
	found := map[string]bool{}
	for _, n := range h.Found.Netns {
		found[n] = true
	}
	var points []string
	for _, m := range mountInfo() {
		if m.point == nodeDir || strings.HasPrefix(m.point, nodeDir+"/") {
			points = append(points, m.point)
		}
		if d, n := filepath.Split(m.point); (d == "/run/netns/" || d == "/var/run/netns/") && !found[n] {
			points = append(points, m.point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range slices.Compact(points) {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			log("unmount %s: %v", p, err)
		}
	}
	for _, n := range netnsNames() {
		if !found[n] {
			_ = os.Remove(filepath.Join("/run/netns", n))
		}
	}
	if _, err := net.InterfaceByName(h.Bridge); err == nil && !slices.Contains(h.Found.Links, h.Bridge) {
		if out, err := exec.Command("ip", "link", "del", h.Bridge).CombinedOutput(); err != nil {
			log("ip link del %s: %v: %s", h.Bridge, err, out)
		}
	}
	for _, c := range cgroupDirs() {
		if !h.Found.Cgroups[c] {
			removeCgroup(c)
		}
	}
	for _, tool := range filterTools {
		removeKubeChains(tool, h.Found.KubeChains, log)
	}
	for _, p := range hostPaths {
		if !h.Found.Paths[p] {
			if _, err := os.Lstat(p); err == nil {
				if err := os.RemoveAll(p); err != nil {
					log("remove %s: %v", p, err)
				}
			}
		}
	}
	for k, v := range h.Found.Sysctls {
		path := filepath.Join("/proc/sys", k)
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
				log("restore %s=%s: %v", strings.ReplaceAll(k, "/", "."), v, err)
			}
		}
	}
	now, err := snapshotHost()
	if err != nil {
		return err
	}
	if diff := diffHost(h.Found, now); len(diff) > 0 {
		return fmt.Errorf("the host differs from what the real node found: %s", strings.Join(diff, "; "))
	}
	return nil
}

// removeCgroup removes a cgroup directory and its children (cgroups are removed with rmdir,
// deepest first, once they hold no process).
func removeCgroup(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50; try++ {
			err := syscall.Rmdir(dirs[i])
			if err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(100 * time.Millisecond) // processes killed a moment ago are still leaving
		}
	}
}

// diffHost names what differs between two host states.
func diffHost(was, now hostState) []string {
	var out []string
	for _, k := range sortedKeys(was.Sysctls) {
		if now.Sysctls[k] != was.Sysctls[k] {
			out = append(out, fmt.Sprintf("%s is %s, was %s", strings.ReplaceAll(k, "/", "."), now.Sysctls[k], was.Sysctls[k]))
		}
	}
	for _, p := range sortedKeys(was.Paths) {
		if now.Paths[p] != was.Paths[p] {
			out = append(out, fmt.Sprintf("%s exists: %v, before: %v", p, now.Paths[p], was.Paths[p]))
		}
	}
	for _, c := range sortedKeys(now.Cgroups) {
		if now.Cgroups[c] && !was.Cgroups[c] {
			out = append(out, "cgroup "+c+" is left")
		}
	}
	// Network namespaces and interfaces of the node's kind only (cni-*, the bridge, veth*):
	// other programs of the machine may make their own meanwhile.
	for _, n := range now.Netns {
		if strings.HasPrefix(n, "cni-") && !slices.Contains(was.Netns, n) {
			out = append(out, "network namespace "+n+" is left")
		}
	}
	for _, l := range now.Links {
		if (l == realNodeBridge || strings.HasPrefix(l, "veth")) && !slices.Contains(was.Links, l) {
			out = append(out, "network interface "+l+" is left")
		}
	}
	for _, c := range now.KubeChains {
		if !slices.Contains(was.KubeChains, c) {
			out = append(out, "packet filter chain "+c+" is left")
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
