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
