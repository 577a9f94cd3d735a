package siteruntime

import (
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
)

// NewApplicationFamily builds the application family on the shared
// workload client (docs/site-runtime.md#one-lifecycle-for-every-family):
// the Site's GPU and scheduling flags and --progress-deadline in what it
// renders.
func NewApplicationFamily(c Config, native appservice.Natives) (*appservice.Family, error) {
	specs := kube.NewRenderer(c.GPUResources, nil)
	specs.Users = c.Users()
	var err error
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	return appservice.New(native, specs, appservice.Config{ProgressDeadline: c.ProgressDeadline}), nil
}
