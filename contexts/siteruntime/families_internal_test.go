package siteruntime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Every family of the runtime role's one table (families) declares each
// capability its operations need, and the module wires each one: batch
// reads logs and workspace files but never proxies (a batch Attempt has
// no service: docs/site-protocol.md#private-reads), application and
// inference also proxy. A dropped capability method, or a dropped wiring,
// fails here instead of answering unsupported-operation. Nothing is sent
// to the API server: the families are only built.
func TestEveryFamilyOfTheTableHasTheCapabilitiesItsOperationsNeed(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Kubeconfig: kubeconfig, BatchImage: "registry.example/batch@sha256:" + strings.Repeat("a", 64)}
	native, err := NewNativeObjects(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := familyDeps{Config: cfg, Native: native, Access: application.NewAccess(nil, native, nil, clock.System{}),
		Failpoints: application.NoFailpoints{}, Clock: clock.System{}}
	workload := []siteprotocol.Operation{siteprotocol.OpPrepare, siteprotocol.OpStart, siteprotocol.OpObserve, siteprotocol.OpCancel, siteprotocol.OpCleanup,
		siteprotocol.OpReadLogs, siteprotocol.OpReadFile}
	want := map[siteprotocol.Family][]siteprotocol.Operation{
		siteprotocol.FamilyBatch:       workload,
		siteprotocol.FamilyApplication: append(slices.Clone(workload), siteprotocol.OpProxy),
		siteprotocol.FamilyInference:   append(slices.Clone(workload), siteprotocol.OpProxy),
	}
	seen := map[siteprotocol.Family]bool{}
	for _, f := range families() {
		e, err := newFamilyExecutor(d, f)
		if err != nil {
			t.Fatal(err)
		}
		name := e.Family().Name()
		seen[name] = true
		if got := application.Operations(e.Family()); !slices.Equal(got, want[name]) {
			t.Errorf("the %s family declares %v, want %v", name, got, want[name])
		}
		if got := e.Operations(); !slices.Equal(got, want[name]) {
			t.Errorf("the %s executor is wired for %v, want %v", name, got, want[name])
		}
		if _, ok := e.Family().(application.CheckoutFamily); !ok {
			t.Errorf("the %s family does not check repositories out", name)
		}
		var ops []siteprotocol.Operation
		for _, r := range e.Registrations() {
			if r.Family != name {
				t.Errorf("the %s executor registers %s of family %s", name, r.Operation, r.Family)
			}
			ops = append(ops, r.Operation)
		}
		for _, op := range want[name] {
			if !slices.Contains(ops, op) {
				t.Errorf("the %s executor does not register %s", name, op)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the table registers %v, want every family of %v", seen, want)
	}
}
