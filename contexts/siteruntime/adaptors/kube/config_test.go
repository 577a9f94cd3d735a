package kube_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
)

// No cluster: the rules are the API server's, applied at start-up.
func TestGPUResourceMappingsAreCheckedAsExtendedResources(t *testing.T) {
	if err := kube.CheckExtendedResources(map[string]string{"gpu.amd": "amd.com/gpu", "gpu.intel": "gpu.intel.com/i915"}); err != nil {
		t.Fatalf("valid mappings: %v", err)
	}
	for name, m := range map[string]map[string]string{
		"key without gpu.":       {"amd": "amd.com/gpu"},
		"upper-case vendor":      {"gpu.AMD": "amd.com/gpu"},
		"no domain":              {"gpu.amd": "gpu"},
		"kubernetes.io domain":   {"gpu.amd": "kubernetes.io/gpu"},
		"requests. prefix":       {"gpu.amd": "requests.amd.com/gpu"},
		"empty value":            {"gpu.amd": ""},
		"not a qualified name":   {"gpu.amd": "amd.com/g pu"},
		"a kubernetes.io domain": {"gpu.amd": "node.kubernetes.io/gpu"},
	} {
		err := kube.CheckExtendedResources(m)
		if err == nil {
			t.Errorf("%s: %v accepted", name, m)
			continue
		}
		for k := range m {
			if !strings.Contains(err.Error(), k+"=") {
				t.Errorf("%s: the error does not name the entry: %v", name, err)
			}
		}
	}
}

func TestBatchPodAnnotationsFollowTheAPIServersRule(t *testing.T) {
	if err := kube.CheckPodAnnotations(map[string]string{"example.org/team": "ml", "sidecar.istio.io/inject": "false"}); err != nil {
		t.Fatalf("valid annotations: %v", err)
	}
	for name, m := range map[string]map[string]string{
		"space in key":    {"not a key": "x"},
		"empty key":       {"": "x"},
		"too large":       {"example.org/big": strings.Repeat("x", 256<<10+1)},
		"two slashes":     {"a/b/c": "x"},
		"prefix too long": {strings.Repeat("a", 254) + "/k": "x"},
	} {
		if err := kube.CheckPodAnnotations(m); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestPodTolerationsAreParsedAsKubectlWritesTaints(t *testing.T) {
	got, err := kube.ParseTolerations([]string{"pool.example.org/batch=true:NoSchedule", "dedicated:NoExecute", "gpu", "team=ml"})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Toleration{
		{Key: "pool.example.org/batch", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "gpu", Operator: corev1.TolerationOpExists},
		{Key: "team", Operator: corev1.TolerationOpEqual, Value: "ml"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"", ":NoSchedule", "=v", "k:Sometimes", "k:", "not a key=v", "k=not a value!"} {
		if _, err := kube.ParseTolerations([]string{"ok", bad}); err == nil || !strings.Contains(err.Error(), bad+":") {
			t.Errorf("%q: want an error naming the entry, got %v", bad, err)
		}
	}
}

func TestPodNodeSelectorFollowsTheAPIServersLabelRule(t *testing.T) {
	if err := kube.CheckNodeSelector(map[string]string{"kubernetes.io/arch": "amd64", "pool": ""}); err != nil {
		t.Fatalf("valid selector: %v", err)
	}
	for name, m := range map[string]map[string]string{
		"space in key":   {"not a key": "x"},
		"value too long": {"pool": strings.Repeat("x", 64)},
		"bad value":      {"pool": "a b"},
	} {
		if err := kube.CheckNodeSelector(m); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
