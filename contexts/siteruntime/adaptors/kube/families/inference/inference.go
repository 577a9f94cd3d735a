// Package inference is the inference family's side of the Site Runtime's
// Kubernetes adaptor (docs/site-runtime.md#inference-services-on-kserve):
// it renders the Attempt's KServe InferenceService
// (application.InferenceSpecs), observes it with the predictor Deployment
// KServe's controller makes (read by the shared
// kube.Workloads.ObserveDeployment), and gives the private reads the
// InferenceService's Pod chain with the private inference argument rule
// and the proxy its predictor Service, on the shared workload client and
// renderer of package kube. It imports no other family's package
// (docs/architecture.md#executor-families).
package inference

import (
	"k8s.io/client-go/kubernetes"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// Workloads is the shared workload client (kube.Workloads) with the
// inference family's observation of its InferenceServices
// (inference.Natives).
type Workloads struct {
	*kube.Workloads
	client kubernetes.Interface
}

// New returns the inference family's side of w, registering on w what its
// private reads follow (docs/site-runtime.md#private-reads): the
// InferenceService's Pod chain (PodChain) and its predictor Service for a
// proxy (kube.Workloads.WithServiceOf).
func New(w *kube.Workloads) *Workloads {
	f := &Workloads{Workloads: w, client: w.Client()}
	w.WithPodChain(domain.KindInferenceService, PodChain())
	w.WithServiceOf(domain.KindInferenceService, f.predictorService)
	return f
}

// Renderer is the Site's renderer (kube.Renderer: the workspace claim,
// the identity labels, the demand's resources, scheduling and the
// predictor's annotations) rendering the InferenceService too
// (application.InferenceSpecs). Rendering is deterministic: the same
// input gives the same bytes.
type Renderer struct{ *kube.Renderer }

// NewRenderer returns the inference family's renderer on the Site's r.
func NewRenderer(r *kube.Renderer) *Renderer { return &Renderer{Renderer: r} }

// Interface checks.
var (
	_ inference.Natives          = (*Workloads)(nil)
	_ application.InferenceSpecs = (*Renderer)(nil)
)
