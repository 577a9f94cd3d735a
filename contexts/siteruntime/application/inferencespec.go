package application

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Deployment modes of KServe v0.16.0's serving.kserve.io/deploymentMode
// annotation (docs/site-runtime.md#inference-services-on-kserve).
const (
	// DeploymentModeStandard is what every new inference preparation
	// renders: raw Deployments, without Knative.
	DeploymentModeStandard = "Standard"
	// DeploymentModeRawDeployment is the legacy name of Standard (before
	// KServe v0.16.0). A saved record that holds it keeps it: it is read,
	// compared and created as saved, never rewritten (kserve#5885).
	DeploymentModeRawDeployment = "RawDeployment"
)

// InferenceServiceSpec is what an inference service Attempt's native
// object — the KServe InferenceService attempt-<attempt> — is rendered
// from at prepare (docs/site-runtime.md#inference-services-on-kserve).
// Every field is part of the rendered specification and so of its digest.
type InferenceServiceSpec struct {
	Identity ObjectIdentity
	// Namespace is the member binding's namespace; ServiceAccount the
	// member's account in it (member-<party>), the predictor's.
	Namespace      string
	ServiceAccount string
	// DeploymentMode is the serving.kserve.io/deploymentMode annotation:
	// DeploymentModeStandard for every new preparation.
	DeploymentMode string
	// ModelFormat is the KServe model format (e.g. huggingface).
	ModelFormat string
	// Runtime is the ServingRuntime the Site pins for ModelFormat
	// (--serving-runtimes), never the command's choice.
	Runtime string
	// Args are the saved model arguments only: the runtime contributes its
	// own prefix ("--model_name=<name>", optionally a backend) ahead of
	// them (domain.CheckInferenceArgs).
	Args []string
	// Demand: cpu in millicores, memory in bytes, gpu.<vendor> in devices;
	// requests and limits of the predictor's container both equal it.
	Demand map[string]int64
	// WorkspaceClaim is the Attempt's claim, mounted at /workspace in the
	// predictor's container.
	WorkspaceClaim string
	// Verify is the predictor's read-only verification of the prepared
	// checkout (its init container workspace-verify); nil when the prepare
	// named no repository.
	Verify *WorkspaceVerification
}

// InferenceSpecs renders the inference family's native objects
// deterministically: the same input always gives the same bytes.
type InferenceSpecs interface {
	WorkspaceSpecs
	// RenderInferenceService renders the InferenceService attempt-<attempt>.
	// It fails wrapping ErrUnsupportedDemand for a demand the Site cannot
	// express.
	RenderInferenceService(s InferenceServiceSpec) (NativeObject, error)
}

// InferenceSpecOf returns the specification a prepare payload p of family
// inference asks for, on the ServingRuntime the Site pins for its model
// format (runtimes: model format → ServingRuntime, --serving-runtimes), or
// an error naming the payload field the Runtime cannot render (beyond
// siteprotocol's validation of the command): no model format, a format
// the Site does not serve, a model naming another serving runtime than
// the format's, no model arguments or an empty one, a demand without cpu
// and memory. The deployment mode is Standard; the caller supplies
// identity, namespace, account and claim
// (docs/site-runtime.md#inference-services-on-kserve).
func InferenceSpecOf(p siteprotocol.PreparePayload, runtimes map[string]string) (InferenceServiceSpec, error) {
	if p.ServiceKind != siteprotocol.ServiceInference {
		return InferenceServiceSpec{}, fmt.Errorf("payload.service_kind: %q is not %q", p.ServiceKind, siteprotocol.ServiceInference)
	}
	m := p.Model
	if m == nil || m.Format == "" {
		return InferenceServiceSpec{}, fmt.Errorf("payload.model.format: an inference service needs a model format")
	}
	runtime, served := runtimes[m.Format]
	switch {
	case !served:
		return InferenceServiceSpec{}, fmt.Errorf("payload.model.format: %q is not a model format this Site serves (it serves %s)", m.Format, servedFormats(runtimes))
	case m.Runtime != "" && m.Runtime != runtime:
		return InferenceServiceSpec{}, fmt.Errorf("payload.model.runtime: %q is not the serving runtime this Site pins for format %q (%q); leave it out or name that one", m.Runtime, m.Format, runtime)
	case len(m.Args) == 0:
		return InferenceServiceSpec{}, fmt.Errorf("payload.model.args: an inference service needs its model arguments")
	}
	for i, a := range m.Args {
		if a == "" {
			return InferenceServiceSpec{}, fmt.Errorf("payload.model.args[%d]: is empty", i)
		}
	}
	if p.Demand["cpu"] < 1 || p.Demand["memory"] < 1 {
		return InferenceServiceSpec{}, fmt.Errorf("payload.demand: cpu (millicores) and memory (bytes) must be positive")
	}
	return InferenceServiceSpec{DeploymentMode: DeploymentModeStandard, ModelFormat: m.Format, Runtime: runtime,
		Args: slices.Clone(m.Args), Demand: p.Demand}, nil
}

// servedFormats lists the formats of runtimes, sorted, for an error.
func servedFormats(runtimes map[string]string) string {
	formats := slices.Sorted(maps.Keys(runtimes))
	if len(formats) == 0 {
		return "none"
	}
	return strings.Join(formats, ", ")
}
