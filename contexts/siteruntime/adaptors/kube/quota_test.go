package kube_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/google/uuid"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
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

// The one quota classifier reads the API server's own refusal: a create
// that would exceed a ResourceQuota is 403 Forbidden quoting "exceeded
// quota: <name>, …", and QuotaExceeded names the quota; the create that
// fits is no refusal, and a Forbidden of another cause (RBAC) and a
// message without the marker are not quota refusals
// (docs/site-runtime.md#quota-means-queued). Real: the API server's
// ResourceQuota admission and the quota controller.
func TestTheQuotaClassifierReadsTheAPIServersOwnRefusal(t *testing.T) {
	t.Parallel()
	e := kubetest.New(t)
	ctx := testContext(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-secret"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": resource.MustParse("1")}},
	}
	if _, err := e.Client.CoreV1().ResourceQuotas(e.Namespace).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quotas := cache.NewListWatchFromClient(e.Client.CoreV1().RESTClient(), "resourcequotas", e.Namespace, fields.Everything())
	kubetest.Until(t, long, "quota usage recorded", quotas, func(q *corev1.ResourceQuota) bool {
		_, ok := q.Status.Used["count/secrets"]
		return ok
	})
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": "v"}}
	}
	if _, err := e.Client.CoreV1().Secrets(e.Namespace).Create(ctx, secret("fits"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the secret the quota has room for: %v", err)
	}
	_, err := e.Client.CoreV1().Secrets(e.Namespace).Create(ctx, secret("exceeds"), metav1.CreateOptions{})
	if err == nil {
		t.Fatal("a secret beyond the quota was created")
	}
	if name, ok := kube.QuotaExceeded(err); !ok || name != "one-secret" {
		t.Fatalf("the API server's quota refusal %q classified (%q, %v)", err, name, ok)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: one-secret, requested: count/secrets=1, used: count/secrets=1, limited: count/secrets=1") {
		t.Fatalf("the refusal is not ResourceQuota admission's as the classifier reads it: %v", err)
	}
	rbac := apierrors.NewForbidden(corev1.Resource("secrets"), "x", errors.New(`User "m" cannot create resource "secrets"`))
	if _, ok := kube.QuotaExceeded(rbac); ok {
		t.Errorf("an RBAC refusal classified as a quota refusal: %v", rbac)
	}
	if _, ok := kube.QuotaExceeded(errors.New(err.Error())); ok {
		t.Errorf("an error that is not the API server's Forbidden classified as a quota refusal")
	}
}
