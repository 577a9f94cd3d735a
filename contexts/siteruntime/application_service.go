package siteruntime

import (
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
)

// NewApplicationExecutor builds the application family's executors
// (issue 19) from the role's configuration: the Kubernetes adaptor acting
// as the Runtime's identity from --kubeconfig, creates impersonating the
// member; the chosen permission provider; the Site's scheduling and
// --progress-deadline; records in services.sqlite.
func NewApplicationExecutor(c Config, bindings application.MemberBindings, records application.ServiceRecords, fp application.Failpoints,
	clk application.Clock) (*application.ApplicationExecutor, error) {
	rc, err := kubeconfig.Load(c.Kubeconfig)
	if err != nil {
		return nil, config.Invalid("kubeconfig", c.Kubeconfig, fmt.Errorf("%w (outside a cluster give --kubeconfig)", err))
	}
	native, err := kube.New(rc)
	if err != nil {
		return nil, err
	}
	perms, err := NewPermissions(c, clk)
	if err != nil {
		return nil, err
	}
	access := application.NewAccess(bindings, native, perms, clk)
	specs := kube.NewRenderer(c.GPUResources, nil)
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	return application.NewApplicationExecutor(access, native, native, specs, records, fp,
		application.ApplicationConfig{DeletionWait: c.DeletionWait, ProgressDeadline: c.ProgressDeadline}), nil
}
