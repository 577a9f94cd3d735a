package app

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/platform/config"
)

func syntheticRoles() RoleSet {
	return RoleSet{
		{Name: "provisioning", Context: "resource_provisioning", Central: true},
		{Name: "execution", Context: "execution_ports", Central: true},
		{Name: "runtime", Context: "site_runtime"},
	}
}

func TestUnknownRoleFailsListingTheValidRoles(t *testing.T) {
	_, err := syntheticRoles().Select([]string{"provisioning,billing"})
	if err == nil || !errors.Is(err, config.ErrInvalidFlag) {
		t.Fatalf("want a flag error, got %v", err)
	}
	for _, want := range []string{"--role", `"billing"`, "execution, provisioning, runtime"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestNoRoleIsAnError(t *testing.T) {
	if _, err := syntheticRoles().Select(nil); err == nil || !strings.Contains(err.Error(), "choose at least one role") {
		t.Fatalf("got %v", err)
	}
}

func TestRuntimeRoleRunsAlone(t *testing.T) {
	if _, err := syntheticRoles().Select([]string{"runtime", "provisioning"}); err == nil || !strings.Contains(err.Error(), "runs alone") {
		t.Fatalf("got %v", err)
	}
	rs, err := syntheticRoles().Select([]string{"runtime"})
	if err != nil || len(rs) != 1 {
		t.Fatalf("runtime alone: %v", err)
	}
}

func TestCentralRolesCombineInRegistryOrderWithoutDuplicates(t *testing.T) {
	rs, err := syntheticRoles().Select([]string{"execution", "provisioning,execution"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(namesOf(rs), ","); got != "provisioning,execution" {
		t.Fatalf("got %s", got)
	}
}

func TestServeWithUnknownRoleExitsNonZeroNamingTheRoles(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--role", "nope"}, Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Roles: syntheticRoles})
	if code == 0 || !strings.Contains(stderr.String(), "valid roles: execution, provisioning, runtime") {
		t.Fatalf("code %d, stderr %q", code, stderr.String())
	}
}

func TestBadEnvironmentValueFailsStartNamingTheFlag(t *testing.T) {
	var stderr bytes.Buffer
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Roles: syntheticRoles, LookupEnv: func(k string) (string, bool) {
		if k == "METALLO_MIGRATE" {
			return "perhaps", true
		}
		return "", false
	}}
	code := Main(t.Context(), []string{"serve", "--role", "provisioning"}, env)
	if code == 0 || !strings.Contains(stderr.String(), "--migrate (METALLO_MIGRATE)") {
		t.Fatalf("code %d, stderr %q", code, stderr.String())
	}
}

func TestKeysNewPrintsAKeyOnceAndItsHash(t *testing.T) {
	var out bytes.Buffer
	code := Main(t.Context(), []string{"keys", "new", "--principal", "site:alpha"}, Env{Stdout: &out, Stderr: &out, Roles: syntheticRoles})
	if code != 0 {
		t.Fatalf("code %d: %s", code, out.String())
	}
	s := out.String()
	if !strings.HasPrefix(s, "key: mtl_") || !strings.Contains(s, "principal: site:alpha") || !strings.Contains(s, "sha256: ") {
		t.Fatalf("output %q", s)
	}
	var bad bytes.Buffer
	if code := Main(t.Context(), []string{"keys", "new", "--principal", "admin:root"}, Env{Stdout: &bad, Stderr: &bad, Roles: syntheticRoles}); code == 0 {
		t.Fatal("a principal of an unknown kind must be refused")
	}
}

func TestOpenAPIOfARoleWithoutAnAPIIsRefused(t *testing.T) {
	var out bytes.Buffer
	code := Main(t.Context(), []string{"openapi", "--role", "runtime"}, Env{Stdout: &out, Stderr: &out, Roles: syntheticRoles})
	if code == 0 || !strings.Contains(out.String(), "serves no HTTP API") {
		t.Fatalf("code %d: %s", code, out.String())
	}
}

func TestProfilingWithoutAnAdminListenerFailsStart(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--role", "provisioning", "--admin-listen", "", "--admin-profiling"}, Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Roles: syntheticRoles})
	if code == 0 || !strings.Contains(stderr.String(), "--admin-profiling") || !strings.Contains(stderr.String(), "needs an admin listener") {
		t.Fatalf("code %d, stderr %q", code, stderr.String())
	}
}
