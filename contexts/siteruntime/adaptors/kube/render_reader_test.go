package kube_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

func readerSpec(node string) application.ReaderSpec {
	return application.ReaderSpec{
		Identity:  application.ObjectIdentity{RunID: "r", AttemptID: "a1", MemberID: "m", ProjectID: "p", CommandID: "c"},
		Namespace: "ns", ServiceAccount: "member-m", Image: "registry.example/platform@sha256:" + strings.Repeat("1", 64),
		WorkspaceClaim: "attempt-a1-ws", Path: "my results/run 1.csv", MaxBytes: 4096, Timeout: time.Minute, Node: node,
	}
}

// The reader runs exactly workspace-read with the path as one argument,
// mounts only its claim read-only, holds no token, and is required onto
// the workload Pod's node when one is known; the Site's scheduling is
// rendered like every Pod's.
func TestTheReaderRunsExactlyWorkspaceReadWithTheClaimReadOnly(t *testing.T) {
	r := kube.NewRenderer(nil, map[string]string{"a": "b"})
	r.Scheduling = kube.Scheduling{NodeSelector: map[string]string{"pool": "metallo"}, Tolerations: []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpExists}}}
	obj, err := r.RenderReader(readerSpec("node-7"))
	if err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := json.Unmarshal(obj.Spec, &p); err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers
	if obj.Name != "attempt-a1"+domain.SuffixReader || len(c) != 1 || c[0].Name != kube.ReaderContainer ||
		!slices.Equal(c[0].Command, []string{kube.HelperProgram, "workspace-read", "--root", "/workspace", "--max-bytes", "4096", "--path", "my results/run 1.csv"}) ||
		len(c[0].Args) != 0 || len(c[0].Env) != 0 {
		t.Fatalf("container %+v", c)
	}
	if len(p.Spec.Volumes) != 1 || !p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "attempt-a1-ws" ||
		len(c[0].VolumeMounts) != 1 || !c[0].VolumeMounts[0].ReadOnly || p.Spec.SecurityContext == nil || p.Spec.SecurityContext.FSGroup != nil {
		t.Fatalf("volumes %+v mounts %+v security %+v", p.Spec.Volumes, c[0].VolumeMounts, p.Spec.SecurityContext)
	}
	if *p.Spec.AutomountServiceAccountToken || p.Spec.RestartPolicy != corev1.RestartPolicyNever || *p.Spec.ActiveDeadlineSeconds != 60 ||
		p.Labels[kube.LabelRole] != kube.RoleWorkspaceReader || p.Annotations["a"] != "b" || p.Spec.NodeSelector["pool"] != "metallo" || len(p.Spec.Tolerations) != 1 {
		t.Fatalf("pod %+v", p)
	}
	if f := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]; f.Key != "metadata.name" || f.Values[0] != "node-7" {
		t.Fatalf("affinity %+v", f)
	}
	obj, _ = r.RenderReader(readerSpec(""))
	var anywhere corev1.Pod
	_ = json.Unmarshal(obj.Spec, &anywhere)
	if anywhere.Spec.Affinity != nil {
		t.Fatal("an affinity without a node")
	}
	for _, s := range []application.ReaderSpec{{Path: "/etc/passwd", MaxBytes: 1}, {Path: "../x", MaxBytes: 1}, {Path: "x", MaxBytes: 0}, {Path: "x", MaxBytes: 1<<20 + 1}} {
		if _, err := r.RenderReader(s); err == nil {
			t.Fatalf("rendered a reader of %+v", s)
		}
	}
}

// The tolerations the API server's DefaultTolerationSeconds plugin
// appends to a Pod that carries the Site's tolerations are no mismatch;
// any other added toleration, or a changed one, still is.
func TestALivePodsDefaultTolerationsAreNoMismatch(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	r.Scheduling = kube.Scheduling{Tolerations: []corev1.Toleration{{Key: "real-node", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	obj, _ := r.RenderReader(readerSpec("node-7"))
	defaults := []any{
		map[string]any{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
		map[string]any{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
	}
	live := liveHelper(t, obj.Spec)
	spec := live["spec"].(map[string]any)
	spec["tolerations"] = append(spec["tolerations"].([]any), defaults...)
	if m, err := kube.Mismatch(obj.Spec, live); err != nil || m != "" {
		t.Fatalf("the API server's default tolerations: %q %v", m, err)
	}
	spec["tolerations"] = append(spec["tolerations"].([]any), map[string]any{"key": "other", "operator": "Exists"})
	if m, _ := kube.Mismatch(obj.Spec, live); !strings.Contains(m, "tolerations") {
		t.Fatalf("an added toleration: %q", m)
	}
	live = liveHelper(t, obj.Spec)
	live["spec"].(map[string]any)["tolerations"] = defaults
	if m, _ := kube.Mismatch(obj.Spec, live); !strings.Contains(m, "tolerations") {
		t.Fatalf("the Site's toleration replaced by the defaults: %q", m)
	}
}
