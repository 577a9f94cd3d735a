package resourceprovisioning_test

import (
	"errors"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning"
	"github.com/pharos-metallo/metallo/platform/config"
)

// TestEnvironmentSitesMustBeIDs: --environment-site entries name an
// environment and a Site by their IDs; anything else is refused at start
// naming the flag.
func TestEnvironmentSitesMustBeIDs(t *testing.T) {
	c := validConfig()
	c.Environments = map[string]string{"alpha-k8s": "alpha", "alpha-hpc": "alpha", "beta.k8s_1": "beta"}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid entries: %v", err)
	}
	for _, bad := range []map[string]string{
		{"alpha-k8s": ""},
		{"": "alpha"},
		{"alpha k8s": "alpha"},
		{"alpha-k8s": "al/pha"},
		{"-alpha": "alpha"},
	} {
		c := validConfig()
		c.Environments = bad
		var fe *config.FlagError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Flag != resourceprovisioning.EnvironmentSiteFlag {
			t.Errorf("%v: %v, want a flag error naming %s", bad, err, resourceprovisioning.EnvironmentSiteFlag)
		}
	}
}
