package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// DefaultServingRuntimes is what --serving-runtimes pins when the Site
// names nothing: the huggingface format on KServe's Hugging Face server,
// the one the local cluster installs
// (docs/site-runtime.md#inference-services-on-kserve).
func DefaultServingRuntimes() map[string]string {
	return map[string]string{"huggingface": "kserve-huggingfaceserver"}
}

// NewInferenceFamily builds the inference family on the shared workload
// client (docs/site-runtime.md#one-lifecycle-for-every-family): the Site's
// GPU and scheduling flags and --serving-runtimes in what it renders. Its
// private reads follow the InferenceService's Pod chain, which it
// registers on the client (kube.InferencePodChain).
func NewInferenceFamily(c Config, native *kube.Workloads) (*inference.Family, error) {
	specs := kube.NewRenderer(c.GPUResources, nil)
	var err error
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	runtimes := c.ServingRuntimes
	if len(runtimes) == 0 {
		runtimes = DefaultServingRuntimes()
	}
	native.WithPodChain(domain.KindInferenceService, kube.InferencePodChain())
	return inference.New(native, specs, inference.Config{ServingRuntimes: runtimes})
}
