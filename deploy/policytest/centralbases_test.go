package policytest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/servingtls"
)

// centralBase is one central role's kustomize base and the serve flags it must set.
type centralBase struct {
	role, dir, namespace, name string
	// files are the flags naming files that must come from a Secret mounted as a directory.
	files    []string
	required []string
}

var centralBases = []centralBase{
	{role: "provisioning", dir: "provisioning", namespace: "metallo-provisioning", name: "metallo-provisioning",
		files:    []string{"tls-cert-file", "tls-key-file", "keys-file", "environments-file"},
		required: []string{"listen", "admin-listen", "tls-cert-file", "tls-key-file", "keys-file", "environments-file", "provisioning-database-url", "waldur-instance"}},
	{role: "execution", dir: "execution", namespace: "metallo-execution", name: "metallo-execution",
		files: []string{"tls-cert-file", "tls-key-file", "keys-file", "environments-file", "provisioning-key-file", "provisioning-ca-file"},
		required: []string{"listen", "admin-listen", "tls-cert-file", "tls-key-file", "keys-file", "execution-database-url",
			"resource-owner", "provisioning-url", "provisioning-key-file", "environments-file"}},
}

// processEnv is what a container's process sees: env values, the ConfigMaps of its envFrom, and
// for a variable from a Secret "secret:<name>/<key>".
func processEnv(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) map[string]string {
	t.Helper()
	env := environment(t, objs, corev1.Container{Name: c.Name, EnvFrom: c.EnvFrom})
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		default:
			t.Errorf("container %s: %s from neither a value nor a Secret", c.Name, e.Name)
		}
	}
	return env
}

// secretDir reports whether path's directory is a whole Secret volume mounted read-only (not
// a subPath, which would never see a rotated Secret).
func secretDir(spec corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != filepath.Dir(path) || m.SubPath != "" || !m.ReadOnly {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}

// Each central role's base: two replicas of `metallo serve --role <role>` with every flag it
// requires (and no variable that names no flag), both listeners off loopback and therefore over
// TLS, the TLS pair, keys and other credentials from Secrets mounted as directories, the database
// URL from a Secret, HTTPS probes on /readyz and /healthz, a Service of the public port only
// (never the admin one), a PodDisruptionBudget that keeps one replica, and a migration Job
// running `metallo migrate --role <role>` on the same database; every image pinned by digest.
func TestCentralRoleBasesRunTwoReplicasOverTLSWithSecretsProbesAndAMigrationJob(t *testing.T) {
	for _, b := range centralBases {
		t.Run(b.role, func(t *testing.T) {
			objs := build(t, repo("deploy", b.dir))
			for _, o := range objs {
				if o.GetKind() != "Namespace" && o.GetNamespace() != b.namespace {
					t.Errorf("%s %s in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), b.namespace)
				}
			}
			sa := one[corev1.ServiceAccount](t, objs, "ServiceAccount", b.name)
			d := one[appsv1.Deployment](t, objs, "Deployment", b.name)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("Deployment: want 2 replicas, got %v", d.Spec.Replicas)
			}
			pod := d.Spec.Template.Spec
			if pod.ServiceAccountName != sa.Name || len(pod.Containers) != 1 {
				t.Fatalf("Deployment: want one container as %s, got %q with %d", sa.Name, pod.ServiceAccountName, len(pod.Containers))
			}
			c := pod.Containers[0]
			if !pinned.MatchString(c.Image) {
				t.Errorf("Deployment image %s is not pinned by digest", c.Image)
			}
			if got := append(slices.Clone(c.Command), c.Args...); !slices.Equal(got, []string{"metallo", "serve", "--role", b.role}) {
				t.Errorf("Deployment runs %v", got)
			}
			env := processEnv(t, objs, c)
			configures(t, "serve", command(t, "serve"), env, nil, b.required...)
			tlsFiles := servingtls.Files{CertFile: env["METALLO_TLS_CERT_FILE"], KeyFile: env["METALLO_TLS_KEY_FILE"]}
			for _, l := range []string{"listen", "admin-listen"} {
				addr := env[config.EnvName(l)]
				if servingtls.Loopback(addr) {
					t.Errorf("--%s %s: a loopback address cannot be reached from the cluster", l, addr)
				}
				if err := servingtls.CheckListen(l, addr, tlsFiles); err != nil {
					t.Errorf("serve would refuse --%s %s: %v", l, addr, err)
				}
			}
			for _, f := range b.files {
				if p := env[config.EnvName(f)]; !secretDir(pod, c, p) {
					t.Errorf("--%s %s is not in a Secret mounted read-only as its directory", f, p)
				}
			}
			dbFlag := b.role + "-database-url"
			dbVar := config.EnvName(dbFlag)
			if db := env[dbVar]; !strings.HasPrefix(db, "secret:") {
				t.Errorf("%s is %q, want it from a Secret", dbVar, db)
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["https"] == 0 || ports["admin"] == 0 {
				t.Errorf("container ports %v: want https and admin", ports)
			}
			for probe, path := range map[*corev1.Probe]string{c.ReadinessProbe: "/readyz", c.LivenessProbe: "/healthz"} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "https" || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("want an HTTPS probe of %s on port https, got %+v", path, probe)
				}
			}
			podLabels := labels.Set(d.Spec.Template.Labels)

			svc := one[corev1.Service](t, objs, "Service", b.name)
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
				t.Errorf("Service selector %v does not select the Pods %v", svc.Spec.Selector, podLabels)
			}
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.String() != "https" && p.TargetPort.IntValue() != int(ports["https"]) {
					t.Errorf("Service port %s targets %s: only the public API belongs in the Service", p.Name, p.TargetPort.String())
				}
			}
			if len(svc.Spec.Ports) != 1 {
				t.Errorf("Service ports %+v: want the public API only", svc.Spec.Ports)
			}

			pdb := one[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", b.name)
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector == nil ||
				!labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
				t.Errorf("PodDisruptionBudget: want minAvailable 1 of the Deployment's Pods, got %+v", pdb.Spec)
			}

			j := one[batchv1.Job](t, objs, "Job", b.name+"-migrate")
			hook := j.Spec.Template.Spec
			if hook.RestartPolicy != corev1.RestartPolicyNever || len(hook.Containers) != 1 {
				t.Fatalf("migration Job: %+v", hook)
			}
			mc := hook.Containers[0]
			if got := append(slices.Clone(mc.Command), mc.Args...); !slices.Equal(got, []string{"metallo", "migrate", "--role", b.role}) || !pinned.MatchString(mc.Image) {
				t.Errorf("migration Job runs %v in %s", got, mc.Image)
			}
			menv := processEnv(t, objs, mc)
			shared := map[string]bool{}
			for k := range one[corev1.ConfigMap](t, objs, "ConfigMap", b.name).Data {
				shared[k] = true
			}
			configures(t, "migrate", command(t, "migrate"), menv, shared, dbFlag)
			if menv[dbVar] != env[dbVar] {
				t.Errorf("migration Job migrates %s, the Deployment serves %s", menv[dbVar], env[dbVar])
			}
		})
	}
}

// Every object of each central role's base is accepted by the real API server (server-side
// dry run, strict field validation), moved into the test's namespace.
func TestCentralRoleBasesAreAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	a := newApplier(t, e.Config)
	c := ctx(t)
	for _, b := range centralBases {
		for _, o := range buildInNamespace(t, repo("deploy", b.dir), e.Namespace) {
			if err := a.apply(c, o, "metallo-policytest", true); err != nil {
				t.Errorf("%s: apply (dry run): %v", b.role, err)
			}
		}
	}
}
