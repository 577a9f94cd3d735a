package application_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// memBindings is an in-memory MemberBindings.
type memBindings struct {
	rows  map[string]map[int64]domain.MemberBinding
	saves int
}

func (m *memBindings) Resolve(_ context.Context, ref siteprotocol.AccountRef) (domain.MemberBinding, bool, error) {
	b, ok := m.rows[ref.BindingID][ref.Generation]
	return b, ok, nil
}

func (m *memBindings) Generations(_ context.Context, id string) ([]domain.MemberBinding, error) {
	var out []domain.MemberBinding
	for _, b := range m.rows[id] {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Generation < out[j].Generation })
	return out, nil
}

func (m *memBindings) LiveOfAccount(_ context.Context, account string) ([]domain.MemberBinding, error) {
	var out []domain.MemberBinding
	for _, gens := range m.rows {
		for _, b := range gens {
			if b.Account == account && !b.Retired {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

func (m *memBindings) Save(_ context.Context, rows []domain.MemberBinding) error {
	m.saves++
	for _, r := range rows {
		if m.rows[r.BindingID] == nil {
			m.rows[r.BindingID] = map[int64]domain.MemberBinding{}
		}
		m.rows[r.BindingID][r.Generation] = r
	}
	return nil
}

func bindCmd(t *testing.T, n int, bindingID string, generation, revision int64, namespace string) *domain.Pending {
	return pending(t, command(t, n, siteprotocol.OpBindMember, "", map[string]any{
		"party_id": member, "namespace": namespace, "account": siteprotocol.MemberAccount(member),
		"binding_id": bindingID, "revision": revision, "generation": generation,
	}))
}

func retireCmd(t *testing.T, n int, bindingID string, generation int64) *domain.Pending {
	return pending(t, command(t, n, siteprotocol.OpRetireMember, "", map[string]any{"binding_id": bindingID, "generation": generation}))
}

func TestMemberBindingsAreStoredWithGenerationAndARetiredGenerationIsNeverRevived(t *testing.T) {
	store := &memBindings{rows: map[string]map[int64]domain.MemberBinding{}}
	exec := application.NewMemberExecutor(store, nil)
	reg, err := application.NewRegistry(exec.Registrations()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := uuidN(77)
	steps := []struct {
		p        *domain.Pending
		outcome  siteprotocol.Outcome
		reason   siteprotocol.Reason
		revision int64
	}{
		{bindCmd(t, 1, id, 1, 1, "project-a"), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, 1},
		{bindCmd(t, 2, id, 1, 2, "project-b"), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, 2},
		{bindCmd(t, 3, id, 1, 1, "project-a"), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, 2}, // stale revision: no change
		{bindCmd(t, 4, id, 1, 2, "project-c"), siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingConflict, 0},
		{retireCmd(t, 5, id, 1), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, 2},
		{bindCmd(t, 6, id, 1, 3, "project-a"), siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingRetired, 0},
		{bindCmd(t, 7, id, 2, 1, "project-a"), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, 1},
		{bindCmd(t, 8, id, 1, 9, "project-a"), siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingRetired, 0},
		{retireCmd(t, 9, uuidN(78), 4), siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, 0},
		{bindCmd(t, 10, uuidN(78), 4, 1, "project-a"), siteprotocol.OutcomeRefused, siteprotocol.ReasonBindingRetired, 0},
	}
	for i, s := range steps {
		a, err := reg.Execute(ctx, s.p)
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != s.outcome || a.Reason != s.reason {
			t.Fatalf("step %d: %s/%s (%s), want %s/%s", i+1, a.Outcome, a.Reason, a.Message, s.outcome, s.reason)
		}
		_, want, _ := siteprotocol.NewResult(s.p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs)
		if a.Outcome == siteprotocol.OutcomeSucceeded {
			d := a.Detail.(siteprotocol.BindingDetail)
			if d.AppliedRevision != s.revision {
				t.Fatalf("step %d: applied_revision %d, want %d", i+1, d.AppliedRevision, s.revision)
			}
		}
		// Recovering the same command (its effect already stored) gives
		// the same exact result.
		r, err := reg.Recover(ctx, s.p)
		if err != nil {
			t.Fatal(err)
		}
		_, again, _ := siteprotocol.NewResult(s.p.Command, r.Outcome, r.Reason, r.Message, r.Detail, r.NativeRefs)
		if string(again) != string(want) {
			t.Fatalf("step %d: recover answered %s, execute %s", i+1, again, want)
		}
	}
	b, found, _ := store.Resolve(ctx, siteprotocol.AccountRef{BindingID: id, Generation: 1})
	if !found || !b.Retired || b.Revision != 2 || b.Namespace != "project-b" {
		t.Fatalf("generation 1: %+v", b)
	}
	b, _, _ = store.Resolve(ctx, siteprotocol.AccountRef{BindingID: id, Generation: 2})
	if !b.Current(siteprotocol.AccountRef{BindingID: id, Generation: 2}) || b.ProjectID != project || b.Account != siteprotocol.MemberAccount(member) {
		t.Fatalf("generation 2: %+v", b)
	}
}

// TestABindMemberOfAnAccountBoundToAnotherPartyIsRefused: one Party per
// account (docs/site-protocol.md#member-identity-by-backend): at a slurm
// Runtime, jdoe bound live to one Party refuses another Party's
// bind-member naming jdoe (binding-conflict, nothing stored), the same
// Party's second binding (another Project) is applied, and once the first
// is retired the other Party's is applied.
func TestABindMemberOfAnAccountBoundToAnotherPartyIsRefused(t *testing.T) {
	store := &memBindings{rows: map[string]map[int64]domain.MemberBinding{}}
	exec := application.NewMemberExecutor(store, nil)
	reg, err := application.NewRegistry(exec.Registrations()...)
	if err != nil {
		t.Fatal(err)
	}
	reg = reg.ForBackend(siteprotocol.BackendSlurm)
	other := uuidN(4242)
	slurmBind := func(n int, party, project, bindingID, uid string) *domain.Pending {
		raw, err := json.Marshal(map[string]any{
			"id": uuidN(n), "operation": siteprotocol.OpBindMember, "issued_at": "2026-11-29T10:00:00Z", "member_id": party, "project_id": project,
			"payload": map[string]any{"party_id": party, "namespace": "proj-a", "account": "jdoe", "account_uid": uid, "binding_id": bindingID, "revision": 1, "generation": 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		return pendingUnchecked(t, raw)
	}
	ctx := context.Background()
	steps := []struct {
		p      *domain.Pending
		reason siteprotocol.Reason
	}{
		{slurmBind(1, member, project, uuidN(81), "1001"), siteprotocol.ReasonApplied},
		{slurmBind(2, other, project, uuidN(82), "1001"), siteprotocol.ReasonBindingConflict},
		{slurmBind(3, member, uuidN(99), uuidN(83), "1001"), siteprotocol.ReasonApplied},
		{retireCmd(t, 4, uuidN(81), 1), siteprotocol.ReasonApplied},
		{retireCmd(t, 5, uuidN(83), 1), siteprotocol.ReasonApplied},
		{slurmBind(6, other, project, uuidN(82), "1001"), siteprotocol.ReasonApplied},
	}
	for i, s := range steps {
		saves := store.saves
		a, err := reg.Execute(ctx, s.p)
		if err != nil || a.Reason != s.reason {
			t.Fatalf("step %d: %+v %v, want %s", i+1, a, err, s.reason)
		}
		if s.reason == siteprotocol.ReasonBindingConflict && store.saves != saves {
			t.Fatalf("step %d: a refused bind-member stored something", i+1)
		}
	}
	if b := store.rows[uuidN(82)][1]; b.PartyID != other || b.Account != "jdoe" || b.AccountUID != "1001" || b.Namespace != "proj-a" {
		t.Fatalf("the journal keeps %+v, not the binding as delivered", b)
	}
}
