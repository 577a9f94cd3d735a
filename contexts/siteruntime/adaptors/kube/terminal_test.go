package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// A Job that a cluster policy gives a TTL of 0 is removed by the TTL
// controller right after it succeeded, before any observe saw it finished:
// the Runtime's watch recorded its terminal state the moment it appeared,
// so observe reports succeeded — with the Job's reason, the same
// started_at it reported while the Job ran, a finish time — and says the
// Job is gone (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone).
// Real: API server, Job controller, TTL-after-finished controller, the
// watch. Simulated by KWOK: the Pod "runs" 10 seconds and exits 0. The TTL
// is set by the test as the cluster administrator, as a policy would.
func TestAJobRemovedByATTLOfZeroRightAfterItSucceededIsObservedSucceededSayingItIsGone(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "10"}, watch: true})
	ctx := testContext(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	start := s.start(attempt, 500, 600)
	want(t, start, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	job := start.NativeRefs[0]
	if _, err := s.e.Client.BatchV1().Jobs(s.ns).Patch(ctx, job.Name, types.MergePatchType, []byte(`{"spec":{"ttlSecondsAfterFinished":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitPodRunning(attempt)
	// started_at is the Job's status.startTime, which the Job controller
	// writes in a status update of its own: on a loaded machine the Pod can
	// run before that write lands, so wait for it, as observe reports it.
	if err := kubetest.Poll(ctx, 100*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		j, err := s.e.Client.BatchV1().Jobs(s.ns).Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.StartTime != nil, nil
	}); err != nil {
		t.Fatalf("the Job controller did not set the Job's startTime: %v", err)
	}
	running := detail[siteprotocol.ObserveDetail](t, s.simple(siteprotocol.OpObserve, attempt))
	if running.State != siteprotocol.StateRunning || running.StartedAt == "" {
		t.Fatalf("while its Pod runs: %+v", running)
	}
	err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		_, err := s.e.Client.BatchV1().Jobs(s.ns).Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the TTL controller did not remove the Job: %v", err)
	}
	r := s.simple(siteprotocol.OpObserve, attempt)
	want(t, r, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved)
	d := detail[siteprotocol.ObserveDetail](t, r)
	if d.State != siteprotocol.StateSucceeded || d.Reason == "" || d.FinishedAt == "" || d.StartedAt != running.StartedAt ||
		!strings.Contains(r.Message, "is gone") || len(r.NativeRefs) != 1 || r.NativeRefs[0].UID != job.UID {
		t.Fatalf("observe of the Job the TTL removed: %s %s %v; started_at while running %s", r.Message, r.Detail, r.NativeRefs, running.StartedAt)
	}
	t.Logf("%s: %s", r.Message, r.Detail)
}

// A Job that finished and was removed while the Runtime's watch was not
// running (the Runtime was down), before any terminal state was seen, stays
// failed / native-missing: the Runtime never guesses a state it did not
// see (the documented limit).
func TestAJobRemovedBeforeAnyTerminalStateWasSeenStaysNativeMissing(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "5"}, watch: true})
	ctx := testContext(t)
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	job := s.start(attempt, 500, 600).NativeRefs[0]
	s.stopWatch()
	if _, err := s.e.Client.BatchV1().Jobs(s.ns).Patch(ctx, job.Name, types.MergePatchType, []byte(`{"spec":{"ttlSecondsAfterFinished":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Poll(ctx, 250*time.Millisecond, long, func(ctx context.Context) (bool, error) {
		_, err := s.e.Client.BatchV1().Jobs(s.ns).Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the TTL controller did not remove the Job: %v", err)
	}
	r := s.simple(siteprotocol.OpObserve, attempt)
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeMissing)
	if !strings.Contains(r.Message, "no terminal state was recorded") {
		t.Fatalf("native-missing says %q", r.Message)
	}
}
