package application_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

func pending(t *testing.T, raw []byte) *domain.Pending {
	t.Helper()
	c, canonical, err := siteprotocol.ParseAppend(raw)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := siteprotocol.EncodeStored(canonical, 1, c.Digest)
	cmd, err := siteprotocol.ParsePulled(served)
	if err != nil {
		t.Fatal(err)
	}
	return &domain.Pending{Sequence: 1, Raw: served, Command: cmd}
}

// pendingUnchecked decodes raw without the append rules (for payloads the
// server would not have accepted).
func pendingUnchecked(t *testing.T, raw []byte) *domain.Pending {
	t.Helper()
	d, canonical, err := siteprotocol.CommandDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := siteprotocol.EncodeStored(canonical, 1, d)
	cmd, err := siteprotocol.ParsePulled(served)
	if err != nil {
		t.Fatal(err)
	}
	return &domain.Pending{Sequence: 1, Raw: served, Command: cmd}
}

func TestRegistryRoutesByOperationAndFamilyAndRefusesWhatItCannotRun(t *testing.T) {
	batch, anyFamily := newEffectExecutor(), newEffectExecutor()
	reg, err := application.NewRegistry(
		application.Registration{Operation: siteprotocol.OpObserve, Family: siteprotocol.FamilyBatch, Executor: batch},
		application.Registration{Operation: siteprotocol.OpCancel, Executor: anyFamily},
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	big := command(t, 5, siteprotocol.OpObserve, siteprotocol.FamilyBatch, nil)
	bigP := pending(t, big)
	bigP.Raw = append(bigP.Raw, make([]byte, siteprotocol.MaxCommandBytes)...)
	cases := []struct {
		name   string
		p      *domain.Pending
		reason siteprotocol.Reason
		via    *effectExecutor
	}{
		{"observe batch goes to the batch executor", pending(t, observe(t, 1)), siteprotocol.ReasonObserved, batch},
		{"cancel of any family goes to the family-less route", pending(t, command(t, 2, siteprotocol.OpCancel, siteprotocol.FamilyInference, nil)), siteprotocol.ReasonObserved, anyFamily},
		{"observe of a family without an executor is unsupported", pending(t, command(t, 3, siteprotocol.OpObserve, siteprotocol.FamilyApplication, nil)), siteprotocol.ReasonUnsupportedOperation, nil},
		{"an operation not built into this binary is unsupported", pending(t, command(t, 4, siteprotocol.OpReadLogs, siteprotocol.FamilyBatch, map[string]any{"tail_bytes": 10})), siteprotocol.ReasonUnsupportedOperation, nil},
		{"an unknown operation is unsupported", pending(t, []byte(`{"id":"`+uuidN(6)+`","operation":"teleport","issued_at":"2026-11-29T10:00:00Z"}`)), siteprotocol.ReasonUnsupportedOperation, nil},
		{"a known operation with a bad payload is invalid", pendingUnchecked(t, command(t, 7, siteprotocol.OpObserve, siteprotocol.FamilyBatch, map[string]any{"colour": "red"})), siteprotocol.ReasonInvalidPayload, nil},
		{"a command over 1 MiB is too large", bigP, siteprotocol.ReasonPayloadTooLarge, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := 0
			if c.via != nil {
				before, _, _ = c.via.counts()
			}
			for _, f := range []func(context.Context, *domain.Pending) (domain.Answer, error){reg.Execute, reg.Recover} {
				a, err := f(ctx, c.p)
				if err != nil || a.Reason != c.reason {
					t.Fatalf("answer %+v, %v; want reason %s", a, err, c.reason)
				}
				if c.via == nil && a.Outcome != siteprotocol.OutcomeRefused {
					t.Fatalf("outcome %s, want refused", a.Outcome)
				}
				if _, _, err := siteprotocol.NewResult(c.p.Command, a.Outcome, a.Reason, a.Message, a.Detail, a.NativeRefs); err != nil {
					t.Fatalf("answer does not encode: %v", err)
				}
			}
			if c.via != nil {
				if after, _, _ := c.via.counts(); after != before+1 {
					t.Fatal("the routed executor did not execute")
				}
			}
		})
	}
}

func TestRegistryRefusesTwoExecutorsForOneRouteUnlessOneOverrides(t *testing.T) {
	e := newEffectExecutor()
	r := application.Registration{Operation: siteprotocol.OpStart, Family: siteprotocol.FamilyBatch, Executor: e}
	if _, err := application.NewRegistry(r, r); !errors.Is(err, application.ErrDuplicateRoute) {
		t.Fatalf("want ErrDuplicateRoute, got %v", err)
	}
	o := r
	o.Override = true
	o.Executor = newEffectExecutor()
	reg, err := application.NewRegistry(o, r)
	if err != nil {
		t.Fatal(err)
	}
	start := pending(t, command(t, 1, siteprotocol.OpStart, siteprotocol.FamilyBatch, map[string]any{
		"demand": map[string]any{"cpu": 1000, "memory": 1 << 30}, "time_limit_seconds": 60, "argv": []string{"true"}}))
	if _, err := reg.Execute(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := o.Executor.(*effectExecutor).counts(); n != 1 {
		t.Fatal("the override did not win")
	}
	if _, err := application.NewRegistry(o, o); err == nil || !strings.Contains(err.Error(), "two overrides") {
		t.Fatalf("two overrides: %v", err)
	}
}

// TestRegistryHoldsBindMemberToItsBackend: on pull, bind-member is checked
// by the Runtime's backend (docs/site-protocol.md#member-identity-by-backend):
// a Slurm binding (jdoe, uid 1001) reaches the member executor of a slurm
// Runtime and is refused invalid-payload by a Kubernetes one, and the
// Kubernetes form is refused by the slurm Runtime.
func TestRegistryHoldsBindMemberToItsBackend(t *testing.T) {
	members := newEffectExecutor()
	k8s, err := application.NewRegistry(application.Registration{Operation: siteprotocol.OpBindMember, Executor: members})
	if err != nil {
		t.Fatal(err)
	}
	slurm := k8s.ForBackend(siteprotocol.BackendSlurm)
	payload := func(account, uid, namespace string) map[string]any {
		p := map[string]any{"party_id": member, "namespace": namespace, "account": account, "binding_id": uuidN(3000), "revision": 1, "generation": 1}
		if uid != "" {
			p["account_uid"] = uid
		}
		return p
	}
	slurmBind := pendingUnchecked(t, command(t, 1, siteprotocol.OpBindMember, "", payload("jdoe", "1001", "proj-a")))
	k8sBind := pending(t, command(t, 2, siteprotocol.OpBindMember, "", payload(siteprotocol.MemberAccount(member), "", "project-a")))
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		reg    *application.Registry
		p      *domain.Pending
		routed bool
	}{
		{"slurm binding at a slurm Runtime", slurm, slurmBind, true},
		{"slurm binding at a kubernetes Runtime", k8s, slurmBind, false},
		{"kubernetes binding at a slurm Runtime", slurm, k8sBind, false},
		{"kubernetes binding at a kubernetes Runtime", k8s, k8sBind, true},
	} {
		before, _, _ := members.counts()
		a, err := c.reg.Execute(ctx, c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		after, _, _ := members.counts()
		if routed := after == before+1; routed != c.routed {
			t.Fatalf("%s: routed %v, want %v (answer %+v)", c.name, routed, c.routed, a)
		}
		if !c.routed && (a.Reason != siteprotocol.ReasonInvalidPayload || !strings.Contains(a.Message, "payload.account")) {
			t.Fatalf("%s: answer %+v, want invalid-payload naming payload.account", c.name, a)
		}
	}
}

// TestARuntimeAnswersAFamilyItsBackendDoesNotRunUnsupported: a workload
// command of a family the Runtime's backend does not run, stored before
// append refused it (docs/site-protocol.md#families-by-backend), is
// answered refused / unsupported-operation, by Execute and Recover alike,
// and never reaches an executor, even one registered for it; the same
// command reaches its executor at a kubernetes Runtime, and a batch
// command at both.
func TestARuntimeAnswersAFamilyItsBackendDoesNotRunUnsupported(t *testing.T) {
	app, batch := newEffectExecutor(), newEffectExecutor()
	k8s, err := application.NewRegistry(
		application.Registration{Operation: siteprotocol.OpObserve, Family: siteprotocol.FamilyApplication, Executor: app},
		application.Registration{Operation: siteprotocol.OpObserve, Family: siteprotocol.FamilyBatch, Executor: batch})
	if err != nil {
		t.Fatal(err)
	}
	slurm := k8s.ForBackend(siteprotocol.BackendSlurm)
	ctx := context.Background()
	appObserve := pendingUnchecked(t, command(t, 1, siteprotocol.OpObserve, siteprotocol.FamilyApplication, nil))
	for name, run := range map[string]func(context.Context, *domain.Pending) (domain.Answer, error){"execute": slurm.Execute, "recover": slurm.Recover} {
		a, err := run(ctx, appObserve)
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != siteprotocol.OutcomeRefused || a.Reason != siteprotocol.ReasonUnsupportedOperation || !strings.Contains(a.Message, "runs batch") {
			t.Fatalf("%s at a slurm Runtime: %+v, want refused / unsupported-operation saying it runs batch", name, a)
		}
	}
	if n, r, _ := app.counts(); n+r != 0 {
		t.Fatalf("the application executor was reached %d times at a slurm Runtime", n+r)
	}
	if _, err := k8s.Execute(ctx, appObserve); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := app.counts(); n != 1 {
		t.Fatal("the kubernetes Runtime did not route the application observe")
	}
	batchObserve := pending(t, observe(t, 2))
	for _, reg := range []*application.Registry{k8s, slurm} {
		if _, err := reg.Execute(ctx, batchObserve); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _ := batch.counts(); n != 2 {
		t.Fatalf("batch observes routed %d times, want 2", n)
	}
}
