package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

// The one classifier of quota refusals (docs/site-runtime.md#quota-means-queued):
// ResourceQuota admission refuses a request that would exceed a quota with
// 403 Forbidden and the message "exceeded quota: <name>, requested: …,
// used: …, limited: …", which the Job controller's FailedCreate event and
// a ReplicaSet's ReplicaFailure condition quote. A quota the request
// exceeds is a wait (queued), never a failure; "failed quota: …: must
// specify …" (a quota demanding a field) is not one.

// exceededQuota is the marker ResourceQuota admission writes.
const exceededQuota = "exceeded quota: "

// QuotaExceeded reports whether err is the API server refusing a request
// because it would exceed a ResourceQuota (IsForbidden and ResourceQuota
// admission's message, which parses); quota names the quota.
func QuotaExceeded(err error) (quota string, ok bool) {
	if !apierrors.IsForbidden(err) {
		return "", false
	}
	name, _, ok := parseQuotaRefusal(err.Error())
	return name, ok
}

// QuotaWait reports whether msg, a refused create as a controller quotes
// it, is ResourceQuota admission's exceeded-quota refusal: a wait.
func QuotaWait(msg string) bool { return strings.Contains(msg, exceededQuota) }

// QuotaNow reads the quota a refusal obs quotes (when it quotes one) as
// it is now: when the quota is gone, or the refused request fits its hard
// limits and usage now, the refusal no longer holds and over says why
// (the observation then stays queued without quoting it). Errors are the
// quota's read.
func (w *Workloads) QuotaNow(ctx context.Context, namespace string, obs application.Observation,
	over func(obs application.Observation, why string) application.Observation) (application.Observation, error) {
	name, refusal, ok := parseQuotaRefusal(obs.Message)
	if !ok {
		return obs, nil
	}
	q, err := w.client.CoreV1().ResourceQuotas(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return over(obs, fmt.Sprintf("quota %s no longer exists", name)), nil
	case err != nil:
		return application.Observation{}, fmt.Errorf("read quota %s/%s: %w", namespace, name, err)
	}
	if room, now := refusal.fitsNow(q); room {
		return over(obs, fmt.Sprintf("quota %s now has room (%s)", name, now)), nil
	}
	return obs, nil
}

// quotaRefusal is ResourceQuota admission's "exceeded quota" refusal of a
// Pod create, as a controller quotes it (the Job controller's FailedCreate
// event, a ReplicaSet's ReplicaFailure condition): the resources it
// names.
type quotaRefusal struct {
	requested, used, limited corev1.ResourceList
}

// parseQuotaRefusal reads the quota admission's message ("… exceeded
// quota: <name>, requested: r=q,…, used: r=q,…, limited: r=q,…").
func parseQuotaRefusal(msg string) (string, quotaRefusal, bool) {
	_, rest, ok := strings.Cut(msg, exceededQuota)
	if !ok {
		return "", quotaRefusal{}, false
	}
	name, rest, ok1 := strings.Cut(rest, ", requested: ")
	requested, rest, ok2 := strings.Cut(rest, ", used: ")
	used, limited, ok3 := strings.Cut(rest, ", limited: ")
	var r quotaRefusal
	var err1, err2, err3 error
	r.requested, err1 = parseResources(requested)
	r.used, err2 = parseResources(used)
	r.limited, err3 = parseResources(limited)
	if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil || err3 != nil {
		return "", quotaRefusal{}, false
	}
	return name, r, true
}

func parseResources(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("resource %q", part)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, err
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// fitsNow reports whether the refused request fits the quota as it is now
// (its hard limits and usage), and the quota's current hard and used
// values of the requested resources.
func (r quotaRefusal) fitsNow(q *corev1.ResourceQuota) (bool, string) {
	fits := true
	var now []string
	for _, name := range slices.Sorted(maps.Keys(r.requested)) {
		hard, limited := q.Status.Hard[name]
		if !limited {
			hard, limited = q.Spec.Hard[name]
		}
		if !limited {
			continue
		}
		used := q.Status.Used[name]
		want := used.DeepCopy()
		want.Add(r.requested[name])
		if want.Cmp(hard) > 0 {
			fits = false
		}
		now = append(now, fmt.Sprintf("%s: used %s of %s", name, used.String(), hard.String()))
	}
	return fits, strings.Join(now, ", ")
}
