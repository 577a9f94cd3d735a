// Command localcluster is the local Kubernetes control plane of Metallo's tests and demo, built
// from the k8s.io/kubernetes module: one binary that runs, by its first argument, the
// kube-apiserver, the kube-controller-manager, the kube-scheduler or an embedded etcd, and that
// brings the whole cluster up and down (see ../../README.md).
package main

import (
	"fmt"
	"os"
	_ "time/tzdata" // CronJob time zones, as the upstream kube-controller-manager main has

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream mains register
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream mains register
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream mains register
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/pharos-metallo/metallo/deploy/localcluster/internal/cluster"
	"github.com/pharos-metallo/metallo/deploy/localcluster/internal/etcd"
)

const usage = `usage: localcluster COMMAND [flags]

Cluster commands (state directory from --dir or METALLO_CLUSTER_DIR):
  up        start the local cluster, or reuse a healthy running one
  down      stop every process of the local cluster
  status    print whether the local cluster is up (exit 1 when it is not)
  reap      stop the cluster once no test binary holds a lease on it (started by up)
  node-down stop the cluster's real node only and restore the host (up adds it again)

Components (run by up, one process each):
  etcd                 embedded etcd
  apiserver            kube-apiserver
  controller-manager   kube-controller-manager
  scheduler            kube-scheduler
  forward              the real node's forwarder of the API server onto the pod network
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	var command *cobra.Command
	switch name {
	case "apiserver", "kube-apiserver":
		command = apiserver.NewAPIServerCommand()
	case "controller-manager", "kube-controller-manager":
		command = controllermanager.NewControllerManagerCommand()
	case "scheduler", "kube-scheduler":
		command = scheduler.NewSchedulerCommand()
	case "etcd":
		os.Exit(etcd.Main(args))
	case "up", "down", "status", "reap", "node-down":
		os.Exit(cluster.Main(name, args))
	case "forward":
		os.Exit(cluster.Forward(args))
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "localcluster: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}
