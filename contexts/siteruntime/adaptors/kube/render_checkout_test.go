package kube_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeapp "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func helperSpec() application.HelperSpec {
	return application.HelperSpec{
		Identity:  application.ObjectIdentity{RunID: "r", AttemptID: "7d1f0000-0000-4000-8000-000000000001", MemberID: "m", ProjectID: "p", CommandID: "c"},
		Namespace: "project-a", ServiceAccount: "member-m", Image: testImage,
		WorkspaceClaim: "attempt-7d1f0000-0000-4000-8000-000000000001-ws", Credential: "attempt-7d1f0000-0000-4000-8000-000000000001-cred",
		Repository:     siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("a", 40), LFS: true},
		SizeLimitBytes: 1 << 20, Timeout: 10 * time.Minute,
	}
}

// No cluster: KWOK and the API server are not involved.
func TestTheHelperRunsExactlyWorkspaceInitWithTheCredentialOnlyAsAFile(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	obj, err := r.RenderHelper(helperSpec())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := r.RenderHelper(helperSpec())
	if !bytes.Equal(obj.Spec, again.Spec) {
		t.Fatal("two renderings differ")
	}
	var pod corev1.Pod
	if err := json.Unmarshal(obj.Spec, &pod); err != nil {
		t.Fatal(err)
	}
	want := []string{kube.HelperProgram, "workspace-init", "--url", "https://git.example.org/lab/model.git", "--commit", strings.Repeat("a", 40), "--lfs",
		"--dest", "/workspace/repo", "--size-limit", "1048576", "--credential-dir", kube.CredentialPath, "--timeout", "10m0s"}
	c := pod.Spec.Containers[0]
	switch {
	case obj.Name != "attempt-7d1f0000-0000-4000-8000-000000000001-git" || pod.Labels[kube.LabelAttempt] != helperSpec().Identity.AttemptID:
		t.Fatalf("identity %s %v", obj.Name, pod.Labels)
	case !slices.Equal(c.Command, want) || len(c.Args) != 0 || c.Image != testImage || len(pod.Spec.Containers) != 1:
		t.Fatalf("command %q args %q image %s", c.Command, c.Args, c.Image)
	case pod.Spec.RestartPolicy != corev1.RestartPolicyNever || *pod.Spec.TerminationGracePeriodSeconds != 5 || *pod.Spec.AutomountServiceAccountToken:
		t.Fatal("restartPolicy Never, a 5 s grace period, no service account token")
	case len(c.Env) != 0 || len(c.EnvFrom) != 0:
		t.Fatal("the credential is a file, never the environment")
	case pod.Spec.Volumes[1].Secret == nil || pod.Spec.Volumes[1].Secret.SecretName != helperSpec().Credential || !c.VolumeMounts[1].ReadOnly:
		t.Fatalf("credential volume %+v", pod.Spec.Volumes)
	}
	s := helperSpec()
	s.CAConfigMap = "repository-ca"
	s.Repository.LFS = false
	withCA, _ := r.RenderHelper(s)
	if err := json.Unmarshal(withCA.Spec, &pod); err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(pod.Spec.Containers[0].Command, " "); strings.Contains(cmd, "--lfs") || !strings.Contains(cmd, "--ca-file "+kube.CAPath+"/ca.pem") {
		t.Fatalf("command %s", cmd)
	}
}

func TestTheCredentialsSavedSpecificationLeavesTheTokenOut(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	g := domain.RepositoryGrant{GrantID: "g", Username: "member-user", Token: "the-token-9f3", ExpiresAt: time.Now()}
	obj, err := r.RenderCredential(application.CredentialSpec{Identity: helperSpec().Identity, Namespace: "project-a", Grant: g})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(obj.Spec, []byte("the-token-9f3")) || bytes.Contains(obj.Spec, []byte("member-user")) {
		t.Fatalf("the saved specification holds the grant: %s", obj.Spec)
	}
	if string(obj.Data["token"]) != "the-token-9f3" || string(obj.Data["username"]) != "member-user" {
		t.Fatalf("data %v", obj.Data)
	}
	var s corev1.Secret
	if err := json.Unmarshal(obj.Spec, &s); err != nil || s.Type != corev1.SecretTypeOpaque || s.Name != "attempt-7d1f0000-0000-4000-8000-000000000001-cred" {
		t.Fatalf("%v %+v", err, s)
	}
}

// liveHelper returns the object the API server would hold for digestOf, with its digest annotation.
func liveHelper(t *testing.T, digestOf []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(digestOf, &m); err != nil {
		t.Fatal(err)
	}
	meta := m["metadata"].(map[string]any)
	meta["annotations"] = map[string]any{kube.AnnotationSpecDigest: siteprotocol.Digest(digestOf)}
	meta["uid"] = "u-1"
	return m
}

func TestRecoveryAcceptsAHelperOfTheEarlier30SecondGraceAndNothingElse(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	obj, _ := r.RenderHelper(helperSpec())
	legacy, ok := kube.LegacyHelperSpec(obj.Spec)
	if !ok {
		t.Fatal("no legacy form of a helper")
	}
	if m, err := kube.Mismatch(obj.Spec, liveHelper(t, legacy)); err != nil || m != "" {
		t.Fatalf("the old-grace helper: %q %v", m, err)
	}
	// Another change beside the grace period is still a mismatch.
	l := liveHelper(t, legacy)
	l["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["command"] = []any{kube.HelperProgram, "workspace-init", "--url", "https://evil.example/x.git"}
	if m, _ := kube.Mismatch(obj.Spec, l); m == "" {
		t.Fatal("a changed command of an old-grace helper was accepted")
	}
	// A 30 s grace with the current digest is a mismatch too.
	l = liveHelper(t, obj.Spec)
	l["spec"].(map[string]any)["terminationGracePeriodSeconds"] = 30
	if m, _ := kube.Mismatch(obj.Spec, l); !strings.Contains(m, "terminationGracePeriodSeconds") {
		t.Fatalf("mismatch %q", m)
	}
	if _, ok := kube.LegacyHelperSpec([]byte(`{"kind":"Job","spec":{}}`)); ok {
		t.Fatal("a Job has no legacy helper form")
	}
}

func TestTheHelpersStateIsItsContainersTermination(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if s := kube.HelperStateOf(pod); s.Done {
		t.Fatal("a running helper is not done")
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.HelperContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"outcome":"failed"}`}}}}
	if s := kube.HelperStateOf(pod); !s.Done || s.ExitCode != 1 || s.Message != `{"outcome":"failed"}` {
		t.Fatalf("%+v", s)
	}
}

func TestAServingPodVerifiesItsCheckoutReadOnlyWithoutACredential(t *testing.T) {
	r := kube.NewRenderer(nil, nil)
	plain, err := kubeapp.NewRenderer(r).RenderDeployment(appSpec())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Spec, []byte("initContainers")) {
		t.Fatal("a service without a repository has an init container")
	}
	s := appSpec()
	s.Verify = &application.WorkspaceVerification{Image: testImage, Repository: siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("b", 40)}, SizeLimitBytes: 4096}
	obj, err := kubeapp.NewRenderer(r).RenderDeployment(s)
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(obj.Spec, &dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	want := []string{kube.HelperProgram, "workspace-init", "--url", "https://git.example.org/lab/model.git", "--commit", strings.Repeat("b", 40),
		"--dest", "/workspace/repo", "--size-limit", "4096", "--verify-only", "--timeout", "1m0s"}
	if len(pod.InitContainers) != 1 {
		t.Fatalf("init containers %+v", pod.InitContainers)
	}
	c := pod.InitContainers[0]
	switch {
	case c.Name != kube.VerifyContainerName || c.Image != testImage || !slices.Equal(c.Command, want) || len(c.Args) != 0:
		t.Fatalf("init container %s %s %q", c.Name, c.Image, c.Command)
	case len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].Name != kube.WorkspaceVolume:
		t.Fatalf("mounts %+v", c.VolumeMounts)
	case len(pod.Volumes) != 1 || len(c.Env) != 0:
		t.Fatal("the serving Pod holds no credential")
	}
}
