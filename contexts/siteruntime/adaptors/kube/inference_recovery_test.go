package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// crashedInferenceStart leaves the state a Runtime killed inside an
// inference start's create leaves: the Attempt prepared, its
// InferenceService record in phase creating for the start command with the
// saved specification (edited by saved first, when not nil: a record as
// history wrote it), and — made by the administrator — an InferenceService
// under the deterministic name: the saved specification with its spec
// digest, changed by mutate (nil: as saved). It returns the start command,
// the record and the object created.
func crashedInferenceStart(t *testing.T, s *site, saved, mutate func(*kservev1beta1.InferenceService)) (*domain.Pending, domain.NativeRecord, *unstructured.Unstructured) {
	t.Helper()
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	p := s.command(siteprotocol.OpStart, attempt, nil)
	recs, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	rec := *domain.FindRecord(recs, domain.KindInferenceService)
	if saved != nil {
		var isvc kservev1beta1.InferenceService
		if err := json.Unmarshal(rec.Spec, &isvc); err != nil {
			t.Fatal(err)
		}
		saved(&isvc)
		if rec.Spec, err = json.Marshal(isvc); err != nil {
			t.Fatal(err)
		}
	}
	rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = domain.PhaseCreating, p.Command.ID, p.Sequence, ""
	if err := s.journal.Services().SaveRecord(testContext(t), rec); err != nil {
		t.Fatal(err)
	}
	var isvc kservev1beta1.InferenceService
	if err := json.Unmarshal(rec.Spec, &isvc); err != nil {
		t.Fatal(err)
	}
	isvc.Annotations[kube.AnnotationSpecDigest] = siteprotocol.Digest(rec.Spec)
	if mutate != nil {
		mutate(&isvc)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&isvc)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	created, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Create(testContext(t), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, rec, created
}

// Recovery of an uncertain inference start refuses to adopt, one case per
// rendered field, an InferenceService under its name that differs from the
// saved specification: the worker is told the native state is unexplained
// (naming the field), the InferenceService is not deleted and the record
// is unchanged. Real: the API server, KServe's webhooks (the objects are
// valid InferenceServices). No admission policy (noPolicy): recovery must
// not depend on them. The predictor's init container workspace-verify of a
// prepare with a repository is one of those fields.
func TestRecoveryRefusesToAdoptAnInferenceServiceThatDiffersInAnyRenderedField(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	model := func(i *kservev1beta1.InferenceService) *kservev1beta1.ModelSpec { return i.Spec.Predictor.Model }
	cases := map[string]func(*kservev1beta1.InferenceService){
		"metadata.annotations[" + kube.AnnotationSpecDigest + "]": func(i *kservev1beta1.InferenceService) {
			i.Annotations[kube.AnnotationSpecDigest] = strings.Repeat("0", 64)
		},
		"metadata.annotations." + kubeinference.AnnotationDeploymentMode: func(i *kservev1beta1.InferenceService) {
			i.Annotations[kubeinference.AnnotationDeploymentMode] = application.DeploymentModeRawDeployment
		},
		"metadata.labels." + kubeinference.LabelVisibility: func(i *kservev1beta1.InferenceService) { delete(i.Labels, kubeinference.LabelVisibility) },
		"spec.predictor.serviceAccountName":                func(i *kservev1beta1.InferenceService) { i.Spec.Predictor.ServiceAccountName = "default" },
		"spec.predictor.automountServiceAccountToken": func(i *kservev1beta1.InferenceService) {
			yes := true
			i.Spec.Predictor.AutomountServiceAccountToken = &yes
		},
		"spec.predictor.model.modelFormat.name": func(i *kservev1beta1.InferenceService) { model(i).ModelFormat.Name = "sklearn" },
		"spec.predictor.model.runtime": func(i *kservev1beta1.InferenceService) {
			r := "kserve-sklearnserver"
			model(i).Runtime = &r
		},
		"spec.predictor.model.args": func(i *kservev1beta1.InferenceService) {
			model(i).Args = append(model(i).Args, "--trust_remote_code")
		},
		"spec.predictor.model.args[0]": func(i *kservev1beta1.InferenceService) {
			model(i).Args[0] = "--model_id=hf-internal-testing/another"
		},
		"spec.predictor.model.resources.limits.cpu": func(i *kservev1beta1.InferenceService) {
			model(i).Resources.Limits["cpu"] = resource.MustParse("2")
		},
		"spec.predictor.model.resources.requests.memory": func(i *kservev1beta1.InferenceService) {
			model(i).Resources.Requests["memory"] = resource.MustParse("1Gi")
		},
		"spec.predictor.model.volumeMounts[0].mountPath": func(i *kservev1beta1.InferenceService) {
			model(i).VolumeMounts[0].MountPath = "/data"
		},
		"spec.predictor.volumes[0].persistentVolumeClaim.claimName": func(i *kservev1beta1.InferenceService) {
			i.Spec.Predictor.Volumes[0].PersistentVolumeClaim.ClaimName = "attempt-" + uuid.NewString() + "-ws"
		},
	}
	for _, label := range []string{kube.LabelRun, kube.LabelAttempt, kube.LabelMember, kube.LabelProject, kube.LabelCommand} {
		cases["metadata.labels."+label] = func(i *kservev1beta1.InferenceService) { i.Labels[label] = uuid.NewString() }
	}
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			p, rec, created := crashedInferenceStart(t, s, nil, mutate)
			_, err := s.registry.Recover(testContext(t), p)
			if !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), field) {
				t.Fatalf("recovery: want unexplained native state naming %s, got %v", field, err)
			}
			u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(testContext(t), created.GetName(), metav1.GetOptions{})
			if err != nil || u.GetUID() != created.GetUID() || u.GetDeletionTimestamp() != nil {
				t.Fatalf("the unexplained InferenceService must stay untouched: %v", err)
			}
			recs, err := s.journal.Services().Records(testContext(t), p.Command.AttemptID)
			if err != nil {
				t.Fatal(err)
			}
			if r := domain.FindRecord(recs, domain.KindInferenceService); r == nil || r.UID != "" || r.Phase != domain.PhaseCreating || string(r.Spec) != string(rec.Spec) {
				t.Fatalf("the record changed: %+v", r)
			}
		})
	}
	// The predictor's workspace-verify of a prepare with a repository
	// (docs/site-runtime.md#services-and-the-prepared-workspace): the saved
	// record carries it (as withVerification saves it), the live object
	// differs in it.
	verifying := func(i *kservev1beta1.InferenceService) {
		i.Spec.Predictor.InitContainers = []corev1.Container{kube.VerifyContainer(isvcVerification())}
	}
	initContainer := func(i *kservev1beta1.InferenceService) *corev1.Container { return &i.Spec.Predictor.InitContainers[0] }
	verifyCases := map[string]func(*kservev1beta1.InferenceService){
		"spec.predictor.initContainers": func(i *kservev1beta1.InferenceService) {
			i.Spec.Predictor.InitContainers = append(i.Spec.Predictor.InitContainers, corev1.Container{Name: "more", Image: testImage})
		},
		"spec.predictor.initContainers[0].image": func(i *kservev1beta1.InferenceService) {
			initContainer(i).Image = "registry.example/other@sha256:" + strings.Repeat("2", 64)
		},
		"spec.predictor.initContainers[0].command[5]": func(i *kservev1beta1.InferenceService) {
			initContainer(i).Command[5] = strings.Repeat("f", 40)
		},
		"spec.predictor.initContainers[0].volumeMounts[0].readOnly": func(i *kservev1beta1.InferenceService) {
			initContainer(i).VolumeMounts[0].ReadOnly = false
		},
	}
	for field, mutate := range verifyCases {
		t.Run(field, func(t *testing.T) {
			p, rec, created := crashedInferenceStart(t, s, verifying, mutate)
			_, err := s.registry.Recover(testContext(t), p)
			if !errors.Is(err, application.ErrUnexplained) || !strings.Contains(err.Error(), field) {
				t.Fatalf("recovery: want unexplained native state naming %s, got %v", field, err)
			}
			u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(testContext(t), created.GetName(), metav1.GetOptions{})
			if err != nil || u.GetUID() != created.GetUID() || u.GetDeletionTimestamp() != nil {
				t.Fatalf("the unexplained InferenceService must stay untouched: %v", err)
			}
			recs, err := s.journal.Services().Records(testContext(t), p.Command.AttemptID)
			if err != nil {
				t.Fatal(err)
			}
			if r := domain.FindRecord(recs, domain.KindInferenceService); r == nil || r.UID != "" || r.Phase != domain.PhaseCreating || string(r.Spec) != string(rec.Spec) {
				t.Fatalf("the record changed: %+v", r)
			}
		})
	}
}

// adoptedLegacyInferenceService leaves a saved legacy record (deployment
// mode RawDeployment, written as history wrote it) whose InferenceService
// the administrator created with that annotation, adopted by recovery:
// same UID, the record keeps RawDeployment. It returns once KServe's
// controller has recorded the mode it resolved and its finalizer on the
// object, with the start command and the object created.
func adoptedLegacyInferenceService(t *testing.T, s *site) (*domain.Pending, *unstructured.Unstructured) {
	t.Helper()
	legacy := func(i *kservev1beta1.InferenceService) {
		i.Annotations[kubeinference.AnnotationDeploymentMode] = application.DeploymentModeRawDeployment
	}
	p, _, created := crashedInferenceStart(t, s, legacy, nil)
	a, err := s.registry.Recover(testContext(t), p)
	if err != nil {
		t.Fatal(err)
	}
	r := s.result(p, a)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(created.GetUID()) {
		t.Fatalf("refs %+v, the legacy object %s", r.NativeRefs, created.GetUID())
	}
	recs, err := s.journal.Services().Records(testContext(t), p.Command.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	rec := domain.FindRecord(recs, domain.KindInferenceService)
	if rec.UID != string(created.GetUID()) || !strings.Contains(string(rec.Spec), `"serving.kserve.io/deploymentMode":"RawDeployment"`) {
		t.Fatalf("the record %+v does not keep RawDeployment", rec)
	}
	err = kubetest.Poll(testContext(t), 100*time.Millisecond, long, func(c context.Context) (bool, error) {
		u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(c, created.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mode, _, _ := unstructured.NestedString(u.Object, "status", "deploymentMode")
		return mode != "" && len(u.GetFinalizers()) > 0, nil
	})
	if err != nil {
		t.Fatalf("KServe never recorded the legacy object's mode and finalizer: %v", err)
	}
	return p, created
}

// runtimeRequests are the audit log's requests by the Runtime on the
// InferenceService name; it fails the test at an update or patch of it (a
// finalizer removal included), and at none that deletes it.
func runtimeRequests(t *testing.T, s *site, name string) []kubetest.AuditEvent {
	t.Helper()
	evs, err := s.e.AuditLog().Events()
	if err != nil {
		t.Fatal(err)
	}
	var out []kubetest.AuditEvent
	deleted := false
	for _, ev := range evs {
		if ev.User.Username != siteagent.RuntimeUser() || ev.ObjectRef == nil || ev.ObjectRef.Resource != "inferenceservices" || ev.ObjectRef.Name != name {
			continue
		}
		switch ev.Verb {
		case "update", "patch":
			t.Fatalf("the Runtime changed the legacy InferenceService: %+v", ev)
		case "delete":
			deleted = true
		}
		out = append(out, ev)
	}
	if !deleted {
		t.Fatal("the audit log shows no delete of the legacy InferenceService by the Runtime")
	}
	return out
}

// A saved legacy record (deployment mode RawDeployment, written as history
// wrote it) whose InferenceService the administrator created with that
// annotation is adopted by recovery: same UID, the record keeps
// RawDeployment, and the audit log shows no update or patch of it by the
// Runtime. KServe's v0.16 webhook then refuses its controller's finalizer
// removal (the mode differs from the Standard it records; kserve#5885), so
// a cancel ends failed / deletion-pending after the bound, saying so; the
// Runtime removed no finalizer (kubetest finalizes it as the
// administrator at clean-up). Real: the API server, KServe's controller and
// webhooks, the audit log.
func TestALegacyRawDeploymentRecordIsAdoptedNeverPatchedAndItsHangingDeletionIsDeletionPending(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true, deletionWait: 5 * time.Second}})
	// Once KServe's controller has recorded the mode it resolved (Standard) and its finalizer, its
	// webhook refuses every later update of the object, the finalizer removal included.
	p, created := adoptedLegacyInferenceService(t, s)
	c := s.simple(siteprotocol.OpCancel, p.Command.AttemptID)
	want(t, c, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeletionPending)
	if !strings.Contains(c.Message, "still being deleted") {
		t.Fatalf("message %q", c.Message)
	}
	u, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Get(testContext(t), created.GetName(), metav1.GetOptions{})
	if err != nil || u.GetDeletionTimestamp() == nil || len(u.GetFinalizers()) == 0 || u.GetAnnotations()[kubeinference.AnnotationDeploymentMode] != application.DeploymentModeRawDeployment {
		t.Fatalf("the legacy object: %v, finalizers %v, annotations %v", err, u.GetFinalizers(), u.GetAnnotations())
	}
	runtimeRequests(t, s, created.GetName())
}

// A legacy object whose finalizer KServe can remove is cleaned up: the
// saved legacy record adopted as above, the administrator writes, through
// the status subresource, status.deploymentMode RawDeployment, so that the
// object's recorded mode agrees with its annotation. KServe v0.16.0's
// validator compares only those two (validateDeploymentMode,
// pkg/apis/serving/v1beta1/inference_service_validation.go) and does not
// see status writes (its webhook matches inferenceservices, not
// inferenceservices/status); its controller removes its finalizer on a
// deleted object before anything else of the reconcile
// (pkg/controller/v1beta1/inferenceservice/controller.go), so the finalizer
// patch is admitted. A cancel then ends succeeded / deleted and the object
// is gone; the audit log shows no update or patch of it by the Runtime and
// a patch by KServe's controller after the Runtime's delete (the finalizer
// removal). Real: the API server, KServe's controller and webhooks, the
// garbage collector, the audit log. Written by the test as the
// administrator: the object and its recorded mode.
func TestALegacyRawDeploymentObjectWhoseFinalizerKServeCanRemoveIsCleanedUp(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true, deletionWait: long}})
	p, created := adoptedLegacyInferenceService(t, s)
	isvcs := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := isvcs.Get(testContext(t), created.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, application.DeploymentModeRawDeployment, "status", "deploymentMode"); err != nil {
			return err
		}
		_, err = isvcs.UpdateStatus(testContext(t), u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("the administrator's status write: %v", err)
	}
	c := s.simple(siteprotocol.OpCancel, p.Command.AttemptID)
	want(t, c, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
	if _, err := isvcs.Get(testContext(t), created.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the legacy InferenceService is still there after cancel: %v", err)
	}
	var deleted time.Time
	for _, ev := range runtimeRequests(t, s, created.GetName()) {
		if ev.Verb == "delete" {
			deleted = ev.Received.Time
		}
	}
	evs, err := s.e.AuditLog().Events()
	if err != nil {
		t.Fatal(err)
	}
	finalized := false
	for _, ev := range evs {
		if ev.Actor() == kubetest.KServeController && ev.Verb == "patch" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "inferenceservices" &&
			ev.ObjectRef.Name == created.GetName() && ev.ObjectRef.Subresource == "" && ev.Code() == 200 && !ev.Received.Time.Before(deleted) {
			finalized = true
		}
	}
	if !finalized {
		t.Fatal("the audit log shows no patch of the deleted legacy InferenceService by KServe's controller")
	}
	want(t, s.simple(siteprotocol.OpObserve, p.Command.AttemptID), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
}
