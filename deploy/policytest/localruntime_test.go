package policytest

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/runtimepod"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

// localRuntime builds deploy/localcluster/runtime through an overlay such as the demo's or a
// test's (placeholder digests, an authority on the bridge's host address, the CA and the grants
// as files) with runtimepod.Overlay, as the demo and the real-node tests of processtest do
// with real values.
func localRuntime(t *testing.T) (dir string, objs []*unstructured.Unstructured) {
	t.Helper()
	dir = t.TempDir()
	digest := "sha256:" + strings.Repeat("a", 64)
	objs, err := runtimepod.Overlay{Base: repo("deploy", "localcluster", "runtime"), Namespace: runtimeNamespace,
		Image: "localcluster.metallo.dev/runtime@" + digest, Environment: "alpha-k8s", Authority: "https://10.88.0.1:8443",
		BatchImage: "localcluster.metallo.dev/platform@" + digest, CAPEM: []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"),
		Policy: []byte("[]\n")}.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, objs
}

// The local cluster's overlay of the Runtime (deploy/localcluster/runtime): the Deployment and
// the install Job select and tolerate the real node; the Runtime trusts the Site API through
// --ca-file at the mounted CA, reads its permission provider and repository grants from the
// mounted ConfigMap, and puts every Pod it renders on the real node; every METALLO_* variable
// still names a flag of the command that reads it and every required flag is set.
func TestLocalClusterRuntimeOverlayRunsOnTheRealNodeWithItsCAAndPermissions(t *testing.T) {
	_, objs := localRuntime(t)
	d := one[appsv1.Deployment](t, objs, "Deployment", "metallo-runtime")
	j := one[batchv1.Job](t, objs, "Job", "metallo-runtime-install")
	for what, spec := range map[string]corev1.PodSpec{"Deployment": d.Spec.Template.Spec, "install Job": j.Spec.Template.Spec} {
		if spec.NodeSelector["localcluster.metallo.dev/real-node"] != "true" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "localcluster.metallo.dev/real-node" {
			t.Errorf("%s: not on the real node: %v %v", what, spec.NodeSelector, spec.Tolerations)
		}
		if img := spec.Containers[0].Image; !pinned.MatchString(img) || !strings.HasPrefix(img, "localcluster.metallo.dev/runtime@") {
			t.Errorf("%s: image %s", what, img)
		}
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := environment(t, objs, c)
	configures(t, "serve", command(t, "serve"), env, nil,
		"environment", "authority", "token-file", "journal-dir", "batch-image", "permissions", "repository-grants", "installation-record", "heartbeat-file", "ca-file")
	mountedFrom := func(path string) string { // the ConfigMap whose volume holds path
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(path, m.MountPath+"/") {
				for _, v := range pod.Volumes {
					if v.Name == m.Name && v.ConfigMap != nil {
						return v.ConfigMap.Name
					}
				}
			}
		}
		return ""
	}
	// The files exist only in the Pod, so the providers' kinds are checked here, their files'
	// volumes below (siteruntime.ParsePermissions reads the file).
	if !strings.HasPrefix(env["METALLO_PERMISSIONS"], "policy:") || !strings.HasPrefix(env["METALLO_REPOSITORY_GRANTS"], "file:") {
		t.Errorf("providers %q %q: want policy: and file:", env["METALLO_PERMISSIONS"], env["METALLO_REPOSITORY_GRANTS"])
	}
	for variable, cm := range map[string]string{
		"METALLO_CA_FILE":           "metallo-site-api-ca",
		"METALLO_PERMISSIONS":       "metallo-runtime-permissions",
		"METALLO_REPOSITORY_GRANTS": "metallo-runtime-permissions",
	} {
		_, path, _ := strings.Cut(env[variable], ":")
		if variable == "METALLO_CA_FILE" {
			path = env[variable]
		}
		got := mountedFrom(path)
		if !strings.HasPrefix(got, cm) {
			t.Errorf("%s=%s: the file is not in a volume of ConfigMap %s (found %q)", variable, env[variable], cm, got)
		}
		found := false
		for _, o := range objs {
			found = found || (o.GetKind() == "ConfigMap" && o.GetName() == got)
		}
		if !found {
			t.Errorf("%s: the ConfigMap %q the volume names is not rendered", variable, got)
		}
	}
	if env["METALLO_POD_NODE_SELECTOR"] != "localcluster.metallo.dev/real-node=true" || env["METALLO_POD_TOLERATIONS"] != "localcluster.metallo.dev/real-node=true:NoSchedule" {
		t.Errorf("the Runtime's rendered Pods are not put on the real node: %q %q", env["METALLO_POD_NODE_SELECTOR"], env["METALLO_POD_TOLERATIONS"])
	}
}

// Every object of the local cluster's overlay is accepted by the real API server (server-side
// dry run, strict field validation), moved into the test's namespace.
func TestLocalClusterRuntimeOverlayIsAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	dir, _ := localRuntime(t)
	a := newApplier(t, e.Config)
	c := ctx(t)
	for _, o := range buildInNamespace(t, dir, e.Namespace) {
		if err := a.apply(c, o, "metallo-policytest", true); err != nil {
			t.Errorf("apply (dry run): %v", err)
		}
	}
}
