package policytest

import (
	"errors"
	"io"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pharos-metallo/metallo/app"
	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/installation"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
)

var pinned = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// one finds the only object of kind and name and converts it to T.
func one[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("deploy/runtime has no %s %s", kind, name)
	return nil
}

// environment is what the container's process sees as METALLO_* variables: its env and the
// ConfigMaps of its envFrom.
func environment(t *testing.T, objs []*unstructured.Unstructured, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			t.Fatalf("container %s: envFrom other than a ConfigMap", c.Name)
		}
		for k, v := range one[corev1.ConfigMap](t, objs, "ConfigMap", from.ConfigMapRef.Name).Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// command finds a metallo subcommand (e.g. "runtime", "install").
func command(t *testing.T, path ...string) *cobra.Command {
	t.Helper()
	root := app.NewRootCommand(app.Env{Stdout: io.Discard, Stderr: io.Discard})
	cmd, rest, err := root.Find(path)
	if err != nil || len(rest) > 0 {
		t.Fatalf("metallo %v: %v %v", path, err, rest)
	}
	return cmd
}

// configures checks that every METALLO_* variable of env is a flag of cmd (except the shared
// ConfigMap's, which other commands read), and that the required flags have one.
func configures(t *testing.T, what string, cmd *cobra.Command, env map[string]string, shared map[string]bool, required ...string) {
	t.Helper()
	flags := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { flags[config.EnvName(f.Name)] = true })
	for k := range env {
		if !flags[k] && !shared[k] {
			t.Errorf("%s: %s names no flag of `%s`", what, k, cmd.CommandPath())
		}
	}
	for _, r := range required {
		if env[config.EnvName(r)] == "" {
			t.Errorf("%s: nothing sets --%s (%s)", what, r, config.EnvName(r))
		}
	}
}

// The Runtime's base: one replica, strategy Recreate, the service account runtime-k8s, `metallo
// serve --role runtime` with every flag it requires set (and no variable that names no flag), its
// journals on the claim, a liveness probe running `metallo runtime liveness` against the same
// heartbeat, the install hook on the same volume, and every image pinned by digest.
func TestRuntimeBaseRunsOneRecreatedReplicaWithPinnedImagesAndItsHooks(t *testing.T) {
	objs := build(t, repo("deploy", "runtime"))
	for _, o := range objs {
		if o.GetKind() != "Namespace" && o.GetNamespace() != runtimeNamespace {
			t.Errorf("%s %s in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), runtimeNamespace)
		}
	}
	one[corev1.ServiceAccount](t, objs, "ServiceAccount", runtimeAccount)
	d := one[appsv1.Deployment](t, objs, "Deployment", "metallo-runtime")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("Deployment: want 1 replica with strategy Recreate, got %v %s", d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != runtimeAccount || len(pod.Containers) != 1 {
		t.Fatalf("Deployment: want one container as %s, got %q with %d", runtimeAccount, pod.ServiceAccountName, len(pod.Containers))
	}
	c := pod.Containers[0]
	if !pinned.MatchString(c.Image) {
		t.Errorf("Deployment image %s is not pinned by digest", c.Image)
	}
	if got := append(slices.Clone(c.Command), c.Args...); !slices.Equal(got, []string{"metallo", "serve", "--role", "runtime"}) {
		t.Errorf("Deployment runs %v", got)
	}
	env := environment(t, objs, c)
	configures(t, "serve", command(t, "serve"), env, nil,
		"environment", "authority", "token-file", "journal-dir", "batch-image", "permissions", "repository-grants", "installation-record", "heartbeat-file")
	// The providers are chosen explicitly and parse (the base names placeholders, never a default).
	if _, err := siteruntime.ParsePermissions(env["METALLO_PERMISSIONS"]); err != nil {
		t.Errorf("METALLO_PERMISSIONS %q: %v", env["METALLO_PERMISSIONS"], err)
	}
	if src, err := siteruntime.ParseRepositoryGrants(env["METALLO_REPOSITORY_GRANTS"]); err != nil || src.Kind != "http" {
		t.Errorf("METALLO_REPOSITORY_GRANTS %q: want the http: provider (%v)", env["METALLO_REPOSITORY_GRANTS"], err)
	}
	if !pinned.MatchString(env["METALLO_BATCH_IMAGE"]) {
		t.Errorf("METALLO_BATCH_IMAGE %s is not pinned by digest", env["METALLO_BATCH_IMAGE"])
	}
	if rec, err := installation.ParseLocation(env["METALLO_INSTALLATION_RECORD"]); err != nil || rec.Kind != installation.KindConfigMap || rec.Namespace != runtimeNamespace {
		t.Errorf("METALLO_INSTALLATION_RECORD %q: want a ConfigMap in %s (%v)", env["METALLO_INSTALLATION_RECORD"], runtimeNamespace, err)
	}
	probe := c.LivenessProbe
	if probe == nil || probe.Exec == nil || !slices.Equal(probe.Exec.Command, []string{"metallo", "runtime", "liveness"}) {
		t.Errorf("Deployment liveness probe: %+v", probe)
	}
	configures(t, "liveness", command(t, "runtime", "liveness"), map[string]string{"METALLO_HEARTBEAT_FILE": env["METALLO_HEARTBEAT_FILE"]}, nil, "heartbeat-file")
	mounts := func(spec corev1.PodSpec, c corev1.Container, path string) bool {
		for _, m := range c.VolumeMounts {
			for _, v := range spec.Volumes {
				if m.Name == v.Name && m.MountPath == path && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "metallo-runtime-journals" {
					return true
				}
			}
		}
		return false
	}
	if !mounts(pod, c, env["METALLO_JOURNAL_DIR"]) {
		t.Errorf("Deployment: the journal claim is not mounted at METALLO_JOURNAL_DIR %q", env["METALLO_JOURNAL_DIR"])
	}
	one[corev1.PersistentVolumeClaim](t, objs, "PersistentVolumeClaim", "metallo-runtime-journals")

	j := one[batchv1.Job](t, objs, "Job", "metallo-runtime-install")
	hook := j.Spec.Template.Spec
	if hook.ServiceAccountName != runtimeAccount || hook.RestartPolicy != corev1.RestartPolicyNever || len(hook.Containers) != 1 {
		t.Fatalf("install Job: %+v", hook)
	}
	ic := hook.Containers[0]
	if got := append(slices.Clone(ic.Command), ic.Args...); !slices.Equal(got, []string{"metallo", "runtime", "install"}) || !pinned.MatchString(ic.Image) {
		t.Errorf("install Job runs %v in %s", got, ic.Image)
	}
	ienv := environment(t, objs, ic)
	shared := map[string]bool{}
	for k := range one[corev1.ConfigMap](t, objs, "ConfigMap", "metallo-runtime").Data {
		shared[k] = true
	}
	configures(t, "install", command(t, "runtime", "install"), ienv, shared, "journal-dir", "environment", "authority", "installation-record")
	if !mounts(hook, ic, ienv["METALLO_JOURNAL_DIR"]) || ienv["METALLO_JOURNAL_DIR"] != env["METALLO_JOURNAL_DIR"] ||
		ienv["METALLO_INSTALLATION_RECORD"] != env["METALLO_INSTALLATION_RECORD"] {
		t.Errorf("install Job: must install the journals and record the Runtime uses: %v vs %v", ienv, env)
	}
}

// Every object of the Runtime's base is accepted by the real API server (server-side dry run,
// strict field validation), moved into the test's namespace.
func TestRuntimeBaseIsAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	applyRuntimeBase(t, kubetest.New(t), true)
}

// applyRuntimeBase applies the objects of deploy/runtime of the given kinds (all when none),
// moved into the test's namespace; dryRun only validates and admits them.
func applyRuntimeBase(t *testing.T, e *kubetest.Env, dryRun bool, kinds ...string) {
	t.Helper()
	a := newApplier(t, e.Config)
	c := ctx(t)
	for _, o := range buildInNamespace(t, repo("deploy", "runtime"), e.Namespace) {
		if len(kinds) > 0 && !slices.Contains(kinds, o.GetKind()) {
			continue
		}
		if err := a.apply(c, o, "metallo-policytest", dryRun); err != nil {
			t.Errorf("apply (dry run %v): %v", dryRun, err)
		}
	}
}

// The Runtime's Role in its namespace is enough for the ConfigMap installation record and no
// more: with its own token, runtime-k8s reads the absent record, creates it, reads it back and
// gets ErrRecordExists for a second one, and cannot read, list or change other ConfigMaps.
func TestRuntimeRoleCoversItsInstallationRecordOnly(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	c := ctx(t)
	applyRuntimeBase(t, e, false, "ServiceAccount", "Role", "RoleBinding")
	s := &site{e: e, namespace: e.Namespace}
	user := "system:serviceaccount:" + e.Namespace + ":" + runtimeAccount
	s.waitAllowed(t, user, authorizationv1.ResourceAttributes{Namespace: e.Namespace, Verb: "create", Resource: "configmaps"})
	rt := e.ClientFor(e.ServiceAccountConfig(e.Namespace, runtimeAccount))
	rec := installation.NewConfigMap(rt, e.Namespace, "runtime-installation")
	if got, err := rec.Read(c); err != nil || got != nil {
		t.Fatalf("read the absent record: %v %v", got, err)
	}
	want := domain.Installation{InstallationID: "0b0c7a52-8f55-4f8e-9d8c-3f3c2b3b2a10", Environment: "alpha-k8s", Authority: "https://site-api.example",
		InstalledAt: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Journals: domain.JournalFiles()}
	if err := rec.Create(c, want); err != nil {
		t.Fatalf("create the record: %v", err)
	}
	if got, err := rec.Read(c); err != nil || got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("read back: %+v %v", got, err)
	}
	if err := rec.Create(c, want); !errors.Is(err, application.ErrRecordExists) {
		t.Fatalf("second create: want ErrRecordExists, got %v", err)
	}
	other := installation.NewConfigMap(rt, e.Namespace, "another-record")
	if _, err := other.Read(c); !isRBACRefusal(err) {
		t.Errorf("reading another ConfigMap: want 403, got %v", err)
	}
	if _, err := rt.CoreV1().ConfigMaps(e.Namespace).List(c, metav1.ListOptions{}); !isRBACRefusal(err) {
		t.Errorf("listing ConfigMaps: want 403, got %v", err)
	}
	if err := rt.CoreV1().ConfigMaps(e.Namespace).Delete(c, "runtime-installation", metav1.DeleteOptions{}); !isRBACRefusal(err) {
		t.Errorf("deleting the record: want 403, got %v", err)
	}
}
