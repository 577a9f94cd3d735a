package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// DefaultServingRuntime is the ServingRuntime --serving-runtime pins when
// the Site names none: KServe's Hugging Face server, the one the local
// cluster installs (docs/site-runtime.md#inference-services-on-kserve).
const DefaultServingRuntime = "kserve-huggingfaceserver"

// NewInferenceFamily builds the inference family on the shared workload
// client (docs/site-runtime.md#one-lifecycle-for-every-family): the Site's
// GPU and scheduling flags and --serving-runtime in what it renders. Its
// private reads follow the InferenceService's Pod chain, which it
// registers on the client (kube.InferencePodChain).
func NewInferenceFamily(c Config, native *kube.Workloads) (*inference.Family, error) {
	specs := kube.NewRenderer(c.GPUResources, nil)
	specs.Users = c.Users()
	var err error
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	runtime := c.ServingRuntime
	if runtime == "" {
		runtime = DefaultServingRuntime
	}
	native.WithPodChain(domain.KindInferenceService, kube.InferencePodChain())
	return inference.New(native, specs, inference.Config{ServingRuntime: runtime})
}
