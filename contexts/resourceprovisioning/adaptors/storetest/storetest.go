// Package storetest is the one conformance suite every Resource Provisioning
// store adaptor passes (SQLite in t.TempDir and real PostgreSQL): the report
// rules through the application service (material change, renewal,
// duplicate, stale, conflict, retirement, all-or-nothing batches), the Beto
// views, the reads (snapshot paging, change feed, freshness), concurrency
// without lost updates, a change feed that never skips a late commit, and
// ErrUnavailable when the database is gone.
//
// The suite is split by concern, one file each with its table of tests
// (the shape of River's driver conformance suite): reports.go (report
// intake), projects.go (Beto's events and bindings), feed.go (snapshot and
// change feed), concurrency.go, availability.go (freshness, a database that
// is gone), accounts.go (members' native accounts) and inconsistencies.go.
// This file holds Exercise and the environment every test runs in.
//
// Rule source: docs/resource-provisioning.md.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/telemetry"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/clock"
)

// Subject is one freshly migrated, empty store under test.
type Subject struct {
	Store application.Store
	// Receipts counts the stored receipts of an allocation.
	Receipts func(ctx context.Context, allocationID string) (int64, error)
	// LockWaits reports how many store transactions are waiting, or have
	// waited since the subject was made, for a lock another transaction
	// holds (PostgreSQL: backends of this database waiting on a lock;
	// SQLite: requests queued for the single write connection).
	LockWaits func(ctx context.Context) (int, error)
	// Break makes the database unreachable (closes it).
	Break func()
}

// Instance is the configured Waldur instance of the suite.
const Instance = "https://waldur.example.org"

// Site is the reporting Site of the suite.
const Site = "alpha"

// Canonical IDs of the suite (lower-case UUIDs, as Beto issues them).
const (
	ProjectA  = "7a1e4c2b-1d3f-4a5b-9c8d-0e1f2a3b4c5d"
	ProjectB  = "8b2f5d3c-2e4a-4b6c-8d9e-1f2a3b4c5d6e"
	ProjectX  = "9c3a6e4d-3f5b-4c7d-9eaf-2a3b4c5d6e7f"
	BindingID = "e41f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	PartyID   = "9c2e5d1a-0b7f-4e3c-8a6d-2f1e0c9b8a7d"
)

// testCase is one conformance test: its subtest name and body.
type testCase struct {
	name string
	fn   func(t *testing.T, e *env)
}

// Exercise runs the conformance suite; newSubject makes a fresh store per
// subtest.
func Exercise(t *testing.T, newSubject func(t *testing.T) Subject) {
	var tests []testCase
	tests = append(tests, reportTests...)
	tests = append(tests, projectTests...)
	tests = append(tests, feedTests...)
	tests = append(tests, concurrencyTests...)
	tests = append(tests, availabilityTests...)
	tests = append(tests, withMembers(memberTests)...)
	tests = append(tests, inconsistencyTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newEnv(t, newSubject(t)))
		})
	}
}

// T0 is the suite's start time.
var T0 = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)

type env struct {
	sub   Subject
	svc   *application.Service
	clock *clock.Manual
	reg   *prometheus.Registry
	ctx   context.Context
}

func newEnv(t *testing.T, sub Subject) *env {
	t.Helper()
	clk := clock.NewManual(T0.Add(time.Minute))
	svc, reg := newService(t, sub, clk, nil)
	return &env{sub: sub, svc: svc, clock: clk, reg: reg, ctx: t.Context()}
}

// newService returns the application service over sub's store on clk,
// configured with the suite's Waldur instance, a freshness of 15 minutes
// and environments (nil: none), and the registry of its metrics.
func newService(t *testing.T, sub Subject, clk *clock.Manual, environments map[string]string) (*application.Service, *prometheus.Registry) {
	t.Helper()
	return newServiceWith(t, sub, clk, application.StaticSites(environments))
}

// newServiceWith is newService with environments' Sites and backends.
func newServiceWith(t *testing.T, sub Subject, clk *clock.Manual, environments application.EnvironmentSites) (*application.Service, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	tel, err := telemetry.New(zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := application.NewService(sub.Store, clk, tel, application.Config{WaldurInstance: Instance, Freshness: 15 * time.Minute, Environments: environments})
	if err != nil {
		t.Fatal(err)
	}
	return svc, reg
}

// Report returns a ready report (OK, limits applied as configured) of
// resource in provider Project pp, observed at T0+offset.
func Report(resource, pp string, offset time.Duration) domain.Report {
	l := domain.Limits{"cpu": 32000, "memory": 128 << 30, "storage": 500 << 30, "gpu.nvidia": 2}
	return domain.Report{
		ProviderResourceID: resource, OfferingID: "offering-1", ProviderProjectID: pp, State: domain.WaldurOK,
		Limits: l, AppliedLimits: l.Clone(), NativeScope: "ns-" + resource, ObservedAt: T0.Add(offset),
	}
}

// ProjectEvent returns a ProjectChanged binding project to the Waldur
// Projects pps at instance.
func ProjectEvent(eventID, project string, revision int64, instance string, pps ...string) domain.BetoEvent {
	p := &domain.ProjectChanged{ID: project, Revision: revision, State: "active"}
	for _, pp := range pps {
		p.ProviderBindings = append(p.ProviderBindings, domain.ProviderBinding{Provider: domain.ProviderWaldur, Instance: instance, ExternalID: pp})
	}
	return domain.BetoEvent{EventID: eventID, Type: domain.EventProjectChanged, OccurredAt: T0, Project: p}
}

func (e *env) submit(t *testing.T, reports ...domain.Report) []application.ReportResult {
	t.Helper()
	res, err := e.svc.SubmitReports(e.ctx, Site, reports)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res
}

// refused submits reports, expects a conflict with reason and returns its
// refusals.
func (e *env) refused(t *testing.T, reason string, reports ...domain.Report) []domain.Refusal {
	t.Helper()
	_, err := e.svc.SubmitReports(e.ctx, Site, reports)
	var ce *domain.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("submit: got %v, want a conflict %s", err, reason)
	}
	if ce.Reason() != reason {
		t.Fatalf("reason %q, want %q (%v)", ce.Reason(), reason, ce)
	}
	return ce.Refusals
}

func (e *env) event(t *testing.T, ev domain.BetoEvent) string {
	t.Helper()
	res, err := e.svc.ReceiveBetoEvent(e.ctx, ev)
	if err != nil {
		t.Fatalf("event %s: %v", ev.EventID, err)
	}
	return res.Outcome
}

// all returns every allocation through the snapshot.
func (e *env) all(t *testing.T) map[string]application.AllocationView {
	t.Helper()
	out := map[string]application.AllocationView{}
	after := ""
	for {
		p, err := e.svc.Allocations(e.ctx, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range p.Allocations {
			out[v.ProviderResourceID] = v
		}
		if p.After == "" {
			return out
		}
		after = p.After
	}
}

func (e *env) one(t *testing.T, resource string) application.AllocationView {
	t.Helper()
	v, ok := e.all(t)[resource]
	if !ok {
		t.Fatalf("no allocation for %s", resource)
	}
	return v
}

func (e *env) changes(t *testing.T) []domain.Change {
	t.Helper()
	p, err := e.svc.Changes(e.ctx, 0, application.MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return p.Changes
}

func (e *env) receipts(t *testing.T, allocationID string) int64 {
	t.Helper()
	n, err := e.sub.Receipts(e.ctx, allocationID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sameStorage asserts the stored state did not move: every allocation
// view, the feed and the receipts of the given allocations.
func (e *env) snapshot(t *testing.T) string {
	t.Helper()
	all := e.all(t)
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s := ""
	for _, k := range keys {
		v := all[k]
		s += fmt.Sprintf("%+v receipts=%d\n", v, e.receipts(t, v.ID))
	}
	return s + fmt.Sprintf("changes=%+v", e.changes(t))
}
