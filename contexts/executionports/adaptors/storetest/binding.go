package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// bindingTests are the stream's binding to an installation: the fence, rebind and an unused stream.
var bindingTests = []testCase{
	{"TheFirstInstallationBindsTheStreamAndFencesOthers", testBinding},
	{"RebindRecordsWhoAndWhenAndMovesTheFence", testRebind},
	{"AnUnusedStreamHasZeroPositions", testUnusedStream},
}

func testBinding(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := appendN(t, s, "alpha-k8s", 1, 1)
	st, err := application.BindStream(ctx, s, "alpha-k8s", inst, "environment:alpha-k8s", t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.InstallationID != inst || !st.BoundAt.Equal(t0) {
		t.Fatalf("after the first pull: %+v", st)
	}
	if _, err := application.BindStream(ctx, s, "alpha-k8s", inst, "environment:alpha-k8s", t0.Add(time.Hour)); err != nil {
		t.Fatalf("the bound installation pulls again: %v", err)
	}
	const second = "second-installation"
	if _, err := application.BindStream(ctx, s, "alpha-k8s", second, "environment:alpha-k8s", t0); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("second installation pull: got %v, want ErrInstallationMismatch", err)
	}
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", second, 1, Result(t, cs[0], 1, "x"), t0); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("second installation ack: got %v, want ErrInstallationMismatch", err)
	}
	if st := mustState(t, s, "alpha-k8s"); st.AcknowledgedSequence != 0 || st.InstallationID != inst {
		t.Fatalf("the fenced installation changed the stream: %+v", st)
	}
	// A result on a never-pulled stream binds nothing: only a pull binds
	// (docs/site-protocol.md#installation-fencing).
	bs := appendN(t, s, "beta-k8s", 2, 1)
	if _, err := application.ApplyResult(ctx, s, "beta-k8s", second, 1, Result(t, bs[0], 1, "x"), t0); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("ack on an unbound stream: got %v, want ErrInstallationMismatch", err)
	}
	if st := mustState(t, s, "beta-k8s"); st.InstallationID != "" || st.AcknowledgedSequence != 0 {
		t.Fatalf("ack on an unbound stream changed it: %+v", st)
	}
	if hist, err := s.Bindings(ctx, "beta-k8s"); err != nil || len(hist) != 0 {
		t.Fatalf("ack on an unbound stream recorded a binding: %+v, %v", hist, err)
	}
	hist, err := s.Bindings(ctx, "alpha-k8s")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Action != application.BindingBound || hist[0].InstallationID != inst || hist[0].Principal != "environment:alpha-k8s" || !hist[0].RecordedAt.Equal(t0) {
		t.Fatalf("binding history: %+v", hist)
	}
}

func testRebind(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := appendN(t, s, "alpha-k8s", 1, 1)
	if _, err := application.BindStream(ctx, s, "alpha-k8s", inst, "environment:alpha-k8s", t0); err != nil {
		t.Fatal(err)
	}
	const second = "second-installation"
	b, err := application.RebindStream(ctx, s, "alpha-k8s", second, "service:operator", "volume replaced", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if b.PreviousInstallationID != inst || b.InstallationID != second || b.Principal != "service:operator" || b.Reason != "volume replaced" || !b.RecordedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("rebind: %+v", b)
	}
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, Result(t, cs[0], 1, "x"), t0); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("old installation after rebind: got %v, want ErrInstallationMismatch", err)
	}
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", second, 1, Result(t, cs[0], 1, "x"), t0); err != nil {
		t.Fatalf("new installation after rebind: %v", err)
	}
	// Unbinding lets the next installation that pulls bind the stream.
	if _, err := application.RebindStream(ctx, s, "alpha-k8s", "", "service:operator", "reinstall", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := mustState(t, s, "alpha-k8s"); st.InstallationID != "" {
		t.Fatalf("after unbinding: bound to %q", st.InstallationID)
	}
	// A result after the unbind binds nothing (only a pull binds).
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", "third", 2, Result(t, cs[0], 2, "x"), t0); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("result after unbinding: got %v, want ErrInstallationMismatch", err)
	}
	if st := mustState(t, s, "alpha-k8s"); st.InstallationID != "" {
		t.Fatalf("a result after unbinding bound the stream to %q", st.InstallationID)
	}
	if st, err := application.BindStream(ctx, s, "alpha-k8s", "third", "environment:alpha-k8s", t0.Add(3*time.Hour)); err != nil || st.InstallationID != "third" {
		t.Fatalf("pull after unbinding: %+v, %v", st, err)
	}
	hist, err := s.Bindings(ctx, "alpha-k8s")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, h := range hist {
		actions = append(actions, h.Action+":"+h.InstallationID)
	}
	if want := fmt.Sprint([]string{"bound:" + inst, "rebound:second-installation", "unbound:", "bound:third"}); fmt.Sprint(actions) != want {
		t.Fatalf("history %v, want %v", actions, want)
	}
}

func testUnusedStream(t *testing.T, s application.StreamStore) {
	st := mustState(t, s, "never-used")
	if st.HeadSequence != 0 || st.AcknowledgedSequence != 0 || st.InstallationID != "" {
		t.Fatalf("unused stream: %+v", st)
	}
	if cs, err := s.CommandsAfter(context.Background(), "never-used", 0, 100, siteprotocol.MaxPullBytes); err != nil || len(cs) != 0 {
		t.Fatalf("commands of an unused stream: %v, %v", cs, err)
	}
}
