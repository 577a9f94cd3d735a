package kube_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// isvcVerification is the predictor's verification of a prepared checkout
// of a test repository, by the test Site's platform image.
func isvcVerification() application.WorkspaceVerification {
	return application.WorkspaceVerification{Image: testImage,
		Repository: siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("e", 40)}, SizeLimitBytes: 1 << 20}
}

// isvcSpecOf is the InferenceServiceSpec a saved InferenceService was
// rendered from (isvcPrepare's demand).
func isvcSpecOf(t *testing.T, isvc kservev1beta1.InferenceService) application.InferenceServiceSpec {
	t.Helper()
	p := isvc.Spec.Predictor
	if p.Model == nil || p.Model.Runtime == nil || len(p.Volumes) != 1 || p.Volumes[0].PersistentVolumeClaim == nil {
		t.Fatalf("saved predictor %+v", p)
	}
	l := isvc.Labels
	return application.InferenceServiceSpec{
		Identity: application.ObjectIdentity{RunID: l[kube.LabelRun], AttemptID: l[kube.LabelAttempt], MemberID: l[kube.LabelMember],
			ProjectID: l[kube.LabelProject], CommandID: l[kube.LabelCommand]},
		Namespace: isvc.Namespace, ServiceAccount: p.ServiceAccountName, DeploymentMode: isvc.Annotations[kubeinference.AnnotationDeploymentMode],
		ModelFormat: p.Model.ModelFormat.Name, Runtime: *p.Model.Runtime, Args: p.Model.Args,
		Demand: map[string]int64{"cpu": 1000, "memory": 2 << 30}, WorkspaceClaim: p.Volumes[0].PersistentVolumeClaim.ClaimName,
	}
}

// The InferenceService of a prepare with a repository carries, in its
// predictor, the init container workspace-verify exactly as the
// application family's serving Pod does (kube.VerifyContainer: the
// platform image, metallo workspace-init --verify-only, the claim
// read-only, no credential, nothing else); without a repository it has
// none (docs/site-runtime.md#services-and-the-prepared-workspace). No
// cluster.
func TestAPredictorVerifiesItsCheckoutReadOnlyWithoutACredential(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	id := application.ObjectIdentity{RunID: uuid.NewString(), AttemptID: uuid.NewString(), MemberID: uuid.NewString(), ProjectID: uuid.NewString(), CommandID: uuid.NewString()}
	spec := application.InferenceServiceSpec{Identity: id, Namespace: "project-0a1b2c3d", ServiceAccount: "member-" + id.MemberID,
		DeploymentMode: application.DeploymentModeStandard, ModelFormat: "huggingface", Runtime: kubetest.HuggingFaceRuntime, Args: caseModelArgs,
		Demand: map[string]int64{"cpu": 1000, "memory": 2 << 30}, WorkspaceClaim: domain.AttemptObjectName(id.AttemptID, domain.SuffixWorkspace)}
	plain, err := kubeinference.NewRenderer(r).RenderInferenceService(spec)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Spec, []byte("initContainers")) {
		t.Fatal("an inference service without a repository has an init container")
	}
	v := isvcVerification()
	spec.Verify = &v
	obj, err := kubeinference.NewRenderer(r).RenderInferenceService(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got kservev1beta1.InferenceService
	if err := json.Unmarshal(obj.Spec, &got); err != nil {
		t.Fatal(err)
	}
	p := got.Spec.Predictor
	want := kube.VerifyContainer(v)
	if len(p.InitContainers) != 1 {
		t.Fatalf("init containers %+v", p.InitContainers)
	}
	c := p.InitContainers[0]
	switch {
	case c.Name != kube.VerifyContainerName || c.Image != testImage || !slices.Equal(c.Command, want.Command) || !slices.Contains(c.Command, "--verify-only") || len(c.Args) != 0:
		t.Fatalf("init container %s %s %q %q", c.Name, c.Image, c.Command, c.Args)
	case len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].Name != kube.WorkspaceVolume || c.VolumeMounts[0].MountPath != kube.WorkspacePath:
		t.Fatalf("mounts %+v", c.VolumeMounts)
	case len(p.Volumes) != 1 || len(c.Env) != 0 || len(c.EnvFrom) != 0:
		t.Fatal("the predictor holds no credential")
	}
}

// withVerification edits a saved InferenceService record to what a
// prepare with a repository saves: the same rendering with the predictor's
// workspace-verify (the checkout itself needs the real node's helper;
// its part is proved by the application tests and the workspace helper's).
func withVerification(t *testing.T, s *site, rec domain.NativeRecord) domain.NativeRecord {
	t.Helper()
	var isvc kservev1beta1.InferenceService
	if err := json.Unmarshal(rec.Spec, &isvc); err != nil {
		t.Fatal(err)
	}
	spec := isvcSpecOf(t, isvc)
	v := isvcVerification()
	spec.Verify = &v
	obj, err := kubeinference.NewRenderer(s.renderer).RenderInferenceService(spec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Spec, rec.SpecDigest = obj.Spec, siteprotocol.Digest(obj.Spec)
	return rec
}

// KServe v0.16's own controller carries the predictor's init container
// workspace-verify onto the predictor Deployment's Pod template and its
// Pods, unchanged, and the admission policies (the predictor exception of
// metallo-deployments and metallo-pod-origin, the credential rules) admit
// them: the inference service becomes healthy. The saved record is the
// one a prepare with a repository saves (withVerification). Real: the API
// server, RBAC, impersonation, admission policies, KServe's controller and
// webhooks, the Deployment and ReplicaSet controllers. Simulated by KWOK:
// the Node (the init container does not really run).
func TestKServeCarriesThePredictorsWorkspaceVerificationOntoItsPods(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{})
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	recs, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	rec := withVerification(t, s, *domain.FindRecord(recs, domain.KindInferenceService))
	if err := s.journal.Services().SaveRecord(testContext(t), rec); err != nil {
		t.Fatal(err)
	}
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	verify := kube.VerifyContainer(isvcVerification())
	check := func(what string, cs []corev1.Container) {
		t.Helper()
		if len(cs) != 1 {
			t.Fatalf("%s has init containers %+v", what, cs)
		}
		c := cs[0]
		if c.Name != verify.Name || c.Image != verify.Image || !slices.Equal(c.Command, verify.Command) || len(c.Args) != 0 || len(c.Env) != 0 ||
			len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].MountPath != kube.WorkspacePath {
			t.Fatalf("%s's init container %+v, want %+v", what, c, verify)
		}
	}
	predictor := domain.AttemptObjectName(attempt, "") + kubeinference.PredictorSuffix
	dep, err := s.e.Client.AppsV1().Deployments(s.ns).Get(testContext(t), predictor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("the predictor Deployment's Pod template", dep.Spec.Template.Spec.InitContainers)
	if who := s.e.WhoCreated("deployments", s.ns, predictor); who.Actor() != kubetest.KServeController {
		t.Fatalf("the predictor Deployment was created by %s, want KServe's controller", who.Actor())
	}
	pods, err := s.e.Client.CoreV1().Pods(s.ns).List(testContext(t), metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("the healthy predictor has no Pod")
	}
	for _, p := range pods.Items {
		check("predictor Pod "+p.Name, p.Spec.InitContainers)
	}
	want(t, s.simple(siteprotocol.OpCancel, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonDeleted)
}
