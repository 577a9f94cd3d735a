package cluster

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The real node's ClusterServingRuntime runs the httpservice image by digest as KServe's
// kserve-container with the huggingface runtime's argument prefix, is never auto-selected and
// probes the model's own v1 path; without the image nothing is installed.
func TestTheRealNodesServingRuntime(t *testing.T) {
	image := "localcluster.metallo.dev/httpservice@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	rt := httpServiceRuntimeObject(image)
	if rt.GetKind() != "ClusterServingRuntime" || rt.GetName() != httpServiceRuntime {
		t.Fatalf("%s %s", rt.GetKind(), rt.GetName())
	}
	formats, _, _ := unstructured.NestedSlice(rt.Object, "spec", "supportedModelFormats")
	if len(formats) != 1 || formats[0].(map[string]any)["name"] != "huggingface" || formats[0].(map[string]any)["autoSelect"] != false {
		t.Errorf("supportedModelFormats %v: want huggingface, not auto-selected", formats)
	}
	containers, _, _ := unstructured.NestedSlice(rt.Object, "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("containers %v", containers)
	}
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	probe, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path")
	if c["name"] != "kserve-container" || c["image"] != image || !reflect.DeepEqual(args, []string{"--model_name={{.Name}}", "--backend=huggingface"}) || probe != "/v1/models/{{.Name}}" {
		t.Errorf("container %v", c)
	}
	// The prefix is the one huggingFaceArgs gives KServe's own huggingface runtime.
	hf := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": huggingFaceRuntime},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "kserve-container", "args": []any{"--model_name={{.Name}}"}}}}}}
	if err := huggingFaceArgs(hf, "v0.16.0"); err != nil {
		t.Fatal(err)
	}
	hfc, _, _ := unstructured.NestedSlice(hf.Object, "spec", "containers")
	hfArgs, _, _ := unstructured.NestedStringSlice(hfc[0].(map[string]any), "args")
	if !reflect.DeepEqual(args, hfArgs) {
		t.Errorf("args %q; the huggingface runtime's are %q", args, hfArgs)
	}
	if err := applyHTTPServiceRuntime(context.Background(), nil, map[string]string{"pause": "p@sha256:0"}); err != nil {
		t.Errorf("without the httpservice image: %v", err)
	}
}

// The real node's sklearn ClusterServingRuntime runs the sklearnserver image by digest as
// KServe's kserve-container with the argument --model_name={{.Name}} alone (the sklearn format's
// argv under the private inference argument rule), is never auto-selected and probes the
// model's own v1 path.
func TestTheRealNodesSKLearnServingRuntime(t *testing.T) {
	image := "localcluster.metallo.dev/sklearnserver@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	rt := sklearnServerRuntimeObject(image)
	if rt.GetKind() != "ClusterServingRuntime" || rt.GetName() != sklearnServerRuntime {
		t.Fatalf("%s %s", rt.GetKind(), rt.GetName())
	}
	formats, _, _ := unstructured.NestedSlice(rt.Object, "spec", "supportedModelFormats")
	if len(formats) != 1 || formats[0].(map[string]any)["name"] != "sklearn" || formats[0].(map[string]any)["autoSelect"] != false {
		t.Errorf("supportedModelFormats %v: want sklearn, not auto-selected", formats)
	}
	containers, _, _ := unstructured.NestedSlice(rt.Object, "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("containers %v", containers)
	}
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	probe, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path")
	if c["name"] != "kserve-container" || c["image"] != image || !reflect.DeepEqual(args, []string{"--model_name={{.Name}}"}) || probe != "/v1/models/{{.Name}}" {
		t.Errorf("container %v", c)
	}
}
