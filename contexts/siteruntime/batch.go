package siteruntime

import (
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
)

// NewBatchExecutor builds the batch family's executors (issue 6) from the
// role's configuration: the Kubernetes adaptor acting as the Runtime's
// identity from --kubeconfig (the Pod's service account when empty; a
// Runtime outside a cluster without --kubeconfig fails here), creates
// impersonating the member; the chosen permission provider; the pinned
// batch image; records in jobs.sqlite.
//
// With states (jobs.sqlite's terminal states) it also returns the
// Runtime's watch of its Jobs, which the executor uses and the caller
// starts (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone);
// events receives what the watch does. With states nil there is no watch.
func NewBatchExecutor(c Config, bindings application.MemberBindings, records application.BatchRecords, fp application.Failpoints, clk application.Clock,
	states application.TerminalStates, events application.WatchEvents) (*application.BatchExecutor, *application.JobWatcher, error) {
	rc, err := kubeconfig.Load(c.Kubeconfig)
	if err != nil {
		return nil, nil, config.Invalid("kubeconfig", c.Kubeconfig, fmt.Errorf("%w (outside a cluster give --kubeconfig)", err))
	}
	native, err := kube.New(rc)
	if err != nil {
		return nil, nil, err
	}
	perms, err := NewPermissions(c, clk)
	if err != nil {
		return nil, nil, err
	}
	images, err := NewStaticImages(c.BatchImage)
	if err != nil {
		return nil, nil, err
	}
	access := application.NewAccess(bindings, native, perms, clk)
	specs := kube.NewRenderer(c.GPUResources, c.BatchPodAnnotations)
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, nil, err
	}
	e := application.NewBatchExecutor(access, native, specs, images, records, fp, application.BatchConfig{DeletionWait: c.DeletionWait})
	if states == nil {
		return e, nil, nil
	}
	w := application.NewJobWatcher(native, states, records, clk, events, 0)
	return e.WithTerminalStates(states, w, clk), w, nil
}
