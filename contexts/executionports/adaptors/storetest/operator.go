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

// operatorTests are the Runtime's stop report and the operator's reads
// (docs/execution-ports.md#runtime-stops, docs/operations.md#operator-reads).
var operatorTests = []testCase{
	{"AStopReportIsFencedShownAndClearedByTheNextBindingPull", testStopReport},
	{"ACommandPageReadsEitherWayByOperation", testCommandPage},
	{"TheOperatorsCommandListingFiltersAndPagesBothWays", testCommandListing},
}

func view(t *testing.T, streams *application.Streams) application.EnvironmentView {
	t.Helper()
	v, err := streams.EnvironmentView(context.Background(), deliveryEnv)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func testStopReport(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	streams := application.NewStreams(s, oneEnvironment{}, clk, application.NewWakeups(), time.Second)
	appendN(t, s, deliveryEnv, 1, 3)
	if err := pullAs(streams, inst, "v1.4.0", true); err != nil {
		t.Fatal(err)
	}
	if v := view(t, streams); v.Stopped || v.Lag() != 3 || v.State.InstallationID != inst || !v.HasVersion || v.Version.Version != "v1.4.0" {
		t.Fatalf("a working stream's view: %+v", v)
	}
	report := siteprotocol.StopReport{Reason: siteprotocol.StopJournalIntegrity, Sequence: 2, RuntimeVersion: "v1.4.0", Message: "delivery.sqlite: the saved result fails its checksum"}

	// What breaks the report's rules changes nothing.
	for _, bad := range []siteprotocol.StopReport{
		{Reason: "made-up", RuntimeVersion: "v1"},
		{Reason: siteprotocol.StopJournalIntegrity, Sequence: -1, RuntimeVersion: "v1"},
		{Reason: siteprotocol.StopJournalIntegrity, RuntimeVersion: "v 1"},
		{Reason: siteprotocol.StopJournalIntegrity, RuntimeVersion: "v1", Message: strings.Repeat("é", siteprotocol.MaxStopMessageBytes/2+1)},
	} {
		if _, err := streams.ReportStop(ctx, deliveryEnv, inst, bad); !errors.Is(err, application.ErrInvalidRequest) {
			t.Fatalf("report %+v: got %v, want ErrInvalidRequest", bad, err)
		}
	}
	// Another installation is fenced off.
	if _, err := streams.ReportStop(ctx, deliveryEnv, "other-installation", report); !errors.Is(err, domain.ErrInstallationMismatch) {
		t.Fatalf("a report by another installation: got %v, want ErrInstallationMismatch", err)
	}
	if v := view(t, streams); v.Stopped {
		t.Fatalf("a refused report was recorded: %+v", v.Stop)
	}

	clk.Advance(time.Second)
	if _, err := streams.ReportStop(ctx, deliveryEnv, inst, report); err != nil {
		t.Fatal(err)
	}
	want := application.RuntimeStop{Environment: deliveryEnv, InstallationID: inst, Reason: report.Reason, Sequence: 2, Version: "v1.4.0", Message: report.Message, StoppedAt: clk.Now()}
	if v := view(t, streams); !v.Stopped || v.Stop != want {
		t.Fatalf("the stop on record: %+v (stopped %v), want %+v", v.Stop, v.Stopped, want)
	}
	// A later report replaces it.
	clk.Advance(time.Second)
	report.Reason, report.Message = siteprotocol.StopUnexplainedNativeState, "recover command 3: a foreign Job under the Attempt's name"
	if _, err := streams.ReportStop(ctx, deliveryEnv, inst, report); err != nil {
		t.Fatal(err)
	}
	want.Reason, want.Message, want.StoppedAt = report.Reason, report.Message, clk.Now()
	if v := view(t, streams); !v.Stopped || v.Stop != want {
		t.Fatalf("the replaced stop: %+v, want %+v", v.Stop, want)
	}
	// A read-only pull (`runtime check`) is no sign of work: it stays.
	if err := pullAs(streams, inst, "v1.4.0", false); err != nil {
		t.Fatal(err)
	}
	if v := view(t, streams); !v.Stopped {
		t.Fatal("a read-only pull cleared the stop")
	}
	// The Runtime works again: its binding pull clears the stop, and the
	// next clear finds none.
	clk.Advance(time.Second)
	if err := pullAs(streams, inst, "v1.4.1", true); err != nil {
		t.Fatal(err)
	}
	if v := view(t, streams); v.Stopped || v.Version.Version != "v1.4.1" {
		t.Fatalf("after the Runtime resumed: %+v", v)
	}
	if cleared, err := s.ClearRuntimeStop(ctx, deliveryEnv); err != nil || cleared {
		t.Fatalf("a second clear: %v, %v", cleared, err)
	}
}

func seqs(rows []application.CommandRow) []int64 {
	var out []int64
	for _, r := range rows {
		out = append(out, r.Sequence)
	}
	return out
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testCommandPage(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := boundStream(t, s, 5)
	mustApply(t, s, 1, Result(t, cs[0], 1, "running"))
	for _, c := range []struct {
		q    application.PageQuery
		want []int64
	}{
		{application.PageQuery{Limit: 3}, []int64{1, 2, 3}},
		{application.PageQuery{After: 3, Limit: 10}, []int64{4, 5}},
		{application.PageQuery{Before: 5, Limit: 2}, []int64{4, 3}},
		{application.PageQuery{Before: 2, Limit: 10}, []int64{1}},
		{application.PageQuery{Operation: "observe", Limit: 10}, []int64{1, 2, 3, 4, 5}},
		{application.PageQuery{Operation: "start", Limit: 10}, nil},
	} {
		got, err := s.CommandPage(ctx, "alpha-k8s", c.q)
		if err != nil {
			t.Fatal(err)
		}
		if !equal(seqs(got), c.want) {
			t.Fatalf("page %+v: %v, want %v", c.q, seqs(got), c.want)
		}
	}
	got, err := s.CommandPage(ctx, "alpha-k8s", application.PageQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	first, second := got[0], got[1]
	r := Result(t, cs[0], 1, "running")
	if first.ID != cs[0].ID || first.Operation != "observe" || first.Digest != cs[0].Digest || string(first.Canonical) != string(cs[0].Canonical) ||
		!first.AppendedAt.Equal(t0) || string(first.Result) != string(r.Bytes) || first.ResultDigest != r.Digest || !first.AcknowledgedAt.Equal(t0) {
		t.Fatalf("an acknowledged command's row: %+v", first)
	}
	if second.Result != nil || second.ResultDigest != "" || !second.AcknowledgedAt.IsZero() || !second.ResultExpiredAt.IsZero() {
		t.Fatalf("a pending command's row: %+v", second)
	}
}

func testCommandListing(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	streams := application.NewStreams(s, oneEnvironment{}, clock.NewManual(t0), application.NewWakeups(), time.Second)
	cs := boundStream(t, s, 5)
	mustApply(t, s, 1, Result(t, cs[0], 1, "running"))
	mustApply(t, s, 2, Result(t, cs[1], 2, "running"))
	list := func(q application.CommandsQuery) ([]int64, application.CommandsPage) {
		t.Helper()
		p, err := streams.Commands(ctx, deliveryEnv, q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		var got []int64
		for _, c := range p.Commands {
			got = append(got, c.Row.Sequence)
		}
		return got, p
	}
	// Newest first by pages, each ascending, to the first command.
	for _, c := range []struct {
		q            application.CommandsQuery
		want         []int64
		older, newer int64
	}{
		{application.CommandsQuery{Limit: 2}, []int64{4, 5}, 4, 5},
		{application.CommandsQuery{Before: 4, Limit: 2}, []int64{2, 3}, 2, 3},
		{application.CommandsQuery{Before: 2, Limit: 2}, []int64{1}, 0, 1},
		{application.CommandsQuery{Forward: true, Limit: 2}, []int64{1, 2}, 0, 2},
		{application.CommandsQuery{Forward: true, After: 2, Limit: 2}, []int64{3, 4}, 3, 4},
		{application.CommandsQuery{Forward: true, After: 4, Limit: 2}, []int64{5}, 5, 5},
		{application.CommandsQuery{Outcome: "succeeded"}, []int64{1, 2}, 0, 5},
		{application.CommandsQuery{Outcome: application.OutcomePending, Limit: 2}, []int64{4, 5}, 4, 5},
		{application.CommandsQuery{Outcome: "failed"}, nil, 0, 5},
		{application.CommandsQuery{Member: uuidFor(4, 3)}, []int64{3}, 0, 5},
		{application.CommandsQuery{Attempt: uuidFor(3, 2), Outcome: "succeeded"}, []int64{2}, 0, 5},
		{application.CommandsQuery{Operation: "start"}, nil, 0, 5},
	} {
		got, p := list(c.q)
		if !equal(got, c.want) || p.Older != c.older || p.Newer != c.newer {
			t.Fatalf("list %+v: %v older %d newer %d, want %v older %d newer %d", c.q, got, p.Older, p.Newer, c.want, c.older, c.newer)
		}
	}
	// Each command carries its envelope and its result's outcome.
	_, p := list(application.CommandsQuery{Forward: true, Limit: 1})
	c := p.Commands[0]
	if c.AttemptID != uuidFor(3, 1) || c.MemberID != uuidFor(4, 1) || c.RunID != uuidFor(2, 1) || c.Family != "batch" ||
		c.Outcome != "succeeded" || c.Reason != "observed" || c.Message != "running" || c.Result == nil || c.Command == nil {
		t.Fatalf("the first command's view: %+v", c)
	}
	for _, bad := range []application.CommandsQuery{{Forward: true, Before: 3}, {Before: -1}, {Outcome: "won"}} {
		if _, err := streams.Commands(ctx, deliveryEnv, bad); !errors.Is(err, application.ErrInvalidRequest) {
			t.Fatalf("list %+v: got %v, want ErrInvalidRequest", bad, err)
		}
	}
}
