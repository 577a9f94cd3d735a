package kube_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

var inferenceServices = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}

// inferenceCase reads testdata/inference-huggingface.yaml, the shape an
// inference Attempt must render (testdata/README.md), into namespace.
func inferenceCase(t *testing.T, namespace string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile("testdata/inference-huggingface.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		t.Fatalf("testdata/inference-huggingface.yaml: %v", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(namespace)
	return u
}

// TestTheInferenceRenderingCaseIsAValidInferenceService checks the realistic
// inference case of testdata against the real API server and KServe
// v0.16.0's InferenceService CRD, which the local cluster installs: a
// server-side dry run with strict field validation accepts it as it is, and
// refuses it with one member misspelt (so the schema is really checked). It
// carries the Runtime's identity labels, the spec-digest annotation and the
// Standard deployment mode. Real: the API server, the CRD's structural
// schema. Nothing runs: a dry run stores nothing, and KServe's controller is
// not part of the local cluster.
func TestTheInferenceRenderingCaseIsAValidInferenceService(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	u := inferenceCase(t, e.Namespace)
	for _, l := range []string{kube.LabelRun, kube.LabelAttempt, kube.LabelMember, kube.LabelProject, kube.LabelCommand} {
		if u.GetLabels()[l] == "" {
			t.Errorf("the case carries no identity label %s", l)
		}
	}
	if u.GetAnnotations()[kube.AnnotationSpecDigest] == "" || u.GetAnnotations()["serving.kserve.io/deploymentMode"] != "Standard" {
		t.Errorf("annotations %v: want the spec digest and deploymentMode Standard", u.GetAnnotations())
	}
	if !strings.HasPrefix(u.GetName(), "attempt-") {
		t.Errorf("name %s: an Attempt's objects are named attempt-<attempt>", u.GetName())
	}
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}
	if _, err := e.Dynamic.Resource(inferenceServices).Namespace(e.Namespace).Create(ctx, u, opts); err != nil {
		t.Fatalf("the API server refuses the inference case: %v", err)
	}

	bad := inferenceCase(t, e.Namespace)
	model, _, _ := unstructured.NestedMap(bad.Object, "spec", "predictor", "model")
	model["argz"] = model["args"]
	delete(model, "args")
	if err := unstructured.SetNestedMap(bad.Object, model, "spec", "predictor", "model"); err != nil {
		t.Fatal(err)
	}
	_, err := e.Dynamic.Resource(inferenceServices).Namespace(e.Namespace).Create(ctx, bad, opts)
	if err == nil || (!apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err)) || !strings.Contains(err.Error(), "argz") {
		t.Fatalf("a misspelt member (spec.predictor.model.argz) was not refused by the CRD's schema: %v", err)
	}
}
