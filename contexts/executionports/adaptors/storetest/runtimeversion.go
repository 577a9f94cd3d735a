package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// runtimeVersionTests are the last Runtime version per environment
// (docs/execution-ports.md#runtime-versions): the store's record, and the
// pulls that write it through the Streams service.
var runtimeVersionTests = []testCase{
	{"TheLastRuntimeVersionIsKeptPerEnvironment", testRuntimeVersionRecord},
	{"AnEarlierPullNeverReplacesALaterOnesRuntimeVersion", testRuntimeVersionOrder},
	{"OnlyAnAdmittedBindingPullRecordsItsRuntimeVersion", testRuntimeVersionPulls},
}

func mustRuntimeVersion(t *testing.T, s application.StreamStore, env string) (application.RuntimeVersion, bool) {
	t.Helper()
	v, ok, err := s.RuntimeVersion(context.Background(), env)
	if err != nil {
		t.Fatalf("runtime version of %s: %v", env, err)
	}
	return v, ok
}

func wantRuntimeVersion(t *testing.T, s application.StreamStore, want application.RuntimeVersion) {
	t.Helper()
	got, ok := mustRuntimeVersion(t, s, want.Environment)
	if !ok || got.Environment != want.Environment || got.InstallationID != want.InstallationID || got.Version != want.Version || !got.PulledAt.Equal(want.PulledAt) {
		t.Fatalf("runtime version of %s: %+v (recorded %v), want %+v", want.Environment, got, ok, want)
	}
}

func testRuntimeVersionRecord(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	appendN(t, s, "alpha-k8s", 1, 1)
	appendN(t, s, "beta-k8s", 2, 1)
	mustBind(t, s, "alpha-k8s", inst)
	mustBind(t, s, "beta-k8s", inst)
	if _, ok := mustRuntimeVersion(t, s, "alpha-k8s"); ok {
		t.Fatal("a runtime version before any was recorded")
	}
	prefix := "v0.0.0-20261207192130-0f41f17e8bbd+dirty"
	long := prefix + strings.Repeat("x", siteprotocol.MaxRuntimeVersionBytes-len(prefix))
	if len(long) != siteprotocol.MaxRuntimeVersionBytes || !siteprotocol.ValidRuntimeVersion(long) {
		t.Fatalf("test version of %d bytes", len(long))
	}
	alpha := application.RuntimeVersion{Environment: "alpha-k8s", InstallationID: inst, Version: long, PulledAt: t0}
	if err := s.RecordRuntimeVersion(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, alpha)
	if _, ok := mustRuntimeVersion(t, s, "beta-k8s"); ok {
		t.Fatal("alpha-k8s's runtime version is recorded for beta-k8s")
	}
	// A pull without the header is recorded with an empty version: the
	// Runtime pulled, and said nothing about its build.
	beta := application.RuntimeVersion{Environment: "beta-k8s", InstallationID: inst, Version: "", PulledAt: t0.Add(time.Second)}
	if err := s.RecordRuntimeVersion(ctx, beta); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, beta)
	wantRuntimeVersion(t, s, alpha)
	// Another installation after a rebind replaces the record.
	if _, err := application.RebindStream(ctx, s, "alpha-k8s", "second-installation", "service:operator", "volume replaced", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := application.RuntimeVersion{Environment: "alpha-k8s", InstallationID: "second-installation", Version: "v1.4.1", PulledAt: t0.Add(time.Hour)}
	if err := s.RecordRuntimeVersion(ctx, second); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, second)
}

func testRuntimeVersionOrder(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	appendN(t, s, "alpha-k8s", 1, 1)
	mustBind(t, s, "alpha-k8s", inst)
	later := application.RuntimeVersion{Environment: "alpha-k8s", InstallationID: inst, Version: "v1.5.0", PulledAt: t0.Add(2 * time.Hour)}
	if err := s.RecordRuntimeVersion(ctx, later); err != nil {
		t.Fatal(err)
	}
	// A slower pull of the version before, pulled earlier, lands after it:
	// nothing changes.
	earlier := application.RuntimeVersion{Environment: "alpha-k8s", InstallationID: inst, Version: "v1.4.0", PulledAt: t0.Add(2*time.Hour - time.Millisecond)}
	if err := s.RecordRuntimeVersion(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, later)
	next := application.RuntimeVersion{Environment: "alpha-k8s", InstallationID: inst, Version: "v1.5.0", PulledAt: t0.Add(3 * time.Hour)}
	if err := s.RecordRuntimeVersion(ctx, next); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, next)
}

// pullAs is one pull of alpha-k8s's stream through the service.
func pullAs(streams *application.Streams, installation, version string, bind bool) error {
	_, err := streams.Pull(context.Background(), application.PullQuery{
		Environment: deliveryEnv, Installation: installation, Principal: "environment:" + deliveryEnv,
		Limit: 10, Bind: bind, RuntimeVersion: version,
	})
	return err
}

func testRuntimeVersionPulls(t *testing.T, s application.StreamStore) {
	clk := clock.NewManual(t0)
	streams := application.NewStreams(s, oneEnvironment{}, clk, application.NewWakeups(), time.Second)
	appendN(t, s, deliveryEnv, 1, 1)

	// A read-only pull (`runtime check`) records nothing, nor does a pull
	// the header's rule refuses.
	if err := pullAs(streams, inst, "v1.4.0", false); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"v1 beta", "v1\x00", "vé", strings.Repeat("x", siteprotocol.MaxRuntimeVersionBytes+1)} {
		if err := pullAs(streams, inst, bad, true); !errors.Is(err, application.ErrInvalidRequest) {
			t.Fatalf("pull with version %q: got %v, want ErrInvalidRequest", bad, err)
		}
	}
	if _, ok := mustRuntimeVersion(t, s, deliveryEnv); ok {
		t.Fatal("a read-only or refused pull recorded a runtime version")
	}
	if st := mustState(t, s, deliveryEnv); st.InstallationID != "" {
		t.Fatalf("a refused pull bound the stream: %+v", st)
	}

	// The first binding pull records its version with the pull's time.
	if err := pullAs(streams, inst, "v1.4.0", true); err != nil {
		t.Fatal(err)
	}
	first := application.RuntimeVersion{Environment: deliveryEnv, InstallationID: inst, Version: "v1.4.0", PulledAt: t0}
	wantRuntimeVersion(t, s, first)
	// Another installation is fenced off and records nothing.
	clk.Advance(time.Second)
	if err := pullAs(streams, "other-installation", "v9.9.9", true); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("pull by another installation: got %v, want ErrInstallationMismatch", err)
	}
	wantRuntimeVersion(t, s, first)
	// The same version again within RuntimeVersionRefresh is not written;
	// after it, the pull's time is.
	clk.Set(t0.Add(application.RuntimeVersionRefresh - time.Second))
	if err := pullAs(streams, inst, "v1.4.0", true); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, first)
	refreshed := first
	refreshed.PulledAt = t0.Add(application.RuntimeVersionRefresh)
	clk.Set(refreshed.PulledAt)
	if err := pullAs(streams, inst, "v1.4.0", true); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, refreshed)
	// Another version (the Runtime upgraded) is recorded at once, and so
	// is a pull without the header.
	clk.Advance(time.Second)
	if err := pullAs(streams, inst, "v1.5.0", true); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, application.RuntimeVersion{Environment: deliveryEnv, InstallationID: inst, Version: "v1.5.0", PulledAt: clk.Now()})
	clk.Advance(time.Second)
	if err := pullAs(streams, inst, "", true); err != nil {
		t.Fatal(err)
	}
	wantRuntimeVersion(t, s, application.RuntimeVersion{Environment: deliveryEnv, InstallationID: inst, Version: "", PulledAt: clk.Now()})
}
