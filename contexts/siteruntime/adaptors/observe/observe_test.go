package observe_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/observe"
)

// Every failed heartbeat is counted; the log carries the first of each
// HeartbeatLogInterval (a minute), so a burst within it logs once.
func TestHeartbeatFailuresAreCountedAndLoggedOncePerInterval(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	reg := prometheus.NewRegistry()
	e, err := observe.New(zap.New(core), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("write heartbeat: read-only file system")
	for range 50 {
		e.HeartbeatFailed(cause)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64 = -1
	for _, f := range families {
		if f.GetName() == "metallo_runtime_heartbeat_failures_total" {
			counted = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if counted != 50 {
		t.Fatalf("metallo_runtime_heartbeat_failures_total = %v, want 50", counted)
	}
	entries := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(entries) != 1 {
		t.Fatalf("%d warnings logged for a burst of 50 failures, want 1", len(entries))
	}
	if got := entries[0].ContextMap()["error"]; got != cause.Error() {
		t.Fatalf("logged error %v", got)
	}
}
