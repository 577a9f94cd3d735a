package policytest

import (
	"testing"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
)

// The messages metallo-workspace-helpers and metallo-workspace-readers share, after "a workspace
// helper" or "a workspace reader".
const (
	msgHostNamespaces    = " shares no namespace with its node or between containers"
	msgUnrenderedFields  = " sets no Pod field the Runtime does not render"
	msgContainerSecurity = "'s container securityContext is exactly the rendered one"
	msgContainerFields   = "'s container has no ports, lifecycle hooks, probes"
	msgMountFields       = "'s volume mounts have no subPath, subPathExpr or mountPropagation"
	msgOwnership         = " has no finalizers and no owner references"

	msgHelperPodSecurity = "a workspace helper's Pod securityContext is exactly the rendered one: fsGroup 65532"
	msgHelperDeadline    = "a workspace helper has activeDeadlineSeconds its command's --timeout"
	msgHelperToken       = "a workspace helper has no service-account token and no environment"
	msgReaderPodSecurity = "a workspace reader's Pod securityContext is exactly the rendered one: runAsNonRoot true"
	msgReaderDeadline    = "a workspace reader has activeDeadlineSeconds from 1 to 3600"
)

// unrendered is a change to a rendered helper or reader Pod of a field the Runtime never renders
// (or renders otherwise), and the suffix of the message of the rule that refuses it.
type unrendered struct {
	change func(p *corev1.Pod)
	suffix string
	// extraVolume is set when the change needs a volume of its own, which the reader's
	// mounts rule refuses as well.
	extraVolume bool
}

// unrenderedFields are the changes both policies refuse, one field each (or the one field and
// what the API server's validation needs with it). runtimeClass names an existing RuntimeClass
// (the RuntimeClass admission plugin refuses an unknown one before any policy).
func unrenderedFields(claim, runtimeClass string) map[string]unrendered {
	no, yes := false, true
	zero := int64(0)
	sec := func(p *corev1.Pod) *corev1.SecurityContext { return p.Spec.Containers[0].SecurityContext }
	exec := &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "cat /var/run/secrets/metallo/repository/token"}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: exec}}
	return map[string]unrendered{
		"hostNetwork":           {func(p *corev1.Pod) { p.Spec.HostNetwork = true }, msgHostNamespaces, false},
		"hostPID":               {func(p *corev1.Pod) { p.Spec.HostPID = true }, msgHostNamespaces, false},
		"hostIPC":               {func(p *corev1.Pod) { p.Spec.HostIPC = true }, msgHostNamespaces, false},
		"hostUsers false":       {func(p *corev1.Pod) { p.Spec.HostUsers = &no }, msgHostNamespaces, false},
		"shareProcessNamespace": {func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = &yes }, msgHostNamespaces, false},
		"a nodeName":            {func(p *corev1.Pod) { p.Spec.NodeName = "kwok-node-0" }, msgUnrenderedFields, false},
		"hostAliases": {func(p *corev1.Pod) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "203.0.113.7", Hostnames: []string{"git.example.org"}}}
		}, msgUnrenderedFields, false},
		"a dnsConfig": {func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"203.0.113.53"}}
		}, msgUnrenderedFields, false},
		"dnsPolicy Default":  {func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }, msgUnrenderedFields, false},
		"a runtimeClassName": {func(p *corev1.Pod) { p.Spec.RuntimeClassName = &runtimeClass }, msgUnrenderedFields, false},

		"privileged": {func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &yes}
		}, msgContainerSecurity, false},
		"an added capability": {func(p *corev1.Pod) {
			sec(p).Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW"}}
		}, msgContainerSecurity, false},
		"no capabilities dropped": {func(p *corev1.Pod) { sec(p).Capabilities = nil }, msgContainerSecurity, false},
		"only NET_RAW dropped": {func(p *corev1.Pod) {
			sec(p).Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}
		}, msgContainerSecurity, false},
		"ALL dropped and NET_BIND_SERVICE added": {func(p *corev1.Pod) {
			sec(p).Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
		}, msgContainerSecurity, false},
		"allowPrivilegeEscalation true": {func(p *corev1.Pod) { sec(p).AllowPrivilegeEscalation = &yes }, msgContainerSecurity, false},
		"no container securityContext":  {func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext = nil }, msgContainerSecurity, false},
		"the container's runAsUser 0":   {func(p *corev1.Pod) { sec(p).RunAsUser = &zero }, msgContainerSecurity, false},
		"readOnlyRootFilesystem":        {func(p *corev1.Pod) { sec(p).ReadOnlyRootFilesystem = &yes }, msgContainerSecurity, false},
		"the container's seccomp Unconfined": {func(p *corev1.Pod) {
			sec(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, msgContainerSecurity, false},
		"the container's AppArmor Unconfined": {func(p *corev1.Pod) {
			sec(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, msgContainerSecurity, false},

		"a hostPort": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		}, msgContainerFields, false},
		"a postStart hook": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: exec}}
		}, msgContainerFields, false},
		"a liveness probe":   {func(p *corev1.Pod) { p.Spec.Containers[0].LivenessProbe = probe }, msgContainerFields, false},
		"a readiness probe":  {func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = probe }, msgContainerFields, false},
		"a startup probe":    {func(p *corev1.Pod) { p.Spec.Containers[0].StartupProbe = probe }, msgContainerFields, false},
		"stdin":              {func(p *corev1.Pod) { p.Spec.Containers[0].Stdin = true }, msgContainerFields, false},
		"a tty":              {func(p *corev1.Pod) { p.Spec.Containers[0].TTY = true }, msgContainerFields, false},
		"another workingDir": {func(p *corev1.Pod) { p.Spec.Containers[0].WorkingDir = "/" }, msgContainerFields, false},
		"a resize policy": {func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}}
		}, msgContainerFields, false},
		"another terminationMessagePath": {func(p *corev1.Pod) {
			p.Spec.Containers[0].TerminationMessagePath = "/workspace/outcome"
		}, msgContainerFields, false},
		"a volume device": {func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "block", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "block", DevicePath: "/dev/xvdb"}}
		}, msgContainerFields, true},

		"a subPath":     {func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "repo" }, msgMountFields, false},
		"a subPathExpr": {func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPathExpr = "$(POD_NAME)" }, msgMountFields, false},
		"mountPropagation": {func(p *corev1.Pod) {
			m := corev1.MountPropagationHostToContainer
			p.Spec.Containers[0].VolumeMounts[0].MountPropagation = &m
		}, msgMountFields, false},

		"a finalizer": {func(p *corev1.Pod) { p.Finalizers = []string{"example.org/hold"} }, msgOwnership, false},
		"an owner reference": {func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: siteConfigMap, UID: types.UID(uuid.NewString())}}
		}, msgOwnership, false},
	}
}

// podSecurityFields are changes of the Pod securityContext that neither policy admits.
func podSecurityFields() map[string]func(p *corev1.Pod) {
	no := false
	zero := int64(0)
	psc := func(p *corev1.Pod) *corev1.PodSecurityContext {
		if p.Spec.SecurityContext == nil {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		return p.Spec.SecurityContext
	}
	onRootMismatch := corev1.FSGroupChangeOnRootMismatch
	localhost := "profiles/metallo.json"
	return map[string]func(p *corev1.Pod){
		"runAsUser 0":        func(p *corev1.Pod) { psc(p).RunAsUser = &zero },
		"runAsNonRoot false": func(p *corev1.Pod) { psc(p).RunAsNonRoot = &no },
		"no runAsNonRoot":    func(p *corev1.Pod) { psc(p).RunAsNonRoot = nil },
		"no seccomp profile": func(p *corev1.Pod) { psc(p).SeccompProfile = nil },
		"a Localhost seccomp profile": func(p *corev1.Pod) {
			psc(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &localhost}
		},
		"supplementalGroups 0": func(p *corev1.Pod) { psc(p).SupplementalGroups = []int64{0} },
		"a sysctl": func(p *corev1.Pod) {
			psc(p).Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
		},
		"fsGroupChangePolicy": func(p *corev1.Pod) { psc(p).FSGroupChangePolicy = &onRootMismatch },
		"seccomp Unconfined": func(p *corev1.Pod) {
			psc(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		},
		"AppArmor Unconfined": func(p *corev1.Pod) {
			psc(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		},
		"SELinux options": func(p *corev1.Pod) { psc(p).SELinuxOptions = &corev1.SELinuxOptions{Level: "s0:c1,c2"} },
	}
}

// runtimeClass creates a RuntimeClass for the test (deleted at its end) and returns its name.
func runtimeClass(t *testing.T, s *site) string {
	t.Helper()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "policytest-" + uuid.NewString()[:8]}, Handler: "runc"}
	if _, err := s.e.Client.NodeV1().RuntimeClasses().Create(ctx(t), rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("runtime class: %v", err)
	}
	t.Cleanup(func() { _ = s.e.Client.NodeV1().RuntimeClasses().Delete(ctx(t), rc.Name, metav1.DeleteOptions{}) })
	return rc.Name
}

// A workspace helper is held to its render in every field that matters for isolation: the
// rendered helper, and one with another --timeout and the matching deadline, are admitted; one
// field the Runtime never renders (a host namespace, nodeName, hostAliases, DNS settings, a
// RuntimeClass, a Pod or container securityContext other than the rendered one — fsGroup 65532 and
// Pod Security restricted's runAsNonRoot, RuntimeDefault seccomp profile, allowPrivilegeEscalation
// false and capabilities drop [ALL], each of them missing too — ports, hooks, probes, stdin or tty, another working directory, a
// resize policy, another termination message path, a volume device, a subPath or mount
// propagation, a finalizer, an owner reference, a token, an environment) or another deadline is
// refused by metallo-workspace-helpers with its rule's message.
func TestAHelperSetsNoFieldTheRuntimeDoesNotRender(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	via := s.viaRuntime(t, s.alice)
	acceptedDryRun(t, "alice's workspace helper as the Runtime renders it", createPod(via, s.namespace, alice.helper()))
	longer := alice.helper()
	cmd := longer.Spec.Containers[0].Command
	cmd[len(cmd)-1] = "1h30m0s"
	deadline := int64(90*60 + 60)
	longer.Spec.ActiveDeadlineSeconds = &deadline
	acceptedDryRun(t, "alice's helper with --timeout 1h30m0s and its deadline", createPod(via, s.namespace, longer))

	yes := true
	other, zero := int64(10*60), int64(0)
	type helperCase struct {
		change  func(p *corev1.Pod)
		message string
	}
	cases := map[string]helperCase{
		"no activeDeadlineSeconds":    {func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, msgHelperDeadline},
		"a deadline not timeout + 60": {func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &other }, msgHelperDeadline},
		"another fsGroup":             {func(p *corev1.Pod) { p.Spec.SecurityContext.FSGroup = &zero }, msgHelperPodSecurity},
		"no Pod securityContext":      {func(p *corev1.Pod) { p.Spec.SecurityContext = nil }, msgHelperPodSecurity},
		"the token":                   {func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = &yes }, msgHelperToken},
		"an environment": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GIT_CONFIG_COUNT", Value: "1"}}
		}, msgHelperToken},
		"an environment from a source": {func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: siteConfigMap}}}}
		}, msgHelperToken},
	}
	for what, change := range podSecurityFields() {
		cases["a Pod securityContext with "+what] = helperCase{change, msgHelperPodSecurity}
	}
	for what, c := range unrenderedFields(alice.claimName(), runtimeClass(t, s)) {
		cases[what] = helperCase{c.change, "a workspace helper" + c.suffix}
	}
	for what, c := range cases {
		p := alice.helper()
		c.change(p)
		refused(t, "alice's helper with "+what, "metallo-workspace-helpers", c.message, createPod(via, s.namespace, p))
	}
}

// A workspace reader is held to its render in the same fields: the rendered reader, with or
// without its node affinity, and one with the longest deadline --read-file-timeout allows (1h)
// are admitted; one field the Runtime never renders, a Pod securityContext other than the rendered
// restricted one (an fsGroup too, a missing runAsNonRoot or seccomp profile), no deadline or one beyond 1h is refused by metallo-workspace-readers with its rule's
// message.
func TestAReaderSetsNoFieldTheRuntimeDoesNotRender(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	alice := s.attempt(s.alice)
	via := s.viaRuntime(t, s.alice)
	acceptedDryRun(t, "alice's workspace reader as the Runtime renders it", createPod(via, s.namespace, alice.reader("out/metrics.txt", "")))
	acceptedDryRun(t, "alice's workspace reader on a node by affinity", createPod(via, s.namespace, alice.reader("out/metrics.txt", "kwok-node-0")))
	longest := alice.reader("out/metrics.txt", "")
	hour := int64(3600)
	longest.Spec.ActiveDeadlineSeconds = &hour
	acceptedDryRun(t, "alice's workspace reader with a deadline of 1h", createPod(via, s.namespace, longest))

	over, group := int64(3601), int64(kube.HelperGroupID)
	type readerCase struct {
		change func(p *corev1.Pod)
		also   []denial
	}
	cases := map[string]readerCase{}
	add := func(what string, change func(p *corev1.Pod), message string, also ...denial) {
		cases[what] = readerCase{change, append([]denial{{"metallo-workspace-readers", message}}, also...)}
	}
	add("no activeDeadlineSeconds", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, msgReaderDeadline)
	add("a deadline beyond 1h", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &over }, msgReaderDeadline)
	add("the helper's fsGroup", func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &group} }, msgReaderPodSecurity)
	for what, change := range podSecurityFields() {
		add("a Pod securityContext with "+what, change, msgReaderPodSecurity)
	}
	for what, c := range unrenderedFields(alice.claimName(), runtimeClass(t, s)) {
		var also []denial
		if c.extraVolume {
			also = append(also, denial{"metallo-workspace-readers", msgReaderMounts})
		}
		add(what, c.change, "a workspace reader"+c.suffix, also...)
	}
	for what, c := range cases {
		p := alice.reader("out/metrics.txt", "")
		c.change(p)
		refusedByOneOf(t, "alice's reader with "+what, createPod(via, s.namespace, p), c.also...)
	}
}
