package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/platform/config"
)

// A body read deadline that is not a positive duration is refused before
// anything starts, naming the flag (docs/operations.md#request-bodies).
func TestServeRefusesABodyReadTimeoutThatIsNotPositive(t *testing.T) {
	for _, v := range []string{"0s", "-1s"} {
		var stderr bytes.Buffer
		code := Main(t.Context(), []string{"serve", "--role", "provisioning", "--body-read-timeout", v}, Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Roles: syntheticRoles})
		if code == 0 || !strings.Contains(stderr.String(), "--body-read-timeout") || !strings.Contains(stderr.String(), "positive") {
			t.Fatalf("--body-read-timeout %s: code %d, stderr %q", v, code, stderr.String())
		}
	}
}

// `metallo serve` with two faulty flags in each of two contexts names all four at once, each
// with its variable, whether given on the command line or in the environment, and starts
// nothing (docs/architecture.md#how-a-process-is-composed).
func TestServeNamesEveryFaultyFlagOfEveryContextAtOnce(t *testing.T) {
	faulty := []string{"allocation-freshness", "report-clock-skew", "binding-delivery-interval", "read-result-retention"}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"flags": {args: []string{"--allocation-freshness", "0s", "--report-clock-skew", "-1s", "--binding-delivery-interval", "-1s", "--read-result-retention", "-1h"}},
		"variables": {env: map[string]string{"METALLO_ALLOCATION_FRESHNESS": "0s", "METALLO_REPORT_CLOCK_SKEW": "-1s",
			"METALLO_BINDING_DELIVERY_INTERVAL": "-1s", "METALLO_READ_RESULT_RETENTION": "-1h"}},
		"both": {args: []string{"--allocation-freshness", "0s", "--binding-delivery-interval", "-1s"},
			env: map[string]string{"METALLO_REPORT_CLOCK_SKEW": "-1s", "METALLO_READ_RESULT_RETENTION": "-1h"}},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--role", "provisioning,execution", "--waldur-instance", "https://waldur.example.org",
				"--resource-owner", "in-process", "--log-level", "error"}, tc.args...)
			code := Main(t.Context(), args, Env{Stdout: &stdout, Stderr: &stderr, LookupEnv: func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }})
			if code == 0 {
				t.Fatal("served")
			}
			for _, flag := range faulty {
				if want := "--" + flag + " (" + config.EnvName(flag) + ")"; !strings.Contains(stderr.String(), want) {
					t.Errorf("the refusal does not name %s:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// The removed --environment-site is refused naming environments.yaml, whatever the roles, beside
// the other faults (the real binary's refusal: TestAStartWithEnvironmentSiteIsRefusedNamingTheEnvironmentsFile).
func TestServeRefusesTheRemovedEnvironmentSiteWithTheOtherFaults(t *testing.T) {
	for role, other := range map[string]string{"provisioning": "--waldur-instance (METALLO_WALDUR_INSTANCE)", "execution": "--resource-owner (METALLO_RESOURCE_OWNER)"} {
		var stderr bytes.Buffer
		code := Main(t.Context(), []string{"serve", "--role", role, "--environment-site", "alpha-k8s=alpha", "--log-level", "error"},
			Env{Stdout: &bytes.Buffer{}, Stderr: &stderr})
		out := stderr.String()
		if code == 0 || !strings.Contains(out, "--environment-site (METALLO_ENVIRONMENT_SITE)") || !strings.Contains(out, "--environments-file") || !strings.Contains(out, other) {
			t.Errorf("%s: code %d:\n%s", role, code, out)
		}
	}
}
