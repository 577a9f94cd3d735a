package siteruntime

import (
	kubeapp "github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
)

// NewApplicationFamily builds the application family on the shared
// workload client (docs/site-runtime.md#one-lifecycle-for-every-family):
// the Site's GPU and scheduling flags and --progress-deadline in what it
// renders (kubeapp.Renderer).
func NewApplicationFamily(c Config, native appservice.Natives) (*appservice.Family, error) {
	specs, err := siteRenderer(c, nil)
	if err != nil {
		return nil, err
	}
	return appservice.New(native, kubeapp.NewRenderer(specs), appservice.Config{ProgressDeadline: c.ProgressDeadline}), nil
}
