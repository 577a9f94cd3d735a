package kube_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/platform/kube/kubetest"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// A Run whose Pod the namespace quota refuses is observed queued with the
// refusal; once the quota is raised, observe never quotes the old
// refusal again — while the Job controller backs off before its next try
// it says the quota now has room, then the Pod's own state — and the Run
// runs (docs/site-runtime.md#quota-means-queued). Real: ResourceQuota
// admission and controller, the Job controller's backoff. Simulated by
// KWOK: the Pod "runs" 2 seconds.
func TestAfterTheQuotaIsRaisedObserveNeverQuotesTheOldRefusal(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOptions{podAnnotations: map[string]string{kubetest.AnnotationRunSeconds: "2"}})
	ctx := testContext(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "project-cpu"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("500m")}},
	}
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotas := cache.NewListWatchFromClient(s.e.Client.CoreV1().RESTClient(), "resourcequotas", s.ns, fields.Everything())
	kubetest.Until(t, long, "quota usage recorded", quotas, func(q *corev1.ResourceQuota) bool {
		_, ok := q.Status.Used[corev1.ResourceRequestsCPU]
		return ok
	})
	attempt := uuid.NewString()
	want(t, s.prepare(attempt), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
	want(t, s.start(attempt, 1000, 600), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonCreated)
	s.e.WaitForEvent(long, "the Pod create refused by the quota", func(ev *corev1.Event) bool {
		return ev.InvolvedObject.Kind == "Job" && ev.Reason == "FailedCreate" && strings.Contains(ev.Message, "exceeded quota")
	})
	refused := detail[siteprotocol.ObserveDetail](t, s.simple(siteprotocol.OpObserve, attempt))
	if refused.State != siteprotocol.StateQueued || refused.Reason != "FailedCreate" || !strings.Contains(refused.Message, "limited: requests.cpu=500m") {
		t.Fatalf("while the quota refuses the Pod: %+v", refused)
	}

	q, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Get(ctx, "project-cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse("2")
	if _, err := s.e.Client.CoreV1().ResourceQuotas(s.ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Until(t, long, "the raised quota recorded", quotas, func(q *corev1.ResourceQuota) bool {
		h := q.Status.Hard[corev1.ResourceRequestsCPU]
		return h.Cmp(resource.MustParse("2")) == 0
	})
	s.observeUntil(attempt, "succeeded", func(r siteprotocol.Result) bool {
		d := detail[siteprotocol.ObserveDetail](t, r)
		if d.Reason == "FailedCreate" || strings.Contains(d.Message, "limited:") {
			t.Fatalf("after the quota was raised observe still quotes the refusal: %+v", d)
		}
		if d.State == siteprotocol.StateQueued {
			t.Logf("queued: %s %s", d.Reason, d.Message)
		}
		return d.State == siteprotocol.StateSucceeded
	})
}
