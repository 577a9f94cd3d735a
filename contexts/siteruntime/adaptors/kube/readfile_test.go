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

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	"github.com/pharos-metallo/metallo/standins/siteagent"
)

func readFilePayload(path string, maxBytes int64) map[string]any {
	return map[string]any{"path": path, "max_bytes": maxBytes}
}

// startedAttempt prepares and starts an Attempt and waits until its Job's
// Pod is bound to a node; it returns the Attempt and the node.
func (s *site) startedAttempt() (string, string) {
	s.t.Helper()
	attempt := uuid.NewString()
	want(s.t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(s.t, s.start(attempt, 500, 600), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	ctx := testContext(s.t)
	for {
		pods, err := s.e.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelAttempt + "=" + attempt})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				return attempt, p.Spec.NodeName
			}
		}
		select {
		case <-ctx.Done():
			s.t.Fatal("the Job's Pod was never scheduled")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watchReader returns the reader Pod of attempt as the API server first
// held it while a read runs (nil when none appeared).
func (s *site) watchReader(ctx context.Context, attempt string) func() *corev1.Pod {
	var (
		mu   sync.Mutex
		seen *corev1.Pod
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			p, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixReader), metav1.GetOptions{})
			if err == nil {
				mu.Lock()
				seen = p
				mu.Unlock()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() *corev1.Pod {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// A read-file on the local cluster: the reader Pod attempt-<attempt>-read
// is created as the member (the Runtime impersonating it; the audit log
// says so) through the admission policies of deploy/cluster, in exactly
// the rendered shape — the platform image running workspace-read with the
// payload's path and max_bytes, the Attempt's claim read-only, required
// onto the node of the Job's Pod — and deleted by UID before the answer;
// its record goes creating, created, deleting, removed. Simulated by
// KWOK: the reader "runs" and terminates, but no container ran, so the
// kubelet has no log to give: the read fails native-error, the reader
// removed all the same. Real: API server, RBAC, impersonation, admission,
// audit log, scheduling.
func TestReadFileCreatesTheReaderAsTheMemberInItsShapeAndDeletesItByUID(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "1"},
		fileReads: &application.FileReadConfig{Timeout: 30 * time.Second, Wait: 30 * time.Second}})
	attempt, node := s.startedAttempt()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	seen := s.watchReader(ctx, attempt)
	r := s.execute(s.command(siteprotocol.OpReadFile, attempt, readFilePayload("out/metrics.txt", 4096)))
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
	if !strings.Contains(r.Message, "cannot be read") {
		t.Errorf("message: %s", r.Message)
	}
	p := seen()
	if p == nil {
		t.Fatal("no reader Pod was seen while the read ran")
	}
	c := p.Spec.Containers
	if len(c) != 1 || c[0].Image != s.image || !slices.Equal(c[0].Command, []string{kube.HelperProgram, "workspace-read", "--root", "/workspace", "--max-bytes", "4096", "--path", "out/metrics.txt"}) ||
		len(c[0].Args) != 0 || len(c[0].VolumeMounts) != 1 || !c[0].VolumeMounts[0].ReadOnly {
		t.Errorf("reader container %+v", c)
	}
	if v := p.Spec.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim == nil || !v[0].PersistentVolumeClaim.ReadOnly ||
		v[0].PersistentVolumeClaim.ClaimName != domain.AttemptObjectName(attempt, domain.SuffixWorkspace) {
		t.Errorf("reader volumes %+v", v)
	}
	if p.Spec.ServiceAccountName != s.account() || p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken ||
		p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.ActiveDeadlineSeconds == nil || *p.Spec.ActiveDeadlineSeconds != 30 {
		t.Errorf("reader spec %+v", p.Spec)
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != node {
		t.Errorf("reader affinity %+v, want the Job Pod's node %s", a, node)
	}
	if ev := s.e.WhoCreated("pods", s.ns, p.Name); ev.Actor() != s.memberUser() || ev.User.Username != siteagent.RuntimeUser() {
		t.Errorf("audit: the reader created by %q impersonating %+v; want the Runtime impersonating %s", ev.User.Username, ev.ImpersonatedUser, s.memberUser())
	}
	if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(testContext(t), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the reader after the read: %v", err)
	}
	records, err := s.journal.Batch().Records(testContext(t), attempt)
	if err != nil {
		t.Fatal(err)
	}
	rec := domain.FindNamedRecord(records, domain.KindPod, p.Name)
	if rec == nil || rec.Phase != domain.PhaseRemoved || rec.UID != string(p.UID) {
		t.Errorf("reader record %+v, want removed with uid %s", rec, p.UID)
	}
	// read-logs reads past the reader's record: the Job's Pod chain skips it.
	want(t, s.execute(s.command(siteprotocol.OpReadLogs, attempt, map[string]any{"tail_bytes": 100})), siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
}

// A reader that does not terminate within the Runtime's wait is failed /
// deadline-exceeded (docs/site-runtime.md#command-bounds) and deleted by UID; a reader the admission policies refuse
// (the namespace names no platform image) is refused
// native-request-denied, nothing created.
func TestReadFileDeadlineAndAdmissionRefusal(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "600"},
		fileReads: &application.FileReadConfig{Timeout: 30 * time.Second, Wait: 3 * time.Second}})
	attempt, _ := s.startedAttempt()
	r := s.execute(s.command(siteprotocol.OpReadFile, attempt, readFilePayload("out.txt", 10)))
	want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonDeadlineExceeded)
	if !strings.Contains(r.Message, "has not terminated within 3s") {
		t.Errorf("message: %s", r.Message)
	}
	ctx := testContext(t)
	if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, domain.AttemptObjectName(attempt, domain.SuffixReader), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the reader after the deadline: %v", err)
	}
	if err := s.e.Client.CoreV1().ConfigMaps(s.ns).Delete(ctx, siteagent.SiteConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = s.execute(s.command(siteprotocol.OpReadFile, attempt, readFilePayload("out.txt", 10)))
	want(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonNativeRequestDenied)
	if !strings.Contains(r.Message, "metallo-workspace-readers") {
		t.Errorf("message: %s", r.Message)
	}
}

// crashAtRecord panics at the n-th failpoint hit after it is armed.
type crashAtRecord struct {
	mu    sync.Mutex
	armed bool
	n     int
}

func (c *crashAtRecord) Hit(string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return
	}
	if c.n--; c.n == 0 {
		c.armed = false
		panic(crashed{})
	}
}

// A read-file that dies right after its reader's create (the record says
// creating: the reader exists, its UID unrecorded) or right after the
// record created is recovered: the reader is found by name and adopted (it
// carries everything rendered) or taken from its record, its end awaited
// and read, then it is deleted by its UID: no second reader is created,
// and afterwards no reader is left (docs/site-runtime.md#the-workspace-reader).
// Simulated by KWOK: the reader's run (so the answer is native-error: no
// log).
func TestRecoverAdoptsTheReaderItLeftAndRemovesItByUID(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3} { // after the create call; after the record created
		fp := &crashAtRecord{}
		s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "1"}, fp: fp,
			fileReads: &application.FileReadConfig{Timeout: 30 * time.Second, Wait: 30 * time.Second}})
		attempt, _ := s.startedAttempt()
		p := s.command(siteprotocol.OpReadFile, attempt, readFilePayload("out.txt", 10))
		fp.mu.Lock()
		fp.armed, fp.n = true, n
		fp.mu.Unlock()
		func() {
			defer func() {
				if _, ok := recover().(crashed); !ok {
					t.Fatal("no crash")
				}
			}()
			_, _ = s.registry.Execute(testContext(t), p)
		}()
		ctx := testContext(t)
		name := domain.AttemptObjectName(attempt, domain.SuffixReader)
		orphan, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("crash %d: no orphan reader: %v", n, err)
		}
		a, err := s.registry.Recover(ctx, p)
		if err != nil {
			t.Fatalf("crash %d: recover: %v", n, err)
		}
		r := s.result(p, a)
		want(t, r, siteprotocol.OutcomeFailed, siteprotocol.ReasonNativeError)
		if _, err := s.e.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("crash %d: a reader is left: %v", n, err)
		}
		// Gone: the Runtime's deletes carry the exact UID (metallo-runtime-deletes
		// refuses any other), and the recovered read used the reader it
		// left: the record names its UID, removed.
		records, err := s.journal.Batch().Records(ctx, attempt)
		if err != nil {
			t.Fatal(err)
		}
		if rec := domain.FindNamedRecord(records, domain.KindPod, name); rec == nil || rec.Phase != domain.PhaseRemoved || rec.UID != string(orphan.UID) {
			t.Errorf("crash %d: the reader record %+v; want the adopted reader %s removed", n, rec, orphan.UID)
		}
	}
}
