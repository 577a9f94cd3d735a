package application

import (
	"fmt"
	"time"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// DefaultProgressDeadline is an application Deployment's
// progressDeadlineSeconds when the Site configures none (--progress-deadline;
// docs/site-runtime.md#application-services-on-kubernetes).
const DefaultProgressDeadline = 600 * time.Second

// ApplicationServiceSpec is what an application service Attempt's native
// objects — a Deployment and a ClusterIP Service, both named
// attempt-<attempt> — are rendered from at prepare
// (docs/site-runtime.md#application-services-on-kubernetes). Every field
// is part of the rendered specification and so of its digest.
type ApplicationServiceSpec struct {
	Identity ObjectIdentity
	// Namespace is the member binding's namespace; ServiceAccount the
	// member's account in it (member-<party>).
	Namespace      string
	ServiceAccount string
	// Image is the command's image, pinned by digest (…@sha256:<64 hex>).
	Image string
	// Port is the TCP port the container listens on, and the Service's.
	Port int32
	// Readiness is the container's HTTP readiness probe on Port; nil
	// renders none.
	Readiness *siteprotocol.Readiness
	// Demand: cpu in millicores, memory in bytes, gpu.<vendor> in devices;
	// requests and limits both equal it.
	Demand map[string]int64
	// WorkspaceClaim is the Attempt's claim, mounted at /workspace.
	WorkspaceClaim string
	// ProgressDeadlineSeconds is the Deployment's progressDeadlineSeconds
	// (from Site configuration, never from the command).
	ProgressDeadlineSeconds int32
	// Verify is the serving Pod's read-only verification of the prepared
	// checkout; nil when the prepare named no repository.
	Verify *WorkspaceVerification
}

// WorkspaceVerification is what a serving Pod's init container
// workspace-verify checks before the member's container starts
// (docs/site-runtime.md#services-and-the-prepared-workspace): the checkout
// of Repository in the claim, read-only, by the fixed platform Image,
// within SizeLimitBytes; it never fetches and holds no credential.
type WorkspaceVerification struct {
	Image          string
	Repository     siteprotocol.Repository
	SizeLimitBytes int64
}

// ApplicationSpecs renders the application family's native objects
// deterministically: the same input always gives the same bytes. Both
// fail wrapping ErrUnsupportedDemand for a demand the Site cannot express.
type ApplicationSpecs interface {
	WorkspaceSpecs
	// RenderDeployment renders the Deployment attempt-<attempt>.
	RenderDeployment(s ApplicationServiceSpec) (NativeObject, error)
	// RenderService renders the ClusterIP Service attempt-<attempt>
	// selecting exactly the Deployment's Pod labels.
	RenderService(s ApplicationServiceSpec) (NativeObject, error)
}

// ApplicationSpecOf returns the specification a prepare payload p of
// family application asks for, or an error naming the payload field that
// the Runtime cannot render (beyond siteprotocol's validation of the
// command): a readiness path that is not an absolute HTTP path, a negative
// delay or period. The caller supplies identity, namespace, account,
// claim and progress deadline.
func ApplicationSpecOf(p siteprotocol.PreparePayload) (ApplicationServiceSpec, error) {
	if p.ServiceKind != siteprotocol.ServiceApplication {
		return ApplicationServiceSpec{}, fmt.Errorf("payload.service_kind: %q is not %q", p.ServiceKind, siteprotocol.ServiceApplication)
	}
	if !siteprotocol.IsPinnedImage(p.Image) {
		return ApplicationServiceSpec{}, fmt.Errorf("payload.image: %q is not an image reference with an explicit registry pinned by digest (<registry>/<repository>@sha256:<64 hex>)", p.Image)
	}
	if p.Port < 1 || p.Port > 65535 {
		return ApplicationServiceSpec{}, fmt.Errorf("payload.port: %d is not a TCP port", p.Port)
	}
	if r := p.Readiness; r != nil {
		switch {
		case !siteprotocol.ValidReadinessPath(r.Path):
			return ApplicationServiceSpec{}, fmt.Errorf("payload.readiness.path: %q is not an absolute HTTP path", r.Path)
		case r.InitialDelaySeconds < 0:
			return ApplicationServiceSpec{}, fmt.Errorf("payload.readiness.initial_delay_seconds: %d is negative", r.InitialDelaySeconds)
		case r.PeriodSeconds < 0:
			return ApplicationServiceSpec{}, fmt.Errorf("payload.readiness.period_seconds: %d is negative", r.PeriodSeconds)
		}
	}
	if p.Demand["cpu"] < 1 || p.Demand["memory"] < 1 {
		return ApplicationServiceSpec{}, fmt.Errorf("payload.demand: cpu (millicores) and memory (bytes) must be positive")
	}
	s := ApplicationServiceSpec{Image: p.Image, Port: p.Port, Demand: p.Demand}
	if p.Readiness != nil {
		r := *p.Readiness
		s.Readiness = &r
	}
	return s, nil
}
