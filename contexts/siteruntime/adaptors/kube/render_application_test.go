package kube_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeapp "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

const appImage = "registry.example/app@sha256:2222222222222222222222222222222222222222222222222222222222222222"

func appSpec() application.ApplicationServiceSpec {
	return application.ApplicationServiceSpec{
		Identity:  application.ObjectIdentity{RunID: "r", AttemptID: "7d1f0000-0000-4000-8000-000000000002", MemberID: "m", ProjectID: "p", CommandID: "c"},
		Namespace: "project-a", ServiceAccount: "member-m", Image: appImage, Port: 8080,
		Readiness:      &siteprotocol.Readiness{Path: "/healthz", InitialDelaySeconds: 2, PeriodSeconds: 5},
		Demand:         map[string]int64{"cpu": 500, "memory": 256 << 20},
		WorkspaceClaim: "attempt-7d1f0000-0000-4000-8000-000000000002-ws", ProgressDeadlineSeconds: 600,
	}
}

// The Deployment and the Service carry the native rules of
// docs/site-runtime.md#application-services-on-kubernetes, and render the
// same bytes every time. No cluster: the API server is not involved.
func TestRenderedApplicationServiceIsDeterministicAndCarriesTheNativeRules(t *testing.T) {
	r := scheduled()
	r.ServicePodAnnotations = map[string]string{"example.org/hint": "x"}
	d, err := kubeapp.NewRenderer(r).RenderDeployment(appSpec())
	if err != nil {
		t.Fatal(err)
	}
	s, err := kubeapp.NewRenderer(r).RenderService(appSpec())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		d2, _ := kubeapp.NewRenderer(r).RenderDeployment(appSpec())
		s2, _ := kubeapp.NewRenderer(r).RenderService(appSpec())
		if string(d2.Spec) != string(d.Spec) || string(s2.Spec) != string(s.Spec) {
			t.Fatal("two renderings of the same input differ")
		}
	}
	var dep appsv1.Deployment
	if err := json.Unmarshal(d.Spec, &dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	switch {
	case d.Kind != "Deployment" || d.Name != "attempt-7d1f0000-0000-4000-8000-000000000002" || dep.Labels[kube.LabelAttempt] != "7d1f0000-0000-4000-8000-000000000002":
		t.Fatalf("identity %s %s %v", d.Kind, d.Name, dep.Labels)
	case *dep.Spec.Replicas != 1 || *dep.Spec.ProgressDeadlineSeconds != 600:
		t.Fatalf("replicas %d, progress deadline %d", *dep.Spec.Replicas, *dep.Spec.ProgressDeadlineSeconds)
	case len(dep.Spec.Selector.MatchLabels) != 5 || dep.Spec.Template.Labels[kube.LabelMember] != "m" || dep.Spec.Template.Annotations["example.org/hint"] != "x":
		t.Fatalf("selector %v, template labels %v", dep.Spec.Selector, dep.Spec.Template.Labels)
	case pod.ServiceAccountName != "member-m" || *pod.AutomountServiceAccountToken || pod.NodeSelector["pool.example.org/batch"] != "true" || len(pod.Tolerations) != 2:
		t.Fatalf("pod %+v", pod)
	case c.Image != appImage || c.Ports[0].ContainerPort != 8080 || c.ReadinessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Port.IntVal != 8080 ||
		c.ReadinessProbe.InitialDelaySeconds != 2 || c.ReadinessProbe.PeriodSeconds != 5:
		t.Fatalf("container %+v", c)
	case c.Resources.Requests.Cpu().MilliValue() != 500 || c.Resources.Limits.Memory().Value() != 256<<20 || !c.Resources.Limits.Cpu().Equal(*c.Resources.Requests.Cpu()):
		t.Fatalf("resources %v", c.Resources)
	case c.VolumeMounts[0].MountPath != "/workspace" || pod.Volumes[0].PersistentVolumeClaim.ClaimName != appSpec().WorkspaceClaim:
		t.Fatalf("workspace %v %v", c.VolumeMounts, pod.Volumes)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Fatalf("selector %s=%s is not a template label", k, v)
		}
	}
	var svc corev1.Service
	if err := json.Unmarshal(s.Spec, &svc); err != nil {
		t.Fatal(err)
	}
	switch {
	case s.Kind != "Service" || s.Name != d.Name || svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.ExternalIPs) != 0 || svc.Spec.ExternalName != "":
		t.Fatalf("service %+v", svc)
	case len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.IntVal != 8080:
		t.Fatalf("ports %+v", svc.Spec.Ports)
	}
	if len(svc.Spec.Selector) != len(dep.Spec.Template.Labels) {
		t.Fatalf("the Service selects %v, the Pods carry %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	for k, v := range dep.Spec.Template.Labels {
		if svc.Spec.Selector[k] != v {
			t.Fatalf("the Service selects %v, the Pods carry %v", svc.Spec.Selector, dep.Spec.Template.Labels)
		}
	}
	other := appSpec()
	other.ProgressDeadlineSeconds = 30
	if o, _ := kubeapp.NewRenderer(r).RenderDeployment(other); siteprotocol.Digest(o.Spec) == siteprotocol.Digest(d.Spec) {
		t.Fatal("the progress deadline is not part of the specification")
	}
	noProbe := appSpec()
	noProbe.Readiness = nil
	if o, _ := kubeapp.NewRenderer(r).RenderDeployment(noProbe); strings.Contains(string(o.Spec), "readinessProbe") {
		t.Fatalf("no readiness asked, one rendered: %s", o.Spec)
	}
	gpu := appSpec()
	gpu.Demand["gpu.amd"] = 1
	if _, err := kubeapp.NewRenderer(r).RenderDeployment(gpu); !errors.Is(err, application.ErrUnsupportedDemand) {
		t.Fatalf("gpu.amd without configuration: %v", err)
	}
}

// liveDeployment returns the rendered Deployment as the API server returns
// it: the digest stamped on it and its Pod template, server defaults, a
// quantity spelled its way, status.
func liveDeployment(t *testing.T, obj application.NativeObject, edit func(m map[string]any)) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(obj.Spec, &m); err != nil {
		t.Fatal(err)
	}
	digest := siteprotocol.Digest(obj.Spec)
	meta := m["metadata"].(map[string]any)
	meta["uid"], meta["generation"] = "u-1", 1
	meta["annotations"] = map[string]any{kube.AnnotationSpecDigest: digest, "deployment.kubernetes.io/revision": "1"}
	spec := m["spec"].(map[string]any)
	spec["revisionHistoryLimit"], spec["strategy"] = 10, map[string]any{"type": "RollingUpdate"}
	tmpl := spec["template"].(map[string]any)
	tm := tmpl["metadata"].(map[string]any)
	ann, _ := tm["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[kube.AnnotationSpecDigest] = digest
	tm["annotations"] = ann
	pod := tmpl["spec"].(map[string]any)
	pod["dnsPolicy"], pod["restartPolicy"], pod["terminationGracePeriodSeconds"] = "ClusterFirst", "Always", 30
	c := pod["containers"].([]any)[0].(map[string]any)
	c["imagePullPolicy"], c["terminationMessagePath"] = "IfNotPresent", "/dev/termination-log"
	c["resources"].(map[string]any)["requests"].(map[string]any)["cpu"] = "0.5"
	if p, ok := c["readinessProbe"].(map[string]any); ok {
		p["timeoutSeconds"], p["successThreshold"], p["failureThreshold"] = 1, 1, 3
		p["httpGet"].(map[string]any)["scheme"] = "HTTP"
	}
	m["status"] = map[string]any{"replicas": 1}
	if edit != nil {
		edit(m)
	}
	return m
}

func podSpecOf(m map[string]any) map[string]any {
	return m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
}

// Recovery's comparison names every changed rendered field of a
// Deployment or Service (image, resources, service account, volumes, port,
// readiness probe, progress deadline, scheduling, selector, the digest on
// the Pod template) and ignores server defaults. No cluster involved.
func TestMismatchNamesEachChangedFieldOfADeploymentAndAService(t *testing.T) {
	r := scheduled()
	d, err := kubeapp.NewRenderer(r).RenderDeployment(appSpec())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := kube.Mismatch(d.Spec, liveDeployment(t, d, nil)); err != nil || m != "" {
		t.Fatalf("the Deployment as the server returns it: %q %v", m, err)
	}
	for field, edit := range map[string]func(map[string]any){
		"image": func(m map[string]any) { container0(m)["image"] = "other" },
		"resources": func(m map[string]any) {
			container0(m)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "1Gi"
		},
		"serviceAccountName": func(m map[string]any) {
			podSpecOf(m)["serviceAccountName"] = "member-other"
		},
		"volumes": func(m map[string]any) {
			podSpecOf(m)["volumes"] = append(podSpecOf(m)["volumes"].([]any), map[string]any{"name": "x", "emptyDir": map[string]any{}})
		},
		"containerPort": func(m map[string]any) { container0(m)["ports"].([]any)[0].(map[string]any)["containerPort"] = 9090 },
		"readinessProbe.httpGet.path": func(m map[string]any) {
			container0(m)["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"] = "/"
		},
		"readinessProbe.periodSeconds": func(m map[string]any) {
			delete(container0(m)["readinessProbe"].(map[string]any), "periodSeconds")
		},
		"progressDeadlineSeconds": func(m map[string]any) { m["spec"].(map[string]any)["progressDeadlineSeconds"] = 60 },
		"nodeSelector":            func(m map[string]any) { delete(podSpecOf(m), "nodeSelector") },
		"tolerations":             func(m map[string]any) { podSpecOf(m)["tolerations"] = podSpecOf(m)["tolerations"].([]any)[:1] },
		"selector": func(m map[string]any) {
			m["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{kube.LabelAttempt: "x"}}
		},
		"replicas": func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = 2 },
		"spec.template.metadata.annotations": func(m map[string]any) {
			delete(m["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any), kube.AnnotationSpecDigest)
		},
	} {
		m, err := kube.Mismatch(d.Spec, liveDeployment(t, d, edit))
		if err != nil || m == "" {
			t.Errorf("%s changed: no mismatch (%v)", field, err)
		} else if !strings.Contains(m, strings.Split(field, ".")[0]) {
			t.Errorf("%s changed: mismatch %q does not name it", field, m)
		}
	}

	s, err := kubeapp.NewRenderer(r).RenderService(appSpec())
	if err != nil {
		t.Fatal(err)
	}
	liveService := func(edit func(map[string]any)) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(s.Spec, &m); err != nil {
			t.Fatal(err)
		}
		m["metadata"].(map[string]any)["annotations"] = map[string]any{kube.AnnotationSpecDigest: siteprotocol.Digest(s.Spec)}
		spec := m["spec"].(map[string]any)
		spec["clusterIP"], spec["clusterIPs"], spec["sessionAffinity"], spec["ipFamilies"] = "10.0.0.7", []any{"10.0.0.7"}, "None", []any{"IPv4"}
		if edit != nil {
			edit(m)
		}
		return m
	}
	if m, err := kube.Mismatch(s.Spec, liveService(nil)); err != nil || m != "" {
		t.Fatalf("the Service as the server returns it: %q %v", m, err)
	}
	for field, edit := range map[string]func(map[string]any){
		"selector": func(m map[string]any) {
			delete(m["spec"].(map[string]any)["selector"].(map[string]any), kube.LabelCommand)
		},
		"ports": func(m map[string]any) { m["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] = 80 },
		"type":  func(m map[string]any) { m["spec"].(map[string]any)["type"] = "NodePort" },
	} {
		m, err := kube.Mismatch(s.Spec, liveService(edit))
		if err != nil || m == "" {
			t.Errorf("Service %s changed: no mismatch (%v)", field, err)
		} else if !strings.Contains(m, field) {
			t.Errorf("Service %s changed: mismatch %q does not name it", field, m)
		}
	}
}

// The one omitted-default exception (docs/site-runtime.md#the-spec-comparison): a saved readiness probe with
// initialDelaySeconds 0, which the API server omits, is accepted when the
// live probe lacks the field; a nonzero delay that is missing, another
// missing probe field, or another delay still fails. No cluster involved.
func TestMismatchAcceptsOnlyTheOmittedZeroInitialDelayOfAReadinessProbe(t *testing.T) {
	withDelay := func(delay string) application.NativeObject {
		d, err := kubeapp.NewRenderer(kube.NewRenderer(nil, nil)).RenderDeployment(appSpec())
		if err != nil {
			t.Fatal(err)
		}
		// A saved specification that spells the zero delay out (as an
		// earlier rendering did); the Kubernetes types omit it.
		d.Spec = []byte(strings.Replace(string(d.Spec), `"initialDelaySeconds":2`, `"initialDelaySeconds":`+delay, 1))
		if !strings.Contains(string(d.Spec), `"initialDelaySeconds":`+delay) {
			t.Fatalf("no delay in %s", d.Spec)
		}
		return d
	}
	dropDelay := func(m map[string]any) {
		delete(container0(m)["readinessProbe"].(map[string]any), "initialDelaySeconds")
	}
	zero := withDelay("0")
	if m, err := kube.Mismatch(zero.Spec, liveDeployment(t, zero, dropDelay)); err != nil || m != "" {
		t.Fatalf("initialDelaySeconds 0 omitted by the server: %q %v", m, err)
	}
	five := withDelay("5")
	if m, _ := kube.Mismatch(five.Spec, liveDeployment(t, five, dropDelay)); !strings.Contains(m, "initialDelaySeconds") {
		t.Fatalf("a missing nonzero delay: %q", m)
	}
	if m, _ := kube.Mismatch(zero.Spec, liveDeployment(t, zero, func(m map[string]any) {
		container0(m)["readinessProbe"].(map[string]any)["initialDelaySeconds"] = 3
	})); !strings.Contains(m, "initialDelaySeconds") {
		t.Fatalf("another delay: %q", m)
	}
	if m, _ := kube.Mismatch(zero.Spec, liveDeployment(t, zero, func(m map[string]any) {
		dropDelay(m)
		delete(container0(m)["readinessProbe"].(map[string]any), "periodSeconds")
	})); !strings.Contains(m, "periodSeconds") {
		t.Fatalf("another missing probe field: %q", m)
	}
	if m, _ := kube.Mismatch(zero.Spec, liveDeployment(t, zero, func(m map[string]any) {
		delete(container0(m)["ports"].([]any)[0].(map[string]any), "containerPort")
	})); !strings.Contains(m, "containerPort") {
		t.Fatalf("a missing port: %q", m)
	}
}
