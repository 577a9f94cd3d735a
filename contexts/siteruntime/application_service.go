package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
)

// NewApplicationExecutor builds the application family's executors
// (issue 19) on the shared workload client and access check
// (docs/site-runtime.md#one-lifecycle-for-every-family): the Site's GPU
// and scheduling flags and --progress-deadline in what it renders,
// --deletion-wait, records in services.sqlite.
func NewApplicationExecutor(c Config, native *kube.Workloads, access *application.Access, records application.ServiceRecords,
	fp application.Failpoints) (*application.ApplicationExecutor, error) {
	specs := kube.NewRenderer(c.GPUResources, nil)
	var err error
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	return application.NewApplicationExecutor(access, native, specs, records, fp,
		application.ApplicationConfig{DeletionWait: c.DeletionWait, ProgressDeadline: c.ProgressDeadline, Reads: c.Reads()}), nil
}
