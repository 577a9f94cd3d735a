package kube

import (
	"strings"
	"testing"

	"errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The quota admission's message is read back into its quota and
// resources, and the refused request is compared with the quota as it is
// now: a raised limit or a freed usage means the refusal no longer holds.
func TestAQuotaRefusalIsComparedWithTheQuotaAsItIsNow(t *testing.T) {
	msg := `Error creating: pods "attempt-x-abcde" is forbidden: exceeded quota: project-cpu, requested: limits.cpu=1,requests.cpu=1, used: requests.cpu=0, limited: requests.cpu=500m`
	name, r, ok := parseQuotaRefusal(msg)
	if !ok || name != "project-cpu" || r.requested.Name(corev1.ResourceRequestsCPU, resource.DecimalSI).IsZero() || len(r.requested) != 2 {
		t.Fatalf("parsed %q %+v %v", name, r, ok)
	}
	q := func(hard, used string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(hard)},
			Used: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(used)},
		}}
	}
	if fits, now := r.fitsNow(q("500m", "0")); fits || !strings.Contains(now, "used 0 of 500m") {
		t.Fatalf("the quota as refused: fits %v (%s)", fits, now)
	}
	if fits, now := r.fitsNow(q("2", "0")); !fits {
		t.Fatalf("a raised quota: fits %v (%s)", fits, now)
	}
	if fits, _ := r.fitsNow(q("1500m", "1")); fits {
		t.Fatal("a quota whose usage leaves 500m fits a request of 1")
	}
	if fits, _ := r.fitsNow(q("1500m", "500m")); !fits {
		t.Fatal("a quota whose usage was freed does not fit")
	}
	for _, m := range []string{"Error creating: pods is forbidden: admission webhook denied", "exceeded quota: x, requested: cpu", ""} {
		if _, _, ok := parseQuotaRefusal(m); ok {
			t.Fatalf("%q parsed as a quota refusal", m)
		}
	}
}

// QuotaExceeded classifies a 403 Forbidden quoting ResourceQuota
// admission's message (as the API server writes it: the real refusal is
// TestTheQuotaClassifierReadsTheAPIServersOwnRefusal), and nothing else:
// not another Forbidden, not "failed quota" (a quota demanding a field),
// not the message outside a Forbidden.
func TestQuotaExceededIsTheForbiddenOfResourceQuotaAdmission(t *testing.T) {
	msg := "exceeded quota: project-cpu, requested: requests.cpu=1, used: requests.cpu=0, limited: requests.cpu=500m"
	gr := corev1.Resource("pods")
	if name, ok := QuotaExceeded(apierrors.NewForbidden(gr, "p", errors.New(msg))); !ok || name != "project-cpu" {
		t.Errorf("the quota refusal: (%q, %v)", name, ok)
	}
	for _, err := range []error{
		apierrors.NewForbidden(gr, "p", errors.New(`User "m" cannot create resource "pods"`)),
		apierrors.NewForbidden(gr, "p", errors.New("failed quota: project-cpu: must specify limits.ephemeral-storage")),
		apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), "p", nil),
		errors.New(msg),
	} {
		if _, ok := QuotaExceeded(err); ok {
			t.Errorf("classified as exceeding a quota: %v", err)
		}
	}
	if !QuotaWait("pods \"x\" is forbidden: "+msg) || QuotaWait("failed quota: project-cpu: must specify limits.cpu") {
		t.Error("quotaWait does not read the refusal as QuotaExceeded does")
	}
}
