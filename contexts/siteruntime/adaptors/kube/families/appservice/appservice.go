// Package appservice is the application family's side of the Site
// Runtime's Kubernetes adaptor
// (docs/site-runtime.md#application-services-on-kubernetes): it renders
// the Attempt's Deployment and ClusterIP Service
// (application.ApplicationSpecs) on the shared renderer of package kube.
// Its Deployment is observed, and its recorded Service proxied to, by the
// shared workload client (kube.Workloads.ObserveDeployment, which also
// reads KServe's predictor Deployments, and kube.Workloads.ProxyService).
// It imports no other family's package
// (docs/architecture.md#executor-families).
package appservice

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	appfamily "github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
)

// Renderer is the Site's renderer (kube.Renderer: the workspace claim,
// the identity labels, the demand's resources, scheduling and the
// service Pod annotations) rendering the application family's objects
// too (application.ApplicationSpecs). Rendering is deterministic: the
// same input gives the same bytes.
type Renderer struct{ *kube.Renderer }

// NewRenderer returns the application family's renderer on the Site's r.
func NewRenderer(r *kube.Renderer) *Renderer { return &Renderer{Renderer: r} }

// Interface checks.
var (
	_ appfamily.Natives            = (*kube.Workloads)(nil)
	_ application.ApplicationSpecs = (*Renderer)(nil)
)
