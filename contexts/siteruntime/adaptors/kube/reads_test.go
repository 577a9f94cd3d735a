package kube_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/permissions"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

// readLogs is a read-logs command of the Attempt.
func (s *site) readLogs(attempt string, tail int64) siteprotocol.Result {
	s.t.Helper()
	return s.execute(s.command(siteprotocol.OpReadLogs, attempt, map[string]any{"tail_bytes": tail}))
}

// grantBoth rewrites the policy file: s.member and other may each do
// actions in the Project.
func (s *site) grantBoth(other string, actions ...domain.PermissionAction) {
	s.t.Helper()
	b, err := json.Marshal([]permissions.Grant{{Member: s.member, Project: s.project, Actions: actions}, {Member: other, Project: s.project, Actions: actions}})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(s.policy, b, 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// as runs f with the site's commands sent as member under binding (then
// back as s.member).
func (s *site) as(member, binding string, f func()) {
	s.t.Helper()
	m, b := s.member, s.binding
	s.member, s.binding = member, binding
	defer func() { s.member, s.binding = m, b }()
	f()
}

// wantNothingRead checks that a refused read carries no content.
func wantNothingRead(t *testing.T, r siteprotocol.Result, reason siteprotocol.Reason) {
	t.Helper()
	want(t, r, siteprotocol.OutcomeRefused, reason)
	if len(r.Detail) > 0 && string(r.Detail) != "{}" {
		t.Fatalf("a refused read carries a detail: %s", r.Detail)
	}
}

// On the local cluster, a read of a batch Attempt whose Job runs: a second
// member of the same Project — its own service account, binding and
// execution.read grant — is refused attempt-conflict; once the first
// member's grant is withdrawn from the policy file, the first member's
// own read is refused permission-denied at once. Neither reads anything.
// (The Pod is KWOK's: it has no log, so an allowed read fails
// native-error, which shows the checks passed and the Pod's chain was
// exact.) Real: API server, RBAC, the Job controller, the policy file
// provider; simulated: the kubelet.
func TestReadLogsIsRefusedForAnotherMemberOfTheProjectAndAfterTheGrantIsWithdrawn(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "600"}})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.start(attempt, 100, 600), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)

	own := s.readLogs(attempt, 1024)
	want(t, own, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if !strings.Contains(own.Message, "container main of Pod") {
		t.Fatalf("the owner's read on KWOK: %s", own.Message)
	}

	other, otherBinding := uuid.NewString(), uuid.NewString()
	if err := siteagent.Member(testContext(t), s.e.Client, s.ns, other); err != nil {
		t.Fatal(err)
	}
	s.grantBoth(other, domain.ActionStart, domain.ActionRead, domain.ActionCancel)
	s.as(other, otherBinding, func() {
		r := s.execute(s.command(siteprotocol.OpBindMember, "", map[string]any{"party_id": other, "namespace": s.ns,
			"account": siteprotocol.MemberAccount(other), "binding_id": otherBinding, "revision": 1, "generation": 1}))
		want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied)
		wantNothingRead(t, s.readLogs(attempt, 1024), siteprotocol.ReasonAttemptConflict)
	})

	s.grant(domain.ActionStart, domain.ActionCancel) // execution.read withdrawn
	wantNothingRead(t, s.readLogs(attempt, 1024), siteprotocol.ReasonPermissionDenied)
	s.grant(domain.ActionStart, domain.ActionRead, domain.ActionCancel)
	want(t, s.readLogs(attempt, 1024), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
}

// A Pod labelled with the Attempt whose controller is another Job (one
// carrying the Attempt's labels, made by an administrator) refuses the
// read native-identity-mismatch, even beside the Attempt's own exact Pod;
// a Job made again under the recorded name (another UID) refuses it too.
// Nothing is read. Real: API server, Job controller, garbage collector
// (the recorded Job's deletion); simulated: the kubelet. The namespace is
// not guarded by the admission policies, which would refuse the
// administrator's Jobs outright.
func TestReadLogsRefusesAPodWhoseChainDoesNotLeadToTheRecordedJobOrAJobMadeAgainUnderItsName(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{noPolicy: true, podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "600"}})
	ctx := testContext(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.start(attempt, 100, 600)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)
	recorded := s.jobsOf(attempt)[0]

	impostor := impostorJob(recorded, "attempt-"+attempt+"-other")
	if _, err := s.e.Client.BatchV1().Jobs(s.ns).Create(ctx, impostor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the impostor's Pod", s.e.Pods(""), func(p *corev1.Pod) bool {
		c := metav1.GetControllerOf(p)
		return p.Labels[kube.LabelAttempt] == attempt && c != nil && c.Name == impostor.Name
	})
	r := s.readLogs(attempt, 1024)
	wantNothingRead(t, r, siteprotocol.ReasonNativeIdentityMismatch)
	if !strings.Contains(r.Message, "not to the recorded Job") {
		t.Fatalf("message %q does not name the broken link", r.Message)
	}
	bg := metav1.DeletePropagationBackground
	if err := s.e.Client.BatchV1().Jobs(s.ns).Delete(ctx, impostor.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}

	// The recorded Job removed out of band and made again under its name.
	if err := s.e.Client.BatchV1().Jobs(s.ns).Delete(ctx, recorded.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	kubetest.UntilGone(t, long, "the recorded Job gone", s.e.Jobs(recorded.Name), &batchv1.Job{}, s.ns, recorded.Name)
	again := impostorJob(recorded, recorded.Name)
	made, err := s.e.Client.BatchV1().Jobs(s.ns).Create(ctx, again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = s.readLogs(attempt, 1024)
	wantNothingRead(t, r, siteprotocol.ReasonNativeIdentityMismatch)
	if !strings.Contains(r.Message, string(made.UID)) || !strings.Contains(r.Message, start.NativeRefs[0].UID) {
		t.Fatalf("message %q does not name both UIDs", r.Message)
	}
}

// impostorJob is a Job named name with the recorded Job's labels and Pod
// template (its identity labels), as an administrator would make it.
func impostorJob(recorded batchv1.Job, name string) *batchv1.Job {
	tpl := *recorded.Spec.Template.DeepCopy()
	for _, k := range []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"} {
		delete(tpl.Labels, k)
	}
	labels := map[string]string{}
	for _, k := range []string{kube.LabelRun, kube.LabelAttempt, kube.LabelMember, kube.LabelProject} {
		labels[k] = recorded.Labels[k]
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr(int32(0)), Template: tpl},
	}
}

// An application service's read follows Pod → ReplicaSet → Deployment by
// UID: a ReplicaSet an administrator made (not the Deployment's, without
// a controller) whose Pods carry the Attempt's labels refuses the read
// native-identity-mismatch, naming the ReplicaSet; removed, the read of
// the Deployment's own Pod passes every check (KWOK's Pod has no log:
// native-error). Real: API server, Deployment and ReplicaSet controllers;
// simulated: the kubelet. Not guarded by the admission policies, which
// refuse bare ReplicaSets' Pods.
func TestReadLogsOfAnApplicationFollowsPodReplicaSetDeploymentByUID(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true}})
	ctx := testContext(t)
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)
	own := s.readLogs(attempt, 4096)
	want(t, own, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)

	dep := s.deploymentsOf(attempt)[0]
	tpl := *dep.Spec.Template.DeepCopy()
	tpl.Labels["forged"] = "yes"
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-" + attempt[:8], Labels: map[string]string{"forged": "yes"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"forged": "yes"}},
			Template: tpl},
	}
	if _, err := s.e.Client.AppsV1().ReplicaSets(s.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the forged ReplicaSet's Pod", s.e.Pods(""), func(p *corev1.Pod) bool {
		c := metav1.GetControllerOf(p)
		return c != nil && c.Name == rs.Name
	})
	r := s.readLogs(attempt, 4096)
	wantNothingRead(t, r, siteprotocol.ReasonNativeIdentityMismatch)
	if !strings.Contains(r.Message, "ReplicaSet "+rs.Name) {
		t.Fatalf("message %q does not name the forged ReplicaSet", r.Message)
	}
	fg := metav1.DeletePropagationForeground
	if err := s.e.Client.AppsV1().ReplicaSets(s.ns).Delete(ctx, rs.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		l, err := s.e.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "forged=yes"})
		return err == nil && len(l.Items) == 0, nil
	}); err != nil {
		t.Fatalf("the forged Pods stay: %v", err)
	}
	want(t, s.readLogs(attempt, 4096), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
}

// proxy is a proxy command of the Attempt.
func (s *site) proxyCmd(attempt string, payload map[string]any) siteprotocol.Result {
	s.t.Helper()
	return s.execute(s.command(siteprotocol.OpProxy, attempt, payload))
}

// A proxy checks the live Service before anything is sent: a selector
// changed under the recorded Service (same UID) and a Service made again
// under the recorded name (another UID) are refused
// native-identity-mismatch, naming what differs; a Service removed out of
// band fails native-missing. Real: API server, Deployment and ReplicaSet
// controllers; simulated: the kubelet (no request reaches a container:
// every case is decided before the send). Not guarded by the admission
// policies, which refuse the administrator's Service changes.
func TestProxyRefusesAServiceThatIsNotTheRecordedOneAndSendsNothing(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{siteOptions: siteOptions{noPolicy: true}})
	ctx := testContext(t)
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.simple(siteprotocol.OpStart, attempt)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)
	get := map[string]any{"method": "GET", "path": "/v1/models"}

	svc := s.servicesOf(attempt)[0]
	changed := svc.DeepCopy()
	changed.Spec.Selector = map[string]string{kube.LabelAttempt: attempt}
	if _, err := s.e.Client.CoreV1().Services(s.ns).Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := s.proxyCmd(attempt, get)
	wantNothingRead(t, r, siteprotocol.ReasonNativeIdentityMismatch)
	if !strings.Contains(r.Message, "selects") {
		t.Fatalf("message %q does not name the selector", r.Message)
	}

	if err := s.e.Client.CoreV1().Services(s.ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.UntilGone(t, long, "the Service gone", cache.NewListWatchFromClient(s.e.Client.CoreV1().RESTClient(), "services", s.ns, fields.OneTermEqualSelector("metadata.name", svc.Name)), &corev1.Service{}, s.ns, svc.Name)
	want(t, s.proxyCmd(attempt, get), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)

	again := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Labels: svc.Labels}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, Selector: svc.Spec.Selector, Ports: svc.Spec.Ports}}
	made, err := s.e.Client.CoreV1().Services(s.ns).Create(ctx, again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = s.proxyCmd(attempt, get)
	wantNothingRead(t, r, siteprotocol.ReasonNativeIdentityMismatch)
	if !strings.Contains(r.Message, string(made.UID)) || !strings.Contains(r.Message, string(svc.UID)) {
		t.Fatalf("message %q does not name both UIDs", r.Message)
	}
}

// A service whose Pod never becomes Ready has no ready endpoint: proxy
// fails endpoint-unavailable and nothing is sent; a batch Attempt has no
// service (unsupported-operation). Real: API server, controllers;
// simulated: the kubelet (KWOK keeps the Pod not Ready).
func TestProxyOfAServiceWithoutAReadyPodIsEndpointUnavailable(t *testing.T) {
	t.Parallel()
	s := newAppSite(t, appOptions{podAnnotations: map[string]string{kubetest.AnnotationNeverReady: "true"}})
	attempt := uuid.NewString()
	want(t, s.prepareApp(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.simple(siteprotocol.OpStart, attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.waitPodRunning(attempt)
	r := s.proxyCmd(attempt, map[string]any{"method": "POST", "path": "/v2/models/m/infer", "body_base64": "e30="})
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonEndpointUnavailable)
	if !strings.Contains(r.Message, "not Ready") {
		t.Fatalf("message %q", r.Message)
	}
}
