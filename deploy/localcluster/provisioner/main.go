// Command provisioner is the local cluster's dynamic volume provisioner: for each
// PersistentVolumeClaim of its StorageClass it makes a directory under the cluster's state
// directory and a hostPath PersistentVolume for it, and removes the directory when the volume
// is deleted. Built on sigs.k8s.io/sig-storage-lib-external-provisioner; in its own module
// because that library needs a newer client-go than the control plane's.
//
// Each volume directory is made world-writable (mode 0777, set after the umask), so that every
// Pod's user can write it: the Runtime (uid 65532), a member's containers and workspace helper
// (the platform image's uid 65532, or whatever user a Pod runs as). A hostPath volume gets no
// fsGroup ownership from the kubelet, unlike a real Site's volumes, so this is the local
// cluster's stand-in for it (README.md, "Volumes"). On KWOK's Nodes nothing writes into them;
// on the real node containers do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

type hostPathProvisioner struct {
	dir string
}

// Provision makes the claim's directory and its PersistentVolume.
func (p *hostPathProvisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.PVC.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claims with a selector are not supported")
	}
	path := filepath.Join(p.dir, o.PVName)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// MkdirAll's mode is reduced by the umask: set it.
	if err := os.Chmod(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	hostPathType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   o.PVName,
			Labels: map[string]string{"localcluster.metallo.dev/provisioned": "true"},
		},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			MountOptions:                  o.StorageClass.MountOptions,
			VolumeMode:                    o.PVC.Spec.VolumeMode,
			Capacity: corev1.ResourceList{
				corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage],
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &hostPathType},
			},
		},
	}
	klog.InfoS("provisioned", "pv", o.PVName, "claim", klog.KObj(o.PVC), "path", path)
	return pv, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory; only directories under the volumes directory.
func (p *hostPathProvisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a hostPath volume"}
	}
	path := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(path) != filepath.Clean(p.dir) || !strings.HasPrefix(filepath.Base(path), "pvc-") {
		return &controller.IgnoredError{Reason: fmt.Sprintf("%s is not a volume of %s", path, p.dir)}
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	klog.InfoS("deleted", "pv", pv.Name, "path", path)
	return nil
}

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the local cluster")
	name := flag.String("name", "localcluster.metallo.dev/hostpath", "provisioner name of the StorageClass")
	dir := flag.String("volumes-dir", "", "directory holding the volumes")
	flag.Parse()
	if *kubeconfig == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "provisioner: --kubeconfig and --volumes-dir are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		klog.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pc := controller.NewProvisionController(ctx, cs, *name, &hostPathProvisioner{dir: *dir},
		controller.LeaderElection(false),
	)
	klog.InfoS("provisioner running", "name", *name, "volumes", *dir)
	pc.Run(ctx)
}
