package kube_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubebatch "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func jobSpec() application.BatchJobSpec {
	return application.BatchJobSpec{
		Identity:  application.ObjectIdentity{RunID: "r", AttemptID: "7d1f0000-0000-4000-8000-000000000001", MemberID: "m", ProjectID: "p", CommandID: "c"},
		Namespace: "project-a", ServiceAccount: "member-m", Image: testImage, WorkspaceClaim: "attempt-7d1f0000-0000-4000-8000-000000000001-ws",
		Demand:           map[string]int64{"cpu": 1500, "memory": 4 << 30, "gpu.nvidia": 2},
		TimeLimitSeconds: 3600, Argv: []string{"python", "train.py"}, Env: map[string]string{"B": "2", "A": "1", "C": "3"},
	}
}

// No cluster: KWOK and the API server are not involved.
func TestRenderedJobIsDeterministicAndCarriesTheNativeRules(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	a, err := kubebatch.NewRenderer(r).RenderJob(jobSpec())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if b, _ := kubebatch.NewRenderer(r).RenderJob(jobSpec()); string(b.Spec) != string(a.Spec) {
			t.Fatal("two renderings of the same input differ")
		}
	}
	var job batchv1.Job
	if err := json.Unmarshal(a.Spec, &job); err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	switch {
	case a.Name != "attempt-7d1f0000-0000-4000-8000-000000000001" || job.Labels[kube.LabelCommand] != "c" || pod.ServiceAccountName != "member-m":
		t.Fatalf("identity %s %v %s", a.Name, job.Labels, pod.ServiceAccountName)
	case *job.Spec.BackoffLimit != 0 || job.Spec.ActiveDeadlineSeconds != nil || *pod.ActiveDeadlineSeconds != 3600 || pod.RestartPolicy != "Never":
		t.Fatal("backoffLimit 0, the time limit on the Pod only, restartPolicy Never")
	case c.Env[0].Name != "A" || c.Env[2].Name != "C":
		t.Fatalf("env not sorted: %v", c.Env)
	case c.Resources.Limits.Cpu().MilliValue() != 1500 || c.Resources.Requests.Memory().Value() != 4<<30:
		t.Fatalf("resources %v", c.Resources)
	}
	if gpu := c.Resources.Limits["nvidia.com/gpu"]; gpu.Value() != 2 || !gpu.Equal(c.Resources.Requests["nvidia.com/gpu"]) {
		t.Fatalf("gpu.nvidia must map to nvidia.com/gpu by default: %v", c.Resources)
	}
	s := jobSpec()
	s.Demand["gpu.amd"] = 1
	if _, err := kubebatch.NewRenderer(r).RenderJob(s); !errors.Is(err, application.ErrUnsupportedDemand) {
		t.Fatalf("gpu.amd without configuration: %v", err)
	}
	if _, err := kubebatch.NewRenderer(kube.NewRenderer(map[string]string{"gpu.amd": "amd.com/gpu"}, nil)).RenderJob(s); err != nil {
		t.Fatalf("gpu.amd configured: %v", err)
	}
}

// live returns the rendered object as the API server would return it: the
// spec digest annotation, server defaults, quantities spelled its way.
func live(t *testing.T, obj application.NativeObject, edit func(m map[string]any)) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(obj.Spec, &m); err != nil {
		t.Fatal(err)
	}
	meta := m["metadata"].(map[string]any)
	meta["uid"], meta["resourceVersion"] = "u-1", "7"
	meta["annotations"] = map[string]any{kube.AnnotationSpecDigest: siteprotocol.Digest(obj.Spec), "other": "x"}
	spec := m["spec"].(map[string]any)
	spec["completions"], spec["selector"] = 1, map[string]any{"matchLabels": map[string]any{"batch.kubernetes.io/controller-uid": "u-1"}}
	tmpl := spec["template"].(map[string]any)
	tmpl["metadata"].(map[string]any)["labels"].(map[string]any)["job-name"] = obj.Name
	pod := tmpl["spec"].(map[string]any)
	pod["dnsPolicy"], pod["terminationGracePeriodSeconds"] = "ClusterFirst", 30
	c := pod["containers"].([]any)[0].(map[string]any)
	c["imagePullPolicy"] = "IfNotPresent"
	c["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = "1500m"
	m["status"] = map[string]any{"active": 1}
	if edit != nil {
		edit(m)
	}
	return m
}

func container0(m map[string]any) map[string]any {
	return m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
}

// No cluster: KWOK and the API server are not involved.
func TestMismatchIgnoresServerDefaultsAndNamesEachChangedRenderedField(t *testing.T) {
	obj, err := kubebatch.NewRenderer(kube.NewRenderer(nil, nil)).RenderJob(jobSpec())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := kube.Mismatch(obj.Spec, live(t, obj, nil)); err != nil || m != "" {
		t.Fatalf("the object as the server returns it: %q %v", m, err)
	}
	for field, edit := range map[string]func(map[string]any){
		"spec-digest": func(m map[string]any) {
			delete(m["metadata"].(map[string]any)["annotations"].(map[string]any), kube.AnnotationSpecDigest)
		},
		"image": func(m map[string]any) { container0(m)["image"] = "other" },
		"args":  func(m map[string]any) { container0(m)["args"] = []any{"python"} },
		"env": func(m map[string]any) {
			container0(m)["env"] = append(container0(m)["env"].([]any), map[string]any{"name": "D", "value": "4"})
		},
		"limits.cpu": func(m map[string]any) {
			container0(m)["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = "2"
		},
		"backoffLimit": func(m map[string]any) { m["spec"].(map[string]any)["backoffLimit"] = 6 },
		"labels": func(m map[string]any) {
			delete(m["metadata"].(map[string]any)["labels"].(map[string]any), kube.LabelMember)
		},
		"volumeMounts": func(m map[string]any) { delete(container0(m), "volumeMounts") },
		"activeDeadline": func(m map[string]any) {
			delete(m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any), "activeDeadlineSeconds")
		},
	} {
		m, err := kube.Mismatch(obj.Spec, live(t, obj, edit))
		if err != nil || m == "" {
			t.Errorf("%s changed: no mismatch (%v)", field, err)
		} else if !strings.Contains(strings.ToLower(m), strings.ToLower(strings.Split(field, ".")[0])) {
			t.Errorf("%s changed: mismatch %q does not name it", field, m)
		}
	}
}

// scheduled is a Renderer with a Site's scheduling: a dedicated node pool.
func scheduled() *kube.Renderer {
	r := kube.NewRenderer(nil, nil)
	r.Scheduling = kube.Scheduling{
		NodeSelector: map[string]string{"pool.example.org/batch": "true"},
		Tolerations: []corev1.Toleration{
			{Key: "pool.example.org/batch", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "gpu.example.org/dedicated", Operator: corev1.TolerationOpExists},
		},
	}
	return r
}

// The Site's node selector and tolerations are on the Job's Pod template,
// in the configured order, and part of the specification: a Job rendered
// without them has another digest. No cluster involved.
func TestTheSitesSchedulingIsRenderedOnThePodAndPartOfTheSpecification(t *testing.T) {
	obj, err := kubebatch.NewRenderer(scheduled()).RenderJob(jobSpec())
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := json.Unmarshal(obj.Spec, &job); err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	if pod.NodeSelector["pool.example.org/batch"] != "true" || len(pod.NodeSelector) != 1 {
		t.Fatalf("nodeSelector %v", pod.NodeSelector)
	}
	if len(pod.Tolerations) != 2 || pod.Tolerations[0].Key != "pool.example.org/batch" || pod.Tolerations[0].Effect != corev1.TaintEffectNoSchedule ||
		pod.Tolerations[1].Operator != corev1.TolerationOpExists || pod.Tolerations[1].Effect != "" {
		t.Fatalf("tolerations %+v", pod.Tolerations)
	}
	plain, err := kubebatch.NewRenderer(kube.NewRenderer(nil, nil)).RenderJob(jobSpec())
	if err != nil {
		t.Fatal(err)
	}
	if siteprotocol.Digest(plain.Spec) == siteprotocol.Digest(obj.Spec) {
		t.Fatal("scheduling does not change the specification's digest")
	}
	if strings.Contains(string(plain.Spec), "nodeSelector") || strings.Contains(string(plain.Spec), "tolerations") {
		t.Fatalf("a Site without scheduling renders some: %s", plain.Spec)
	}
}

// Recovery compares the scheduling like every rendered field: a live Job
// whose Pod template lost the node selector, carries another value, or
// has a toleration more or less, is a mismatch naming the field; the
// server's own additions elsewhere are not. No cluster involved.
func TestMismatchNamesAChangedNodeSelectorOrTolerations(t *testing.T) {
	obj, err := kubebatch.NewRenderer(scheduled()).RenderJob(jobSpec())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := kube.Mismatch(obj.Spec, live(t, obj, nil)); err != nil || m != "" {
		t.Fatalf("the object as the server returns it: %q %v", m, err)
	}
	podSpec := func(m map[string]any) map[string]any {
		return m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	}
	for field, edit := range map[string]func(map[string]any){
		"nodeSelector": func(m map[string]any) { delete(podSpec(m), "nodeSelector") },
		"nodeSelector.pool.example.org/batch": func(m map[string]any) {
			podSpec(m)["nodeSelector"] = map[string]any{"pool.example.org/batch": "false"}
		},
		"tolerations": func(m map[string]any) {
			podSpec(m)["tolerations"] = podSpec(m)["tolerations"].([]any)[:1]
		},
		"tolerations[0].value": func(m map[string]any) {
			podSpec(m)["tolerations"].([]any)[0].(map[string]any)["value"] = "no"
		},
		"tolerations added": func(m map[string]any) {
			podSpec(m)["tolerations"] = append(podSpec(m)["tolerations"].([]any), map[string]any{"key": "x", "operator": "Exists"})
		},
	} {
		m, err := kube.Mismatch(obj.Spec, live(t, obj, edit))
		if err != nil || m == "" {
			t.Errorf("%s changed: no mismatch (%v)", field, err)
		} else if name := strings.Fields(field)[0]; !strings.Contains(m, name) {
			t.Errorf("%s changed: mismatch %q does not name %s", field, m, name)
		}
	}
}
