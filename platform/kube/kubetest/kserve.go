package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// KServe in the local cluster (deploy/localcluster/README.md, "KServe").
const (
	// KServeController is the user KServe's controller acts as: its own service account, so the
	// audit log tells what it created from what a member created.
	KServeController = "system:serviceaccount:kserve:kserve-controller-manager"
	// KServeFinalizer is the finalizer KServe's controller puts on every InferenceService and
	// removes once it is deleted.
	KServeFinalizer = "inferenceservice.finalizers"
	// KServeDeploymentMode is the annotation naming an InferenceService's deployment mode; KServe
	// records the mode it resolved in status.deploymentMode.
	KServeDeploymentMode = "serving.kserve.io/deploymentMode"
	// HuggingFaceRuntime is the ClusterServingRuntime of the huggingface model format; its
	// kserve-container's arguments are --model_name={{.Name}} --backend=huggingface.
	HuggingFaceRuntime = "kserve-huggingfaceserver"
)

// InferenceServiceResource is KServe's InferenceService resource (serving.kserve.io/v1beta1).
var InferenceServiceResource = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}

// kserveFinalizeGrace is how long the clean-up leaves KServe's controller to remove its
// finalizer from a deleted InferenceService before the harness removes it and fails the test.
const kserveFinalizeGrace = 30 * time.Second

// removeInferenceServices deletes the namespace's InferenceServices and waits until they are
// gone, before the namespace itself is deleted: KServe's controller removes its finalizer while
// it runs. One that cannot lose it, because KServe v0.16's webhook refuses every update of an
// InferenceService whose deploymentMode annotation differs from the mode in its status (a legacy
// RawDeployment object; KServe #5885), the controller's own finalizer removal included, is
// finalized by the harness as the cluster administrator, never by the Runtime: one JSON patch
// that sets the annotation to the recorded mode (or the webhook would refuse it too) and removes
// KServe's finalizer. Any other InferenceService still there after kserveFinalizeGrace is
// finalized the same way and fails the test: KServe's controller did not do its work.
func (e *Env) removeInferenceServices(ctx context.Context, ns string) {
	tb := e.T
	ri := e.Dynamic.Resource(InferenceServiceResource).Namespace(ns)
	list, err := ri.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return // no KServe CRD
	}
	if err != nil {
		tb.Errorf("kubetest: list InferenceServices of %s: %v", ns, err)
		return
	}
	if len(list.Items) == 0 {
		return
	}
	bg := metav1.DeletePropagationBackground
	for _, isvc := range list.Items {
		if isvc.GetDeletionTimestamp() != nil {
			continue
		}
		if err := ri.Delete(ctx, isvc.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("kubetest: delete InferenceService %s/%s: %v", ns, isvc.GetName(), err)
		}
	}
	deadline := time.Now().Add(kserveFinalizeGrace)
	for {
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			tb.Errorf("kubetest: list InferenceServices of %s: %v", ns, err)
			return
		}
		if len(list.Items) == 0 {
			return
		}
		late := time.Now().After(deadline)
		for i := range list.Items {
			isvc := &list.Items[i]
			legacy := LegacyDeploymentMode(isvc)
			if !legacy && !late {
				continue
			}
			if err := finalizeInferenceService(ctx, e, isvc); err != nil {
				tb.Errorf("kubetest: finalize InferenceService %s/%s: %v", ns, isvc.GetName(), err)
				return
			}
			if legacy {
				tb.Logf("kubetest: finalized InferenceService %s/%s as the cluster administrator: its %s annotation %q differs from its recorded mode %q, so KServe's webhook refuses its controller's finalizer removal (KServe #5885)",
					ns, isvc.GetName(), KServeDeploymentMode, isvc.GetAnnotations()[KServeDeploymentMode], recordedMode(isvc))
			} else {
				tb.Errorf("kubetest: InferenceService %s/%s kept KServe's finalizer %s after it was deleted (is KServe's controller running? see %s/logs/kserve-controller.log); finalized it as the cluster administrator",
					ns, isvc.GetName(), kserveFinalizeGrace, e.Dir)
			}
		}
		select {
		case <-ctx.Done():
			tb.Errorf("kubetest: InferenceServices of %s not gone: %v", ns, ctx.Err())
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// LegacyDeploymentMode tells whether KServe v0.16's webhook refuses every update of the
// InferenceService: its deploymentMode annotation differs from the mode recorded in its status
// ("update rejected: deploymentMode cannot be changed from ..."), as for an object created with
// the legacy RawDeployment annotation, which KServe records as Standard.
func LegacyDeploymentMode(isvc *unstructured.Unstructured) bool {
	annotation, ok := isvc.GetAnnotations()[KServeDeploymentMode]
	mode := recordedMode(isvc)
	return ok && mode != "" && annotation != mode
}

func recordedMode(isvc *unstructured.Unstructured) string {
	mode, _, _ := unstructured.NestedString(isvc.Object, "status", "deploymentMode")
	return mode
}

// finalizeInferenceService removes KServe's finalizer from a deleted InferenceService as the
// administrator, guarded by its UID and resource version. For a legacy object the same patch
// sets its deploymentMode annotation to the recorded mode, which KServe's webhook requires.
func finalizeInferenceService(ctx context.Context, e *Env, isvc *unstructured.Unstructured) error {
	if isvc.GetDeletionTimestamp() == nil {
		return fmt.Errorf("not deleted")
	}
	index := -1
	for i, f := range isvc.GetFinalizers() {
		if f == KServeFinalizer {
			index = i
		}
	}
	if index < 0 {
		return nil // another finalizer holds it; not KServe's to judge
	}
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(isvc.GetUID())},
		{"op": "test", "path": "/metadata/resourceVersion", "value": isvc.GetResourceVersion()},
		{"op": "test", "path": fmt.Sprintf("/metadata/finalizers/%d", index), "value": KServeFinalizer},
		{"op": "remove", "path": fmt.Sprintf("/metadata/finalizers/%d", index)},
	}
	if LegacyDeploymentMode(isvc) {
		ops = append(ops, map[string]any{
			"op": "replace", "path": "/metadata/annotations/" + strings.ReplaceAll(KServeDeploymentMode, "/", "~1"), "value": recordedMode(isvc),
		})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = e.Dynamic.Resource(InferenceServiceResource).Namespace(isvc.GetNamespace()).
		Patch(ctx, isvc.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		// Gone, or changed since it was listed (the JSON patch's tests): the next round sees it anew.
		return nil
	}
	return err
}
