// Package batch is the batch family's side of the Site Runtime's
// Kubernetes adaptor (docs/site-runtime.md#batch-on-kubernetes): it
// renders the Attempt's Job (application.BatchSpecs), observes it
// (application.JobObserver) and watches the Runtime's Jobs for their
// terminal states (application.JobWatches), on the shared workload client
// and renderer of package kube. It imports no other family's package
// (docs/architecture.md#executor-families).
package batch

import (
	"k8s.io/client-go/kubernetes"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

// Workloads is the shared workload client (kube.Workloads: creates as the
// member, reads and UID-bound deletes as the Runtime) with the batch
// family's observation and watch of its Jobs (application.BatchNatives,
// application.JobWatches).
type Workloads struct {
	*kube.Workloads
	client kubernetes.Interface
}

// New returns the batch family's side of w.
func New(w *kube.Workloads) *Workloads { return &Workloads{Workloads: w, client: w.Client()} }

// Renderer is the Site's renderer (kube.Renderer: the workspace claim,
// the identity labels, the demand's resources, scheduling and the batch
// Pod annotations) rendering the batch Job too (application.BatchSpecs).
// Rendering is deterministic: the same input gives the same bytes.
type Renderer struct{ *kube.Renderer }

// NewRenderer returns the batch family's renderer on the Site's r.
func NewRenderer(r *kube.Renderer) *Renderer { return &Renderer{Renderer: r} }

// Interface checks.
var (
	_ application.BatchNatives = (*Workloads)(nil)
	_ application.JobWatches   = (*Workloads)(nil)
	_ application.BatchSpecs   = (*Renderer)(nil)
)
