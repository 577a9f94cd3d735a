package kube_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// followReader follows the reader Pod of attempt while a read runs: it
// returns the last version the API server held before it was gone (nil
// when none appeared), so a test sees it scheduled.
func (s *site) followReader(ctx context.Context, attempt string) func() *corev1.Pod {
	var (
		mu   sync.Mutex
		last *corev1.Pod
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		name := domain.AttemptObjectName(attempt, domain.SuffixReader)
		for ctx.Err() == nil {
			p, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
			mu.Lock()
			seen := last != nil
			if err == nil {
				last = p
			}
			mu.Unlock()
			if apierrors.IsNotFound(err) && seen {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() *corev1.Pod {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// checkReader checks the workspace reader p of attempt as the API server
// held it during a read-file of path for maxBytes against what the
// Runtime recorded (records, the family's record file): created by the
// Runtime impersonating the member (audit log), carrying every field of
// its saved specification (kube.Mismatch, the spec comparison of
// recovery), the platform image running exactly workspace-read with the
// path and max_bytes, the Attempt's claim read-only and nothing else, the
// member's account without a token, required onto node and scheduled
// there, owned by nothing (no controller adopted it), then deleted as the
// Runtime (audit log; metallo-runtime-deletes admits only a delete with
// the exact UID) and recorded removed with its UID.
func (s *site) checkReader(t *testing.T, p *corev1.Pod, records []domain.NativeRecord, attempt, node, path string, maxBytes string) {
	t.Helper()
	if p == nil {
		t.Fatal("no reader Pod was seen while the read ran")
	}
	rec := domain.FindNamedRecord(records, domain.KindPod, p.Name)
	if rec == nil || rec.Phase != domain.PhaseRemoved || rec.UID != string(p.UID) {
		t.Fatalf("reader record %+v, want removed with uid %s", rec, p.UID)
	}
	live := p.DeepCopy()
	live.APIVersion, live.Kind = "v1", domain.KindPod
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := kube.Mismatch(rec.Spec, u); err != nil || m != "" {
		t.Errorf("the live reader is not its saved specification: %s %v", m, err)
	}
	c := p.Spec.Containers
	if len(c) != 1 || c[0].Image != s.image || !slices.Equal(c[0].Command, []string{kube.HelperProgram, "workspace-read", "--root", "/workspace", "--max-bytes", maxBytes, "--path", path}) ||
		len(c[0].Args) != 0 || len(c[0].Env) != 0 || len(c[0].EnvFrom) != 0 || len(c[0].VolumeMounts) != 1 || !c[0].VolumeMounts[0].ReadOnly || c[0].VolumeMounts[0].MountPath != "/workspace" {
		t.Errorf("reader container %+v", c)
	}
	if v := p.Spec.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim == nil || !v[0].PersistentVolumeClaim.ReadOnly ||
		v[0].PersistentVolumeClaim.ClaimName != domain.AttemptObjectName(attempt, domain.SuffixWorkspace) {
		t.Errorf("reader volumes %+v", v)
	}
	if p.Labels[kube.LabelRole] != kube.RoleWorkspaceReader || p.Labels[kube.LabelAttempt] != attempt || p.Labels[kube.LabelMember] != s.member || len(p.OwnerReferences) != 0 {
		t.Errorf("reader labels %v, owners %+v", p.Labels, p.OwnerReferences)
	}
	if p.Spec.ServiceAccountName != s.account() || p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken ||
		p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.ActiveDeadlineSeconds == nil || *p.Spec.ActiveDeadlineSeconds != 30 {
		t.Errorf("reader spec %+v", p.Spec)
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != node {
		t.Errorf("reader affinity %+v, want the workload Pod's node %s", a, node)
	}
	if p.Spec.NodeName != node {
		t.Errorf("the reader was scheduled to %q, not to the workload Pod's node %s", p.Spec.NodeName, node)
	}
	if ev := s.e.WhoCreated("pods", s.ns, p.Name); ev.Actor() != s.memberUser() || ev.User.Username != siteagent.RuntimeUser() {
		t.Errorf("audit: the reader created by %q impersonating %+v; want the Runtime impersonating %s", ev.User.Username, ev.ImpersonatedUser, s.memberUser())
	}
	ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
	defer cancel()
	del, err := s.e.AuditLog().Find(ctx, func(ev kubetest.AuditEvent) bool {
		r := ev.ObjectRef
		return ev.Verb == "delete" && r != nil && r.Resource == "pods" && r.Subresource == "" && r.Namespace == s.ns && r.Name == p.Name && ev.Code() >= 200 && ev.Code() < 300
	})
	if err != nil || del.User.Username != siteagent.RuntimeUser() || del.ImpersonatedUser != nil {
		t.Errorf("audit: the reader deleted by %q impersonating %+v (%v); want the Runtime as itself", del.User.Username, del.ImpersonatedUser, err)
	}
	if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(testContext(t), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the reader after the read: %v", err)
	}
}

// readerFiles is the read-file configuration of these tests: the
// reader's activeDeadlineSeconds 30, the Runtime's wait 30 s.
func readerFiles() *application.FileReadConfig {
	return &application.FileReadConfig{Timeout: 30 * time.Second, Wait: 30 * time.Second}
}

// A read-file of an application service on the local cluster: the reader
// attempt-<attempt>-read is created as the member through the admission
// policies of deploy/cluster (the namespace is guarded), in exactly its
// rendered shape, mounting the Attempt's claim read-only, required onto
// and scheduled to the node of the Deployment's Pod (two fake Nodes: the
// affinity decides), not adopted by the ReplicaSet, deleted by UID as the
// Runtime, its record in services.sqlite going removed. The service is
// untouched: still healthy, its Pod the same. Simulated by KWOK: the
// reader "runs" and terminates, but no container ran, so the kubelet has
// no log to give: the read fails native-error, the reader removed all the
// same (the reader's line and exact bytes are the real node's test).
// Real: API server, RBAC, impersonation, admission, audit log, scheduling,
// the Deployment and ReplicaSet controllers.
func TestReadFileOfAnApplicationServiceCreatesTheReaderOnItsPodsNodeAsTheMember(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{fileReads: readerFiles()}})
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.observeUntil(attempt, "healthy", func(r siteprotocol.Result) bool { return state(t, r) == siteprotocol.StateHealthy })
	pod := s.waitPodRunning(attempt)
	if pod.Spec.NodeName == "" {
		t.Fatalf("the Deployment's Pod %s runs on no node", pod.Name)
	}

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	seen := s.followReader(ctx, attempt)
	r := s.execute(s.command(siteprotocol.OpReadFile, attempt, readFilePayload("static/index.html", 65536)))
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if !strings.Contains(r.Message, "cannot be read") {
		t.Errorf("message: %s", r.Message)
	}
	if len(r.NativeRefs) != 2 || r.NativeRefs[0].Kind != domain.KindDeployment || r.NativeRefs[1].Kind != domain.KindWorkspace {
		t.Errorf("native refs %+v: want the Deployment and the claim", r.NativeRefs)
	}
	records, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	s.checkReader(t, seen(), records, attempt, pod.Spec.NodeName, "static/index.html", "65536")

	after := s.waitPodRunning(attempt)
	if after.UID != pod.UID {
		t.Errorf("the service's Pod changed during the read: %s, was %s", after.UID, pod.UID)
	}
	if st := state(t, s.simple(siteprotocol.OpObserve, attempt)); st != siteprotocol.StateHealthy {
		t.Errorf("the service after the read: %s", st)
	}
	// read-logs reads past the reader's record: the Deployment's chain skips it.
	want(t, s.execute(s.command(siteprotocol.OpReadLogs, attempt, map[string]any{"tail_bytes": 100})), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
}

// A read-file of an inference service on the local cluster: KServe's own
// controller makes the predictor (Deployment, ReplicaSet, Pod; nothing of
// it recorded), and the reader attempt-<attempt>-read is created as the
// member through the admission policies, in exactly its rendered shape,
// mounting the Attempt's claim read-only, required onto and scheduled to
// the node of the predictor Pod found by the InferenceService's chain
// (argument rule included), deleted by UID as the Runtime, its record in
// services.sqlite going removed; the InferenceService stays healthy with
// the same predictor Pod. A reader the admission policies refuse (the
// namespace names no platform image) is native-request-denied. Simulated
// by KWOK: the reader's container (no log: native-error, as for
// batch) and the predictor's (Ready at once). Real: API server, RBAC,
// impersonation, admission, audit log, scheduling, KServe's controller.
func TestReadFileOfAnInferenceServiceCreatesTheReaderOnThePredictorsNodeAsTheMember(t *testing.T) {
	t.Parallel()
	s := newIsvcSite(t, isvcOptions{siteOptions: siteOptions{fileReads: readerFiles()}})
	attempt := uuid.NewString()
	isvc := s.startHealthyIsvc(attempt)
	pods := s.predictorPods(attempt, "bound to a node", func(p []corev1.Pod) bool { return len(p) == 1 && p[0].Spec.NodeName != "" })
	predictor := pods[0]
	if c := metav1.GetControllerOf(&predictor); c == nil || c.Kind != "ReplicaSet" || !strings.HasPrefix(c.Name, isvc.Name+"-predictor-") {
		t.Fatalf("the predictor Pod %s is controlled by %+v, not by KServe's predictor ReplicaSet", predictor.Name, c)
	}

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	seen := s.followReader(ctx, attempt)
	r := s.execute(s.command(siteprotocol.OpReadFile, attempt, readFilePayload("model/config.json", 1024)))
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if !strings.Contains(r.Message, "cannot be read") {
		t.Errorf("message: %s", r.Message)
	}
	if len(r.NativeRefs) != 2 || r.NativeRefs[0] != isvc || r.NativeRefs[1].Kind != domain.KindWorkspace {
		t.Errorf("native refs %+v: want the InferenceService %+v and the claim", r.NativeRefs, isvc)
	}
	records, err := s.journal.Services().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	s.checkReader(t, seen(), records, attempt, predictor.Spec.NodeName, "model/config.json", "1024")

	now := s.predictorPods(attempt, "still one", func(p []corev1.Pod) bool { return len(p) == 1 })
	if now[0].UID != predictor.UID {
		t.Errorf("the predictor Pod changed during the read: %s, was %s", now[0].UID, predictor.UID)
	}
	if st := state(t, s.simple(siteprotocol.OpObserve, attempt)); st != siteprotocol.StateHealthy {
		t.Errorf("the InferenceService after the read: %s", st)
	}

	if err := s.e.Client.CoreV1().ConfigMaps(s.ns).Delete(testContext(t), siteagent.SiteConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = s.execute(s.command(siteprotocol.OpReadFile, attempt, readFilePayload("model/config.json", 1024)))
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
	if !strings.Contains(r.Message, "metallo-workspace-readers") {
		t.Errorf("message: %s", r.Message)
	}
}
