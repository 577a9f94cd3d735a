package siteruntime

import (
	"fmt"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
	kubebatch "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/platform/config"
	"github.com/pharos-metallo/metallo/platform/kube/kubeconfig"
)

// NewNativeObjects returns the one Kubernetes workload client every
// executor family shares (docs/site-runtime.md#one-lifecycle-for-every-family):
// the Kubernetes adaptor acting as the Runtime's identity from
// --kubeconfig (the Pod's service account when empty; a Runtime outside a
// cluster without --kubeconfig fails here, naming the flag), its creates
// impersonating the member, rate-limited by --kube-api-qps and
// --kube-api-burst.
func NewNativeObjects(c Config) (*kube.Workloads, error) {
	rc, err := kubeconfig.Load(c.Kubeconfig)
	if err != nil {
		return nil, config.Invalid("kubeconfig", c.Kubeconfig, fmt.Errorf("%w (outside a cluster give --kubeconfig)", err))
	}
	rc.QPS, rc.Burst = float32(c.KubeAPIQPS), c.KubeAPIBurst
	return kube.New(rc)
}

// NewAccess returns the one access check every executor family shares
// (docs/site-runtime.md#access-before-every-native-start): the stored
// bindings, the namespaces and service accounts as native reads them, and
// the permission provider --permissions chooses (an error naming the flag
// when none is usable).
func NewAccess(c Config, bindings application.MemberBindings, native application.ProjectNamespaces, clk application.Clock) (*application.Access, error) {
	perms, err := NewPermissions(c, clk)
	if err != nil {
		return nil, err
	}
	return application.NewAccess(bindings, native, perms, clk), nil
}

// BatchNative is what the batch family needs of the shared workload
// client: its objects, its Jobs' observation and their watch.
type BatchNative interface {
	application.BatchNatives
	application.JobWatches
}

// NewBatchFamily builds the batch family on the shared workload client's
// observation of Jobs (kubebatch.New), with the pinned batch image
// (--batch-image) and the Site's scheduling, GPU and batch Pod annotation
// flags in what it renders.
func NewBatchFamily(c Config, jobs application.JobObserver) (*batch.Family, error) {
	images, err := NewStaticImages(c.BatchImage)
	if err != nil {
		return nil, err
	}
	specs, err := siteRenderer(c, c.BatchPodAnnotations)
	if err != nil {
		return nil, err
	}
	return batch.New(jobs, kubebatch.NewRenderer(specs), images), nil
}

// siteRenderer is the Site's renderer of every family: the default
// extended resources under --gpu-resources, --pod-node-selector and
// --pod-tolerations, and podAnnotations on batch and platform Pods.
func siteRenderer(c Config, podAnnotations map[string]string) (*kube.Renderer, error) {
	specs := kube.NewRenderer(c.GPUResources, podAnnotations)
	var err error
	if specs.Scheduling, err = c.Scheduling(); err != nil {
		return nil, err
	}
	return specs, nil
}

// ExecutorConfig is every family's executor configuration:
// --deletion-wait and the private reads' bounds.
func ExecutorConfig(c Config) application.ExecutorConfig {
	return application.ExecutorConfig{DeletionWait: c.DeletionWait, Reads: c.Reads()}
}

// NewBatchExecutor builds the batch family's executor without Fx: its
// own workload client (NewNativeObjects) and access check (NewAccess),
// then NewBatchFamily, with records in jobs.sqlite. The runtime role's
// Module builds the client and the check once for every family instead
// (families).
//
// With states (jobs.sqlite's terminal states) it also returns the
// Runtime's watch of its Jobs, which the executor uses and the caller
// starts (docs/site-runtime.md#terminal-states-of-jobs-that-are-gone);
// events receives what the watch does. With states nil there is no watch.
func NewBatchExecutor(c Config, bindings application.MemberBindings, records application.BatchRecords, fp application.Failpoints, clk application.Clock,
	states application.TerminalStates, events application.WatchEvents) (*application.Executor, *application.JobWatcher, error) {
	native, err := NewNativeObjects(c)
	if err != nil {
		return nil, nil, err
	}
	access, err := NewAccess(c, bindings, native, clk)
	if err != nil {
		return nil, nil, err
	}
	jobs := kubebatch.New(native)
	f, err := NewBatchFamily(c, jobs)
	if err != nil {
		return nil, nil, err
	}
	var w *application.JobWatcher
	if states != nil {
		w = application.NewJobWatcher(jobs, states, records, clk, events, 0)
		f.WithTerminalStates(states, w, clk)
	}
	return application.NewExecutor(f, access, native, records, fp, ExecutorConfig(c)), w, nil
}

// CheckoutOf is the workspace helper's rendering and configuration for
// every family (docs/site-runtime.md#the-workspace-helper): the helper
// rendered like every Pod of the Site (its scheduling and the batch Pod
// annotations), running the fixed platform image (--batch-image) with
// --checkout-timeout, --checkout-wait, --workspace-max-bytes and
// --repository-ca-configmap.
func CheckoutOf(c Config) (*kube.Renderer, application.CheckoutConfig, error) {
	specs, err := siteRenderer(c, c.BatchPodAnnotations)
	if err != nil {
		return nil, application.CheckoutConfig{}, err
	}
	return specs, application.CheckoutConfig{
		Image: c.BatchImage, Timeout: c.CheckoutTimeout, Wait: c.CheckoutWait, MaxBytes: c.WorkspaceMaxBytes, CAConfigMap: c.RepositoryCAConfigMap,
	}, nil
}

// FileReadsOf is the workspace reader's configuration for every family
// (docs/site-runtime.md#the-workspace-reader): the workspace helper's
// platform image (--batch-image), --read-file-timeout and
// --read-file-wait; the reader is rendered by CheckoutOf's renderer, like
// every Pod of the Site.
func FileReadsOf(c Config) application.FileReadConfig {
	return application.FileReadConfig{Image: c.BatchImage, Timeout: c.ReadFileTimeout, Wait: c.ReadFileWait}
}
