package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubeinference "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/inference"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/inference"
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
// private reads follow the InferenceService's Pod chain and proxy to its
// predictor Service, which its side of the client registers on the client
// (kubeinference.New).
func NewInferenceFamily(c Config, native *kube.Workloads) (*inference.Family, error) {
	specs, err := siteRenderer(c, nil)
	if err != nil {
		return nil, err
	}
	runtimes := c.ServingRuntimes
	if len(runtimes) == 0 {
		runtimes = DefaultServingRuntimes()
	}
	return inference.New(kubeinference.New(native), kubeinference.NewRenderer(specs), inference.Config{ServingRuntimes: runtimes})
}
