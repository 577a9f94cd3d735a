package application_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/appservice"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application/families/batch"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// crossFixture is one Runtime with both families over one cluster:
// jobs.sqlite (jobs) and services.sqlite (services) as separate record
// files, each executor seeing the other's (WithOtherFamilies), as the
// runtime role's Module wires them.
type crossFixture struct {
	*batchFixture
	app      *appNative
	services *memRecords
}

func newCrossFixture(t *testing.T) *crossFixture {
	t.Helper()
	b := &batchFixture{
		native:   newFakeNative(),
		perms:    &fakePermissions{answer: domain.Permission{Allowed: true, EvidenceID: "ev-1", ValidUntil: now.Add(time.Minute)}},
		records:  &memRecords{rows: map[string]domain.NativeRecord{}},
		bindings: &memBindings{rows: map[string]map[int64]domain.MemberBinding{}},
	}
	f := &crossFixture{batchFixture: b, app: &appNative{fakeNative: b.native, refuse: map[string]error{}}, services: &memRecords{rows: map[string]domain.NativeRecord{}}}
	access := application.NewAccess(f.bindings, f.app, f.perms, fixedClock{now})
	jobs := batch.NewExecutor(access, f.native, jsonSpecs{}, pinned{}, f.records, nil, application.ExecutorConfig{DeletionWait: time.Second}).
		WithOtherFamilies(f.services)
	app := appservice.NewExecutor(access, f.app, jsonAppSpecs{}, f.services, nil, application.ExecutorConfig{DeletionWait: time.Second}, 0).
		WithOtherFamilies(f.records)
	regs := append(application.NewMemberExecutor(f.bindings, nil).Registrations(), jobs.Registrations()...)
	reg, err := application.NewRegistry(append(regs, app.Registrations()...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	f.run(t, bindCmd(t, 900, bindingID, 1, 1, namespace), false)
	return f
}

// familyCmd builds a command of the fixture's Attempt in family.
func (f *crossFixture) familyCmd(t *testing.T, family siteprotocol.Family, op siteprotocol.Operation, payload any) *domain.Pending {
	t.Helper()
	f.n++
	c := map[string]any{"id": uuidN(f.n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": family, "run_id": uuidN(500), "attempt_id": attempt, "account_ref": map[string]any{"binding_id": bindingID, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	b, _ := json.Marshal(c)
	return pending(t, b)
}

// snapshot is every record of both files and every create the cluster saw.
func (f *crossFixture) snapshot() string {
	b, _ := json.Marshal([]any{f.records.rows, f.services.rows, len(f.native.creates)})
	return string(b)
}

// An Attempt prepared by one family is refused attempt-conflict by the
// other's prepare and start, whichever came first, and nothing changes —
// not ErrUnexplained, which would stop the worker
// (docs/site-runtime.md#one-lifecycle-for-every-family). Fakes: the API
// server and the permission provider.
func TestAnAttemptOfOneFamilyIsAttemptConflictForTheOther(t *testing.T) {
	batchPrepare := map[string]any{"workspace_size_bytes": 1 << 20}
	for _, tc := range []struct {
		name          string
		first, second siteprotocol.Family
		firstPayload  any
		secondPayload any
	}{
		{"batch then application", siteprotocol.FamilyBatch, siteprotocol.FamilyApplication, batchPrepare, preparePayload(8080)},
		{"application then batch", siteprotocol.FamilyApplication, siteprotocol.FamilyBatch, preparePayload(8080), batchPrepare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCrossFixture(t)
			expect(t, f.run(t, f.familyCmd(t, tc.first, siteprotocol.OpPrepare, tc.firstPayload), false), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonPrepared)
			before := f.snapshot()
			var startPayload any = map[string]any{}
			if tc.second == siteprotocol.FamilyBatch {
				startPayload = startBody
			}
			for _, p := range []*domain.Pending{
				f.familyCmd(t, tc.second, siteprotocol.OpPrepare, tc.secondPayload),
				f.familyCmd(t, tc.second, siteprotocol.OpStart, startPayload),
			} {
				for _, recovering := range []bool{false, true} {
					r := f.run(t, p, recovering)
					expect(t, r, siteprotocol.OutcomeRefused, siteprotocol.ReasonAttemptConflict)
					if !strings.Contains(r.Message, string(tc.first)) {
						t.Fatalf("the message does not name the family %s: %q", tc.first, r.Message)
					}
				}
			}
			if after := f.snapshot(); after != before {
				t.Fatalf("a refused command changed records or the cluster:\n%s\n%s", before, after)
			}
		})
	}
}
