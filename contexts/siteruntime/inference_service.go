package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

// DefaultServingRuntime is the ServingRuntime --serving-runtime pins when
// the Site names none: KServe's Hugging Face server, the one the local
// cluster installs (docs/site-runtime.md#inference-services-on-kserve).
const DefaultServingRuntime = "kserve-huggingfaceserver"

// NewInferenceExecutor builds the inference family's executors (issue 21)
// on the shared workload client and access check
// (docs/site-runtime.md#one-lifecycle-for-every-family): the Site's GPU
// and scheduling flags and --serving-runtime in what it renders,
// --deletion-wait, records in services.sqlite.
func NewInferenceExecutor(c Config, native *kube.Workloads, access *application.Access, records application.ServiceRecords,
	fp application.Failpoints) (*application.InferenceExecutor, error) {
	specs := kube.NewRenderer(c.GPUResources, nil)
	var err error
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	runtime := c.ServingRuntime
	if runtime == "" {
		runtime = DefaultServingRuntime
	}
	return application.NewInferenceExecutor(access, native, specs, records, fp,
		application.InferenceConfig{DeletionWait: c.DeletionWait, ServingRuntime: runtime, Reads: c.Reads()})
}
