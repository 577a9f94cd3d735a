// Command kube-proxy is the kube-proxy of the local cluster's real node, built from the same
// k8s.io/kubernetes module as its control plane and kubelet (see ../../README.md, "The real
// node"): it programs iptables on the host so that Pods on the real node reach ClusterIP
// Services, kubernetes.default included. It is its own binary, like the kubelet: the node is
// optional, and the proxy's dependencies stay out of the control plane's binary.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as the upstream main registers
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as the upstream main registers
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as the upstream main registers
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
