package kube_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// beforeRestricted is the specification the earlier Runtime saved for
// file (testdata/before-restricted) as s's journal would hold it for the
// Attempt: the placeholders replaced with s's namespace, member, Project
// and account, the Attempt's identity (command the command that rendered
// it), its claim and credential, and image.
func (s *site) beforeRestricted(file, attempt, command, image string) []byte {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "before-restricted", file))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range [][2]string{
		{"ATTEMPT-ID", attempt}, {"RUN-ID", runOf(attempt)}, {"MEMBER-ID", s.member}, {"PROJECT-ID", s.project}, {"COMMAND-ID", command},
		{"NAMESPACE", s.ns}, {"ACCOUNT", s.account()}, {"CLAIM", domain.AttemptObjectName(attempt, domain.SuffixWorkspace)},
		{"CREDENTIAL", domain.AttemptObjectName(attempt, domain.SuffixCredential)}, {"IMAGE", image}, {"RUNTIME", kubetest.HuggingFaceRuntime},
	} {
		b = bytes.ReplaceAll(b, []byte(r[0]), []byte(r[1]))
	}
	return bytes.TrimSpace(b)
}

// oldPrepare makes an application Attempt look prepared by the earlier
// Runtime: a prepare by this one (the claim), whose saved Deployment and
// Service specifications are then the earlier render's, byte for byte.
func (s *site) oldPrepare(attempt string) (dep, svc []byte) {
	s.t.Helper()
	want(s.t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	recs, err := s.journal.Services().Records(testContext(s.t), attempt)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, kind := range []string{domain.KindDeployment, domain.KindService} {
		rec := *domain.FindRecord(recs, kind)
		rec.Spec = s.beforeRestricted(strings.ToLower(kind)+".json", attempt, rec.CommandID, serviceImage)
		rec.SpecDigest = ""
		if err := s.journal.Services().SaveRecord(testContext(s.t), rec); err != nil {
			s.t.Fatal(err)
		}
		if kind == domain.KindDeployment {
			dep = rec.Spec
		} else {
			svc = rec.Spec
		}
	}
	return dep, svc
}

// An Attempt prepared and started by the earlier Runtime (its saved
// specifications the earlier render's, without Pod Security restricted's
// fields), whose start was cut short after the creates, is adopted by
// recovery after the upgrade: the objects the earlier Runtime created are
// compared with the specifications saved for them and adopted with their
// UIDs; nothing is created again and the saved bytes stay as they were.
// A batch Job and an application Deployment and Service. Real: the API
// server; KWOK: the Node. The namespaces warn and audit restricted and
// enforce nothing (the objects are created as an earlier Runtime did,
// which the access policies would refuse from the administrator).
func TestRecoveryAdoptsObjectsRenderedBeforePodSecurityRestricted(t *testing.T) {
	t.Parallel()
	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own bound: a parallel subtest may wait for a slot
		s := newSite(t, siteOptions{noPolicy: true})
		attempt := uuid.NewString()
		want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
		p := s.command(siteprotocol.OpStart, attempt, startPayload(500, 60))
		spec := s.beforeRestricted("job.json", attempt, p.Command.ID, s.image)
		rec := domain.NativeRecord{AttemptID: attempt, Kind: domain.KindJob, Namespace: s.ns, Name: domain.AttemptObjectName(attempt, ""),
			Phase: domain.PhaseCreating, CommandID: p.Command.ID, Sequence: p.Sequence, Spec: spec}
		if err := s.journal.Batch().SaveRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		var job batchv1.Job
		mustDecode(t, spec, &job)
		job.Annotations = map[string]string{kube.AnnotationSpecDigest: siteprotocol.Digest(spec)}
		created, err := s.e.Client.BatchV1().Jobs(s.ns).Create(ctx, &job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.registry.Recover(ctx, p)
		if err != nil {
			t.Fatalf("recovery: %v", err)
		}
		r := s.result(p, a)
		want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
		if jobs := s.jobsOf(attempt); len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(created.UID) || len(jobs) != 1 || jobs[0].UID != created.UID {
			t.Fatalf("refs %+v, %d Jobs; want the earlier Runtime's Job %s adopted", r.NativeRefs, len(jobs), created.UID)
		}
		recs, err := s.journal.Batch().Records(ctx, attempt)
		if err != nil {
			t.Fatal(err)
		}
		if got := domain.FindRecord(recs, domain.KindJob); got == nil || got.Phase != domain.PhaseCreated || got.UID != string(created.UID) || !bytes.Equal(got.Spec, spec) {
			t.Fatalf("the Job's record %+v; want created with its UID and the saved bytes", got)
		}
	})
	t.Run("application", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own bound: a parallel subtest may wait for a slot
		s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true, scheduling: appScheduling}})
		attempt := uuid.NewString()
		depSpec, svcSpec := s.oldPrepare(attempt)
		p := s.command(siteprotocol.OpStart, attempt, nil)
		recs, err := s.journal.Services().Records(ctx, attempt)
		if err != nil {
			t.Fatal(err)
		}
		var uids []string
		for _, kind := range []string{domain.KindDeployment, domain.KindService} {
			rec := *domain.FindRecord(recs, kind)
			rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = domain.PhaseCreating, p.Command.ID, p.Sequence, ""
			if err := s.journal.Services().SaveRecord(ctx, rec); err != nil {
				t.Fatal(err)
			}
			digest := siteprotocol.Digest(rec.Spec)
			if kind == domain.KindDeployment {
				var dep appsv1.Deployment
				mustDecode(t, rec.Spec, &dep)
				dep.Annotations = map[string]string{kube.AnnotationSpecDigest: digest}
				dep.Spec.Template.Annotations = map[string]string{kube.AnnotationSpecDigest: digest}
				created, err := s.e.Client.AppsV1().Deployments(s.ns).Create(ctx, &dep, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				uids = append(uids, string(created.UID))
				continue
			}
			var svc corev1.Service
			mustDecode(t, rec.Spec, &svc)
			svc.Annotations = map[string]string{kube.AnnotationSpecDigest: digest}
			created, err := s.e.Client.CoreV1().Services(s.ns).Create(ctx, &svc, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			uids = append(uids, string(created.UID))
		}
		a, err := s.registry.Recover(ctx, p)
		if err != nil {
			t.Fatalf("recovery: %v", err)
		}
		r := s.result(p, a)
		want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
		deps, svcs := s.deploymentsOf(attempt), s.servicesOf(attempt)
		if len(r.NativeRefs) != 2 || r.NativeRefs[0].UID != uids[0] || r.NativeRefs[1].UID != uids[1] || len(deps) != 1 || len(svcs) != 1 {
			t.Fatalf("refs %+v, %d Deployments, %d Services; want the earlier Runtime's %v adopted", r.NativeRefs, len(deps), len(svcs), uids)
		}
		recs, err = s.journal.Services().Records(ctx, attempt)
		if err != nil {
			t.Fatal(err)
		}
		if d, v := domain.FindRecord(recs, domain.KindDeployment), domain.FindRecord(recs, domain.KindService); !bytes.Equal(d.Spec, depSpec) || !bytes.Equal(v.Spec, svcSpec) ||
			d.UID != uids[0] || v.UID != uids[1] {
			t.Fatalf("records %+v %+v; want the saved bytes with the adopted UIDs", d, v)
		}
	})
}

// The same for an inference Attempt: the InferenceService the earlier
// Runtime created from its saved specification (without the restricted
// fields) is adopted by recovery with its UID; nothing is created again.
// Real: the API server, KServe's webhooks and controller.
func TestRecoveryAdoptsAnInferenceServiceRenderedBeforePodSecurityRestricted(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{noPolicy: true}})
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	p := s.command(siteprotocol.OpStart, attempt, nil)
	recs, err := s.journal.Services().Records(ctx, attempt)
	if err != nil {
		t.Fatal(err)
	}
	rec := *domain.FindRecord(recs, domain.KindInferenceService)
	spec := s.beforeRestricted("inferenceservice.json", attempt, rec.CommandID, "")
	rec.Spec, rec.Phase, rec.CommandID, rec.Sequence, rec.SpecDigest = spec, domain.PhaseCreating, p.Command.ID, p.Sequence, ""
	if err := s.journal.Services().SaveRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	mustDecode(t, spec, &u.Object)
	u.SetAnnotations(map[string]string{kubeinference.AnnotationDeploymentMode: "Standard", kube.AnnotationSpecDigest: siteprotocol.Digest(spec)})
	created, err := s.e.Dynamic.Resource(kubetest.InferenceServiceResource).Namespace(s.ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.registry.Recover(ctx, p)
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	r := s.result(p, a)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	if len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != string(created.GetUID()) {
		t.Fatalf("refs %+v; want the earlier Runtime's InferenceService %s adopted", r.NativeRefs, created.GetUID())
	}
	recs, err = s.journal.Services().Records(ctx, attempt)
	if err != nil {
		t.Fatal(err)
	}
	if got := domain.FindRecord(recs, domain.KindInferenceService); got.UID != string(created.GetUID()) || !bytes.Equal(got.Spec, spec) {
		t.Fatalf("the record %+v; want the adopted UID and the saved bytes", got)
	}
}

// An application Attempt prepared by the earlier Runtime and not yet
// started is started as saved: in a namespace that warns and audits
// restricted (the first step of the order in deploy/cluster/README.md) its
// Deployment carries the saved specification's digest; in one that
// enforces restricted the start creates nothing and is refused
// pod-security-violation, naming the missing field. Real: the API server,
// RBAC, impersonation, the admission policies (guarded namespace).
func TestAStartOfASpecificationSavedBeforeRestrictedIsRefusedOnlyWhereRestrictedIsEnforced(t *testing.T) {
	t.Parallel()
	t.Run("warn and audit", func(t *testing.T) {
		t.Parallel()
		s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true, scheduling: appScheduling}})
		attempt := uuid.NewString()
		dep, _ := s.oldPrepare(attempt)
		want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
		deps := s.deploymentsOf(attempt)
		if len(deps) != 1 || deps[0].Annotations[kube.AnnotationSpecDigest] != siteprotocol.Digest(dep) || (deps[0].Spec.Template.Spec.SecurityContext != nil && deps[0].Spec.Template.Spec.SecurityContext.RunAsNonRoot != nil) {
			t.Fatalf("%d Deployments; want one created from the saved specification", len(deps))
		}
	})
	t.Run("enforce", func(t *testing.T) {
		t.Parallel()
		s := newAppSite(t, appOptions{siteOptions: siteOptions{scheduling: appScheduling}})
		attempt := uuid.NewString()
		s.oldPrepare(attempt)
		r := s.simple(siteprotocol.OpStart, attempt)
		want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonPodSecurityViolation)
		if !strings.Contains(r.Message, "securityContext.runAsNonRoot") || len(r.NativeRefs) != 0 {
			t.Fatalf("refusal %q with references %v", r.Message, r.NativeRefs)
		}
		if len(s.deploymentsOf(attempt)) != 0 || len(s.servicesOf(attempt)) != 0 {
			t.Fatal("something of the refused Attempt exists")
		}
		// A new Attempt renders the new shape and starts.
		fresh := uuid.NewString()
		want(t, s.prepareApp(fresh), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
		want(t, s.simple(siteprotocol.OpStart, fresh), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	})
}

// warnings collects the API server's warnings to one client.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.text
	w.text = nil
	return out
}

// Every Pod the Runtime renders passes Pod Security restricted: each one —
// the batch Job and its Pod, the application Deployment and its Pod (with
// workspace-verify), the workspace helper and reader, and the predictor
// Deployment KServe's controller made from a started InferenceService and
// its Pod — created as a server-side dry run
// in a namespace labelled warn: restricted draws no Pod Security warning,
// while the earlier render's Job does. The InferenceService itself is
// started through the Runtime in a namespace that enforces restricted.
// Real: the API server's Pod Security admission, KServe's controller;
// KWOK: the Node.
func TestEveryRenderedPodPassesPodSecurityRestrictedOnAServerSideDryRun(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := newIsvcSite(t, isvcOptions{})
	attempt := uuid.NewString()
	want(t, s.execute(s.command(siteprotocol.OpPrepare, attempt, isvcPrepare())), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	// Healthy: KServe's predictor Pods were admitted under enforcement.
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	live, err := s.e.Client.AppsV1().Deployments(s.ns).Get(ctx, domain.AttemptObjectName(attempt, "")+kubeinference.PredictorSuffix, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The dry runs' namespace: warn restricted, nothing else.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-dryrun-", Labels: map[string]string{kube.NamespacePodSecurityWarn: kube.PodSecurityRestricted}}}
	if ns, err = s.e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.e.Client.CoreV1().Namespaces().Delete(testContext(t), ns.Name, metav1.DeleteOptions{}) })
	if _, err := s.e.Client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "member-m"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &warnings{}
	cfg := rest.CopyConfig(s.e.Config)
	cfg.WarningHandler = w
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	pod := func(name string, spec corev1.PodSpec) *corev1.Pod {
		spec.ServiceAccountName = "member-m"
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name}, Spec: spec}
	}
	check := func(what string, create func() error) []string {
		t.Helper()
		if err := create(); err != nil {
			t.Fatalf("dry run of %s: %v", what, err)
		}
		var psa []string
		for _, text := range w.take() {
			if strings.Contains(text, "PodSecurity") {
				psa = append(psa, text)
			}
		}
		return psa
	}
	none := func(what string, create func() error) {
		t.Helper()
		if psa := check(what, create); len(psa) > 0 {
			t.Errorf("%s: Pod Security warns %q", what, psa)
		}
	}
	for name, o := range renderedPods(t, s.renderer) {
		switch o.Kind {
		case domain.KindJob:
			var j batchv1.Job
			mustDecode(t, o.Spec, &j)
			j.Namespace = ns.Name
			none("the batch Job", func() error { _, err := client.BatchV1().Jobs(ns.Name).Create(ctx, &j, dry); return err })
		case domain.KindDeployment:
			var d appsv1.Deployment
			mustDecode(t, o.Spec, &d)
			d.Namespace = ns.Name
			none("the application Deployment", func() error { _, err := client.AppsV1().Deployments(ns.Name).Create(ctx, &d, dry); return err })
		case domain.KindInferenceService:
			continue // its Pods are KServe's predictor's, below
		}
		p := pod("rendered-"+strings.ToLower(name), renderedPodSpec(t, o))
		if o.Kind == domain.KindPod {
			var rendered corev1.Pod
			mustDecode(t, o.Spec, &rendered)
			p = pod(rendered.Name, rendered.Spec)
		}
		none("the "+name+"'s Pod", func() error { _, err := client.CoreV1().Pods(ns.Name).Create(ctx, p, dry); return err })
	}
	copyOf := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "predictor", Namespace: ns.Name}, Spec: *live.Spec.DeepCopy()}
	none("KServe's predictor Deployment", func() error { _, err := client.AppsV1().Deployments(ns.Name).Create(ctx, copyOf, dry); return err })
	none("KServe's predictor Pod", func() error {
		_, err := client.CoreV1().Pods(ns.Name).Create(ctx, pod("predictor", live.Spec.Template.Spec), dry)
		return err
	})

	// The control: the earlier render's Job draws the warning.
	var old batchv1.Job
	mustDecode(t, s.beforeRestricted("job.json", uuid.NewString(), uuid.NewString(), testImage), &old)
	old.Namespace = ns.Name
	if psa := check("the earlier render's Job", func() error { _, err := client.BatchV1().Jobs(ns.Name).Create(ctx, &old, dry); return err }); len(psa) == 0 {
		t.Fatal("the earlier render's Job drew no Pod Security warning: the dry run shows nothing")
	}
}
