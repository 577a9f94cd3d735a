// Command kubelet is the kubelet of the local cluster's real node, built from the same
// k8s.io/kubernetes module as its control plane (see ../../README.md, "The real node"). It is
// its own binary, not a command of localcluster: the node is optional, and the kubelet's
// dependencies (cAdvisor, the container manager) stay out of the control plane's binary.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as the upstream main registers
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as the upstream main registers
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as the upstream main registers
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand()))
}
