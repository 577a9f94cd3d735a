package kube

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// CheckExtendedResources validates the --gpu-resources mapping: every key is
// a demand key gpu.<vendor> (docs/site-protocol.md#operations) and every value a Kubernetes extended resource name — a
// domain-prefixed name (vendor.example/resource) outside the kubernetes.io
// domain that is a qualified name also as the quota key
// requests.<name> (the API server's rule for extended resources). Errors
// name the entry.
func CheckExtendedResources(m map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !strings.HasPrefix(k, "gpu.") || !siteprotocol.ValidDemandKey(k) {
			errs = append(errs, fmt.Errorf("%s=%s: the key must be a gpu.<vendor> demand key (lower-case letters, digits and '-')", k, m[k]))
		}
		if err := checkExtendedResourceName(m[k]); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", k, m[k], err))
		}
	}
	return errors.Join(errs...)
}

func checkExtendedResourceName(name string) error {
	domain, _, prefixed := strings.Cut(name, "/")
	switch {
	case name == "":
		return errors.New("the value must name an extended resource, e.g. amd.com/gpu")
	case !prefixed || domain == "":
		return errors.New("an extended resource name carries a domain prefix, e.g. amd.com/gpu")
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") || strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix):
		return errors.New("the kubernetes.io domain and the requests. prefix are not extended resources")
	}
	if problems := validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix + name); len(problems) > 0 {
		return fmt.Errorf("not a valid extended resource name: %s", strings.Join(problems, "; "))
	}
	return nil
}

// CheckPodAnnotations validates the --batch-pod-annotations map with the
// API server's own rule for metadata.annotations (qualified-name keys, a
// total size bound), so a bad annotation is refused at start-up instead of
// failing every batch Job's create.
func CheckPodAnnotations(m map[string]string) error {
	if errs := apivalidation.ValidateAnnotations(m, field.NewPath("annotations")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// Scheduling is where a Site wants every Pod the Runtime renders to run (dedicated nodes;
// docs/site-runtime.md#scheduling-of-rendered-pods): a node selector and tolerations, part of
// the rendered specification (and so of its digest and of recovery's comparison).
type Scheduling struct {
	// NodeSelector is each Pod's spec.nodeSelector (label key → value).
	NodeSelector map[string]string
	// Tolerations are each Pod's spec.tolerations, in the configured order.
	Tolerations []corev1.Toleration
}

// CheckNodeSelector validates the --pod-node-selector map with the API
// server's rule for labels (qualified-name keys, label values).
func CheckNodeSelector(m map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if problems := validation.IsQualifiedName(k); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s=%s: the key is not a label key: %s", k, m[k], strings.Join(problems, "; ")))
		}
		if problems := validation.IsValidLabelValue(m[k]); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s=%s: the value is not a label value: %s", k, m[k], strings.Join(problems, "; ")))
		}
	}
	return errors.Join(errs...)
}

// ParseTolerations reads --pod-tolerations entries, each key[=value][:effect] as kubectl
// writes taints: key=value tolerates that taint's value (operator Equal), a key alone any
// value (Exists); effect is NoSchedule, PreferNoSchedule or NoExecute, every effect when
// absent. Keys are label keys, values label values; an empty key (tolerate everything) is
// refused. Errors name the entry.
func ParseTolerations(entries []string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	var errs []error
	for _, e := range entries {
		rest, effect, hasEffect := strings.Cut(e, ":")
		k, v, hasValue := strings.Cut(rest, "=")
		t := corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists}
		if hasValue {
			t.Operator, t.Value = corev1.TolerationOpEqual, v
		}
		if hasEffect {
			t.Effect = corev1.TaintEffect(effect)
		}
		var problems []string
		if k == "" {
			problems = append(problems, "a toleration names the taint's key (an empty key would tolerate every taint)")
		} else {
			problems = append(problems, validation.IsQualifiedName(k)...)
		}
		if hasValue {
			problems = append(problems, validation.IsValidLabelValue(v)...)
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			problems = append(problems, fmt.Sprintf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", effect))
		}
		if hasEffect && effect == "" {
			problems = append(problems, "an empty effect: leave out the colon to tolerate every effect")
		}
		if len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s", e, strings.Join(problems, "; ")))
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}
