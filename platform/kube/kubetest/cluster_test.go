package kubetest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// Generous: the Job controller backs off for up to about a minute after a refused Pod create.
const long = 3 * time.Minute

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return c
}

// newJob is a one-Pod Job whose Pod carries the given annotations (KWOK reads them).
func newJob(name string, backoffLimit int32, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoffLimit,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    "main",
						Image:   "registry.invalid/metallo/never-pulled:1",
						Command: []string{"/bin/true"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
				},
			},
		},
	}
}

func jobPodRunning(job string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		return p.Labels["job-name"] == job && p.Status.Phase == corev1.PodRunning
	}
}

func createServiceAccount(t *testing.T, e *kubetest.Env, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(ctx(t), sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account %s: %v", name, err)
	}
}

// A member's service account with a Role may create a Job when the Runtime impersonates it; the
// same request as an account without the Role is refused with 403. The audit log names the
// member as the creator. Real: RBAC, impersonation, audit. KWOK is not involved.
func TestImpersonatedMemberWithRoleCreatesJobAndOtherAccountIsForbidden(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	createServiceAccount(t, e, "member-x")
	createServiceAccount(t, e, "member-y")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "job-runner"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"batch"}, Resources: []string{"jobs"},
			Verbs: []string{"create", "get", "list", "watch", "delete"},
		}},
	}
	if _, err := e.Client.RbacV1().Roles(e.Namespace).Create(c, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "member-x-runs-jobs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "job-runner"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "member-x", Namespace: e.Namespace}},
	}
	if _, err := e.Client.RbacV1().RoleBindings(e.Namespace).Create(c, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	memberX := kubeconfig.ServiceAccountUser(e.Namespace, "member-x")
	// The RBAC authorizer sees new bindings through its informers: ask it until it agrees.
	err := wait.PollUntilContextTimeout(c, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: memberX, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.Namespace},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.Namespace, Verb: "create", Group: "batch", Resource: "jobs"},
		}}
		out, err := e.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && out.Status.Allowed, err
	})
	if err != nil {
		t.Fatalf("the Role binding never took effect: %v", err)
	}

	asX := e.ClientFor(e.ImpersonateServiceAccount(e.Namespace, "member-x"))
	if _, err := asX.BatchV1().Jobs(e.Namespace).Create(c, newJob("as-member-x", 0, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Job as member-x: %v", err)
	}
	asY := e.ClientFor(e.ImpersonateServiceAccount(e.Namespace, "member-y"))
	_, err = asY.BatchV1().Jobs(e.Namespace).Create(c, newJob("as-member-y", 0, nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("create Job as member-y: want 403 Forbidden, got %v", err)
	}
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != 403 {
		t.Fatalf("create Job as member-y: want code 403, got %v", err)
	}

	ev := e.WhoCreated("jobs", e.Namespace, "as-member-x")
	if ev.Actor() != memberX || ev.User.Username != kubetest.AdminUser {
		t.Fatalf("audit: want %s impersonated by %s, got user %q impersonating %+v", memberX, kubetest.AdminUser, ev.User.Username, ev.ImpersonatedUser)
	}
}

// With a ResourceQuota at the namespace's current usage, the Job controller's Pod create is
// refused with "exceeded quota". Real: ResourceQuota admission and controller, Job controller.
// Simulated: the holding Pod "runs" for ten minutes on a KWOK Node (run-seconds annotation).
// The quota comes first and the holder's Pod is charged to it by admission: a quota made after
// the Pod is counted from the quota controller's informer, which may not have seen the Pod yet,
// and is not counted again before the controller's resync, five minutes later.
func TestResourceQuotaAtCurrentUsageRefusesJobControllerPodCreate(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "at-usage"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	if _, err := e.Client.CoreV1().ResourceQuotas(e.Namespace).Create(c, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission refuses every Pod ("status unknown for quota") until the quota controller has
	// recorded the quota's status.
	quotas := cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "resourcequotas", e.Namespace, fields.Everything())
	kubetest.Until(t, long, "quota status recorded", quotas, func(q *corev1.ResourceQuota) bool {
		_, ok := q.Status.Used[corev1.ResourcePods]
		return ok && q.Status.Hard.Pods().Value() == 1
	})
	holder := newJob("holder", 0, map[string]string{kubetest.AnnotationRunSeconds: "600"})
	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Create(c, holder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the holder Job's Pod Running", e.Pods(""), jobPodRunning("holder"))
	kubetest.Until(t, long, "the holder's Pod charged to the quota", quotas, func(q *corev1.ResourceQuota) bool {
		used := q.Status.Used[corev1.ResourcePods]
		return used.Value() == 1
	})

	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Create(c, newJob("refused", 0, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := e.WaitForEvent(long, "the Job controller's Pod create refused by quota", func(ev *corev1.Event) bool {
		return ev.InvolvedObject.Kind == "Job" && ev.InvolvedObject.Name == "refused" &&
			ev.Reason == "FailedCreate" && strings.Contains(ev.Message, "exceeded quota")
	})
	t.Logf("refused: %s", ev.Message)
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(c, metav1.ListOptions{LabelSelector: "job-name=refused"})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("want no Pod of the refused Job, got %v (err %v)", len(pods.Items), err)
	}
}

// A delete with a wrong UID precondition is refused with 409; with the right UID and foreground
// propagation the Job is gone only after the garbage collector removed its Pods. Real: API
// server preconditions, garbage collector. Simulated: KWOK removes the deleted Pods at once.
func TestDeleteWithWrongUIDConflictsAndForegroundDeleteRemovesPodsFirst(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	job, err := e.Client.BatchV1().Jobs(e.Namespace).Create(c, newJob("deletable", 0, map[string]string{kubetest.AnnotationRunSeconds: "600"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the Job's Pod Running", e.Pods(""), jobPodRunning("deletable"))

	wrong := types.UID("00000000-0000-0000-0000-000000000000")
	err = e.Client.BatchV1().Jobs(e.Namespace).Delete(c, "deletable", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong UID: want 409 Conflict, got %v", err)
	}
	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Get(c, "deletable", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Job must survive a refused delete: %v", err)
	}

	fg := metav1.DeletePropagationForeground
	if err := e.Client.BatchV1().Jobs(e.Namespace).Delete(c, "deletable", metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &job.UID}, PropagationPolicy: &fg,
	}); err != nil {
		t.Fatalf("delete with the right UID: %v", err)
	}
	kubetest.UntilGone(t, long, "job deletable", e.Jobs("deletable"), &batchv1.Job{}, e.Namespace, "deletable")
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(c, metav1.ListOptions{LabelSelector: "job-name=deletable"})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("foreground deletion: want the Pods gone before the Job, got %d (err %v)", len(pods.Items), err)
	}
}

// An InferenceService in KServe's Standard deployment mode is accepted by KServe's CRD and
// webhooks and reads back as written. A value the CRD's schema forbids is refused with 422
// Invalid; a value of the wrong type is refused before the schema is checked, by KServe's
// defaulter, which cannot decode it. Real: the CRD's schema validation, KServe's webhooks.
func TestInferenceServiceInStandardModeIsCreatedAndReadBack(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	isvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.kserve.io/v1beta1",
		"kind":       "InferenceService",
		"metadata": map[string]any{
			"name":        "sklearn-iris",
			"annotations": map[string]any{"serving.kserve.io/deploymentMode": "Standard"},
		},
		"spec": map[string]any{
			"predictor": map[string]any{
				"model": map[string]any{
					"modelFormat": map[string]any{"name": "sklearn"},
					"storageUri":  "pvc://models/iris",
				},
			},
		},
	}}
	if _, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).Create(c, isvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create InferenceService: %v", err)
	}
	got, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).Get(c, "sklearn-iris", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if mode := got.GetAnnotations()["serving.kserve.io/deploymentMode"]; mode != "Standard" {
		t.Fatalf("deploymentMode annotation: got %q", mode)
	}
	format, _, _ := unstructured.NestedString(got.Object, "spec", "predictor", "model", "modelFormat", "name")
	uri, _, _ := unstructured.NestedString(got.Object, "spec", "predictor", "model", "storageUri")
	if format != "sklearn" || uri != "pvc://models/iris" {
		t.Fatalf("read back spec: format %q storageUri %q", format, uri)
	}
	// The CRD's schema is enforced: a value outside an enum is refused.
	bad := isvc.DeepCopy()
	bad.SetName("bad")
	_ = unstructured.SetNestedField(bad.Object, "Bogus", "spec", "predictor", "scaleMetricType")
	if _, err := e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).Create(c, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("scaleMetricType \"Bogus\": want 422 Invalid from the CRD schema, got %v", err)
	}
	// A value of the wrong type reaches KServe's mutating webhook first (admission runs before
	// the schema is checked), which cannot decode it.
	bad = isvc.DeepCopy()
	bad.SetName("bad")
	_ = unstructured.SetNestedField(bad.Object, "three", "spec", "predictor", "maxReplicas")
	_, err = e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(e.Namespace).Create(c, bad, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `admission webhook "inferenceservice.kserve-webhook-server.defaulter" denied the request`) {
		t.Fatalf("maxReplicas \"three\": want 400 from KServe's defaulter, got %v", err)
	}
}

// TokenReview accepts a service account's token from the TokenRequest API and names the
// account; it rejects a forged token. Real: service-account token signing and authentication.
func TestTokenReviewValidatesServiceAccountToken(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	createServiceAccount(t, e, "reviewed")
	token := e.ServiceAccountToken(e.Namespace, "reviewed", 10*time.Minute)

	review := func(tok string) *authenticationv1.TokenReview {
		out, err := e.Client.AuthenticationV1().TokenReviews().Create(c,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenReview: %v", err)
		}
		return out
	}
	got := review(token)
	if !got.Status.Authenticated || got.Status.User.Username != kubeconfig.ServiceAccountUser(e.Namespace, "reviewed") {
		t.Fatalf("TokenReview of a fresh token: %+v", got.Status)
	}
	if forged := review(token[:len(token)-4] + "AAAA"); forged.Status.Authenticated {
		t.Fatalf("TokenReview accepted a forged token: %+v", forged.Status)
	}
	// The token works as a credential on its own, and carries no permission it was not given.
	asSA := e.ClientFor(e.ServiceAccountConfig(e.Namespace, "reviewed"))
	if _, err := asSA.CoreV1().Secrets(e.Namespace).List(c, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list Secrets with the service account's token: want 403, got %v", err)
	}
}

// A Job runs to Complete, and a Job whose Pod is annotated to fail ends Failed with reason
// BackoffLimitExceeded after backoffLimit+1 Pods, through the scheduler and KWOK alone.
// Simulated: KWOK moves the Pods to Succeeded or Failed (exit code 1); no container runs.
func TestJobCompletesAndAnnotatedFailureExhaustsBackoffLimit(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Create(c, newJob("succeeds", 0, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Create(c, newJob("fails", 1, map[string]string{kubetest.AnnotationFail: "true"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitForJob("succeeds", long, "Complete", func(j *batchv1.Job) bool {
		_, ok := kubetest.JobCondition(j, batchv1.JobComplete)
		return ok
	})
	failed := e.WaitForJob("fails", long, "Failed", func(j *batchv1.Job) bool {
		_, ok := kubetest.JobCondition(j, batchv1.JobFailed)
		return ok
	})
	cond, _ := kubetest.JobCondition(failed, batchv1.JobFailed)
	if cond.Reason != batchv1.JobReasonBackoffLimitExceeded || failed.Status.Failed != 2 {
		t.Fatalf("want BackoffLimitExceeded after 2 failed Pods, got reason %q, failed %d", cond.Reason, failed.Status.Failed)
	}
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(c, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, n := range e.Nodes {
		nodes[n] = true
	}
	for _, p := range pods.Items {
		if !nodes[p.Spec.NodeName] {
			t.Errorf("pod %s on %q, not a KWOK Node %v", p.Name, p.Spec.NodeName, e.Nodes)
		}
		if p.Labels["job-name"] == "fails" && p.Status.Phase == corev1.PodFailed {
			if s := p.Status.ContainerStatuses; len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.ExitCode == 0 {
				t.Errorf("pod %s: want a non-zero exit code, got %+v", p.Name, s)
			}
		}
	}
}

// A Pod that mounts a new PersistentVolumeClaim of the default StorageClass is scheduled and
// runs: the provisioner made a hostPath volume under the cluster's state directory and the claim
// bound. Simulated: KWOK mounts nothing and runs nothing.
func TestPodWithNewClaimIsScheduledAndRuns(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "workspace"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Create(c, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "uses-claim"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.invalid/metallo/never-pulled:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "workspace"},
			}}},
		},
	}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(c, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := e.WaitForPod("uses-claim", long, "Running on a Node", func(p *corev1.Pod) bool {
		return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
	})
	t.Logf("pod on %s", running.Spec.NodeName)
	bound, err := e.Client.CoreV1().PersistentVolumeClaims(e.Namespace).Get(c, "workspace", metav1.GetOptions{})
	if err != nil || bound.Status.Phase != corev1.ClaimBound || bound.Spec.StorageClassName == nil || *bound.Spec.StorageClassName != kubetest.StorageClass {
		t.Fatalf("claim: want Bound with class %s, got %+v (err %v)", kubetest.StorageClass, bound.Status, err)
	}
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(c, bound.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, e.Dir+"/") {
		t.Fatalf("volume %s: want a hostPath under %s, got %+v", pv.Name, e.Dir, pv.Spec.PersistentVolumeSource)
	}
}

// A Deployment's Pod becomes Ready and the Deployment available; one annotated never-ready runs
// but stays unready. Real: Deployment and ReplicaSet controllers. Simulated: KWOK sets readiness.
func TestDeploymentPodBecomesReadyUnlessAnnotatedNeverReady(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	deployment := func(name string, annotations map[string]string) *appsv1.Deployment {
		one := int32(1)
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "server", Image: "registry.invalid/metallo/never-pulled:1",
					}}},
				},
			},
		}
	}
	for _, d := range []*appsv1.Deployment{
		deployment("serves", nil),
		deployment("never-ready", map[string]string{kubetest.AnnotationNeverReady: "true"}),
	} {
		if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(c, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deployments := cache.NewListWatchFromClient(e.Client.AppsV1().RESTClient(), "deployments", e.Namespace, fields.Everything())
	kubetest.Until(t, long, "deployment serves available", deployments, func(d *appsv1.Deployment) bool {
		return d.Name == "serves" && d.Status.AvailableReplicas == 1
	})
	unready := kubetest.Until(t, long, "the never-ready Pod Running", e.Pods(""), func(p *corev1.Pod) bool {
		return p.Labels["app"] == "never-ready" && p.Status.Phase == corev1.PodRunning
	})
	for _, cond := range unready.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			t.Fatalf("pod %s annotated never-ready is Ready", unready.Name)
		}
	}
	d, err := e.Client.AppsV1().Deployments(e.Namespace).Get(c, "never-ready", metav1.GetOptions{})
	if err != nil || d.Status.ReadyReplicas != 0 {
		t.Fatalf("deployment never-ready: want 0 ready replicas, got %+v (err %v)", d.Status, err)
	}
}

// Every fake Node has a Lease in kube-node-lease that KWOK holds and renews, the Node's own
// heartbeat as a kubelet's is (docs/testing.md, "What the fake Nodes' readiness depends on"): the
// test waits, on a watch, for each Lease's renewTime to move past the one it first read. Real:
// the API server, KWOK's lease controller; nothing is simulated but the kubelets KWOK stands for.
func TestKWOKRenewsTheLeaseOfEveryFakeNode(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	if len(e.Nodes) == 0 {
		t.Fatal("the cluster records no fake Nodes")
	}
	for _, n := range e.Nodes {
		first, err := e.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(c, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("fake Node %s's Lease: %v", n, err)
		}
		if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity == "" || first.Spec.RenewTime == nil ||
			first.Spec.LeaseDurationSeconds == nil || *first.Spec.LeaseDurationSeconds != 40 {
			t.Fatalf("fake Node %s's Lease: want a holder, a renewTime and a duration of 40 s, got %+v", n, first.Spec)
		}
		node, err := e.Client.CoreV1().Nodes().Get(c, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if o := first.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].UID != node.UID {
			t.Fatalf("fake Node %s's Lease is owned by %+v; want the Node (uid %s)", n, o, node.UID)
		}
		leases := cache.NewListWatchFromClient(e.Client.CoordinationV1().RESTClient(), "leases", corev1.NamespaceNodeLease,
			fields.OneTermEqualSelector("metadata.name", n))
		renewed := kubetest.Until(t, long, "fake Node "+n+"'s Lease renewed", leases, func(l *coordinationv1.Lease) bool {
			return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
		})
		if *renewed.Spec.HolderIdentity != *first.Spec.HolderIdentity {
			t.Fatalf("fake Node %s's Lease changed hands from %s to %s", n, *first.Spec.HolderIdentity, *renewed.Spec.HolderIdentity)
		}
		t.Logf("fake Node %s: Lease held by %s renewed at %s, then at %s", n, *renewed.Spec.HolderIdentity,
			first.Spec.RenewTime.UTC().Format(time.RFC3339Nano), renewed.Spec.RenewTime.UTC().Format(time.RFC3339Nano))
	}
}

// Since the cluster started, the node lifecycle controller has never written a fake Node's
// status: it does so only to take a Node whose heartbeat (its Lease) stopped for unreachable
// (Ready Unknown), which makes every Pod on it not Ready in the middle of whatever test waits on
// them. Read from the audit log, which records every write of the controller's service account
// (only its lines are decoded: the log of a long-running cluster holds hundreds of megabytes).
func TestTheNodeLifecycleControllerNeverTookAFakeNodeForUnreachable(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	const controller = "system:serviceaccount:kube-system:node-controller"
	f, err := os.Open(e.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	lines, writes := 0, 0
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a partial last line is a request still being written
		}
		if err != nil {
			t.Fatal(err)
		}
		lines++
		if !bytes.Contains(line, []byte(controller)) {
			continue
		}
		var ev kubetest.AuditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("audit log line %d: %v", lines, err)
		}
		o := ev.ObjectRef
		if ev.Stage != "ResponseComplete" || o == nil || o.Resource != "nodes" || o.Subresource != "status" || ev.Actor() != controller {
			continue
		}
		writes++
		if slices.Contains(e.Nodes, o.Name) {
			t.Errorf("%s: %s %s nodes/%s/status (the node lifecycle controller took the fake Node for unreachable)",
				ev.Received.UTC().Format(time.RFC3339), controller, ev.Verb, o.Name)
		}
	}
	t.Logf("read %d audit log lines; the node lifecycle controller wrote a Node's status %d times", lines, writes)
}
