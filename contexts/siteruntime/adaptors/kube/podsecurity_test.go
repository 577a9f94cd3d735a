package kube_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kservev1beta1 "github.com/kserve/kserve/pkg/apis/serving/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeapp "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/appservice"
	kubebatch "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/batch"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// renderedPods renders one object of every kind with Pods (a batch Job, an
// application Deployment and an InferenceService with workspace-verify, a
// workspace helper, a workspace reader) with r.
func renderedPods(t *testing.T, r *kube.Renderer) map[string]application.NativeObject {
	t.Helper()
	verify := &application.WorkspaceVerification{Image: testImage, Repository: siteprotocol.Repository{URL: "https://git.example.org/lab/model.git", Commit: strings.Repeat("a", 40)}, SizeLimitBytes: 1 << 20}
	out := map[string]application.NativeObject{}
	add := func(name string, o application.NativeObject, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = o
	}
	id := application.ObjectIdentity{RunID: "r", AttemptID: "7d1f0000-0000-4000-8000-000000000001", MemberID: "m", ProjectID: "p", CommandID: "c"}
	o, err := kubebatch.NewRenderer(r).RenderJob(application.BatchJobSpec{Identity: id, Namespace: "project-a", ServiceAccount: "member-m", Image: testImage,
		WorkspaceClaim: "attempt-7d1f0000-0000-4000-8000-000000000001-ws", Demand: map[string]int64{"cpu": 500, "memory": 1 << 30}, TimeLimitSeconds: 60, Argv: []string{"true"}})
	add("Job", o, err)
	as := appSpec()
	as.Verify = verify
	o, err = kubeapp.NewRenderer(r).RenderDeployment(as)
	add("Deployment", o, err)
	o, err = kubeinference.NewRenderer(r).RenderInferenceService(application.InferenceServiceSpec{Identity: id, Namespace: "project-a", ServiceAccount: "member-m",
		DeploymentMode: application.DeploymentModeStandard, ModelFormat: "huggingface", Runtime: "kserve-huggingfaceserver", Args: []string{"--model_id=x"},
		Demand: map[string]int64{"cpu": 1000, "memory": 1 << 30}, WorkspaceClaim: "attempt-7d1f0000-0000-4000-8000-000000000001-ws", Verify: verify})
	add("InferenceService", o, err)
	o, err = r.RenderHelper(helperSpec())
	add("helper", o, err)
	o, err = r.RenderReader(readerSpec("kwok-node-0"))
	add("reader", o, err)
	return out
}

// renderedPodSpec decodes the Pod spec an object of renderedPods runs (for an
// InferenceService: the predictor's Pod part and its containers, the model
// container last).
func renderedPodSpec(t *testing.T, o application.NativeObject) corev1.PodSpec {
	t.Helper()
	switch o.Kind {
	case domain.KindJob:
		var j batchv1.Job
		mustDecode(t, o.Spec, &j)
		return j.Spec.Template.Spec
	case domain.KindDeployment:
		var d appsv1.Deployment
		mustDecode(t, o.Spec, &d)
		return d.Spec.Template.Spec
	case domain.KindInferenceService:
		var i kservev1beta1.InferenceService
		mustDecode(t, o.Spec, &i)
		p := i.Spec.Predictor
		return corev1.PodSpec{SecurityContext: p.SecurityContext, InitContainers: p.InitContainers, Containers: append(p.Containers, p.Model.Container)}
	}
	var p corev1.Pod
	mustDecode(t, o.Spec, &p)
	return p.Spec
}

func mustDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// Every Pod the Runtime renders carries Pod Security restricted's fields:
// runAsNonRoot and the RuntimeDefault seccomp profile on the Pod, no
// privilege escalation and every capability dropped on each container
// (init containers too); no user or group by default (member images keep
// their own), the Site's --pod-run-as-user and --pod-fs-group on the
// member workloads only; the helper's fsGroup 65532, the reader's none.
// No cluster.
func TestEveryRenderedPodCarriesTheRestrictedFieldsAndOnlyTheSitesUsers(t *testing.T) {
	for _, users := range []kube.Users{{}, {RunAsUser: 1000, FSGroup: 2000}} {
		r := kube.NewRenderer(nil, nil)
		r.Users = users
		for name, o := range renderedPods(t, r) {
			if missing, err := kube.RestrictedShortfall(o.Kind, o.Spec); err != nil || missing != "" {
				t.Fatalf("%s (users %+v): missing %q (%v)", name, users, missing, err)
			}
			pod := renderedPodSpec(t, o)
			sc := pod.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Fatalf("%s: Pod securityContext %+v", name, sc)
			}
			if pod.HostNetwork || pod.HostPID || pod.HostIPC || pod.HostUsers != nil {
				t.Fatalf("%s shares a host namespace", name)
			}
			for _, v := range pod.Volumes {
				if v.HostPath != nil {
					t.Fatalf("%s mounts a host path", name)
				}
			}
			containers := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
			for _, c := range containers {
				cs := c.SecurityContext
				if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Capabilities == nil ||
					len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" || len(cs.Capabilities.Add) != 0 || cs.Privileged != nil || cs.RunAsUser != nil {
					t.Fatalf("%s container %s: securityContext %+v", name, c.Name, cs)
				}
			}
			var user, group int64
			if sc.RunAsUser != nil {
				user = *sc.RunAsUser
			}
			if sc.FSGroup != nil {
				group = *sc.FSGroup
			}
			switch name {
			case "helper":
				if user != 0 || group != kube.HelperGroupID {
					t.Fatalf("helper: runAsUser %d fsGroup %d; want none and %d", user, group, kube.HelperGroupID)
				}
			case "reader":
				if user != 0 || group != 0 {
					t.Fatalf("reader: runAsUser %d fsGroup %d; want neither", user, group)
				}
			default:
				if user != users.RunAsUser || group != users.FSGroup {
					t.Fatalf("%s: runAsUser %d fsGroup %d; the Site's are %+v", name, user, group, users)
				}
			}
		}
	}
}

// The specifications the earlier Runtime saved (testdata/before-restricted)
// lack the restricted fields, and RestrictedShortfall names the first one
// (the Service has no Pods); a current rendering with one container's
// field taken away is named too. No cluster.
func TestRestrictedShortfallNamesWhatASavedSpecificationLacks(t *testing.T) {
	for file, kind := range map[string]string{"job.json": domain.KindJob, "deployment.json": domain.KindDeployment, "inferenceservice.json": domain.KindInferenceService,
		"helper.json": domain.KindPod, "reader.json": domain.KindPod, "service.json": domain.KindService} {
		b, err := os.ReadFile(filepath.Join("testdata", "before-restricted", file))
		if err != nil {
			t.Fatal(err)
		}
		missing, err := kube.RestrictedShortfall(kind, bytes.TrimSpace(b))
		switch {
		case err != nil:
			t.Fatalf("%s: %v", file, err)
		case kind == domain.KindService && missing != "":
			t.Fatalf("a Service has no Pods, but %q is missing", missing)
		case kind != domain.KindService && !strings.Contains(missing, "securityContext.runAsNonRoot"):
			t.Fatalf("%s: missing %q, want the Pod's runAsNonRoot first", file, missing)
		}
	}
	o := renderedPods(t, kube.NewRenderer(nil, nil))["Deployment"]
	var d appsv1.Deployment
	mustDecode(t, o.Spec, &d)
	d.Spec.Template.Spec.InitContainers[0].SecurityContext.Capabilities = nil
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if missing, _ := kube.RestrictedShortfall(domain.KindDeployment, b); missing != "spec.template.spec container "+kube.VerifyContainerName+": securityContext.capabilities.drop" {
		t.Fatalf("missing %q", missing)
	}
	if _, err := kube.RestrictedShortfall(domain.KindJob, []byte("{")); err == nil {
		t.Fatal("a specification that does not decode was judged")
	}
}
