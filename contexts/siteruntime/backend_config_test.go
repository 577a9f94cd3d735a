package siteruntime_test

import (
	"slices"
	"testing"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Per-backend configuration (docs/operations.md#runtime-flags): a slurm
// Runtime needs none of the Kubernetes flags — no batch image, no client
// rate limit, no Deployment progress deadline — while a kubernetes one
// still requires them; a configmap: installation record is a kubernetes
// Runtime's only; --backend is kubernetes or slurm, by serve's, install's
// and check's rules alike.
func TestTheKubernetesFlagsAreRequiredOnlyForAKubernetesRuntime(t *testing.T) {
	bare := validConfig(t)
	bare.BatchImage, bare.KubeAPIQPS, bare.KubeAPIBurst, bare.ProgressDeadline = "", 0, 0, 0
	bare.PodTolerations = []string{"=:Bad"}

	slurm := bare
	slurm.Backend = siteprotocol.BackendSlurm
	if err := slurm.Validate(); err != nil {
		t.Fatalf("a slurm Runtime without the Kubernetes flags: %v", err)
	}
	for _, b := range []siteprotocol.Backend{"", siteprotocol.BackendKubernetes} {
		k := bare
		k.Backend = b
		got := flagsNamed(k.Validate())
		for _, want := range []string{"batch-image", "kube-api-qps", "kube-api-burst", "progress-deadline", "pod-tolerations"} {
			if !slices.Contains(got, want) {
				t.Errorf("backend %q: %s not refused (refused %v)", b, want, got)
			}
		}
	}

	slurm.InstallationRecord = "configmap:metallo-runtime/installation"
	if got := flagsNamed(slurm.Validate()); !slices.Equal(got, []string{"installation-record"}) {
		t.Fatalf("a slurm Runtime's configmap record: refused %v, want installation-record alone", got)
	}
	for name, validate := range map[string]func() error{"install": slurm.ValidateInstall, "check": func() error { return slurm.ValidateCheck(1) }} {
		if got := flagsNamed(validate()); !slices.Contains(got, "installation-record") {
			t.Errorf("%s of a slurm Runtime with a configmap record: refused %v", name, got)
		}
	}

	other := validConfig(t)
	other.Backend = "nomad"
	for name, validate := range map[string]func() error{"serve": other.Validate, "install": other.ValidateInstall, "check": func() error { return other.ValidateCheck(1) }} {
		if got := flagsNamed(validate()); !slices.Equal(got, []string{"backend"}) {
			t.Errorf("%s with --backend nomad: refused %v, want backend alone", name, got)
		}
	}
}
