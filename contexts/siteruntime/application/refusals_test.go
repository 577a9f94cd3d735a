package application_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// memberCommand is a command of the fixtures' Attempt sent by member
// under the binding it names, for its own Run.
func memberCommand(t *testing.T, n int, op siteprotocol.Operation, family siteprotocol.Family, member, run, binding string, payload any) *domain.Pending {
	t.Helper()
	c := map[string]any{"id": uuidN(n), "operation": op, "issued_at": "2026-11-29T10:00:00Z", "member_id": member, "project_id": project,
		"family": family, "run_id": run, "attempt_id": attempt, "account_ref": map[string]any{"binding_id": binding, "generation": 1}}
	if payload != nil {
		c["payload"] = payload
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return pending(t, b)
}

// refusalNamesNothingOf fails when r is not refused with reason, or when
// its message or detail carries any of ids (another member's IDs, its Run
// ID, its commands' IDs).
func refusalNamesNothingOf(t *testing.T, what string, r siteprotocol.Result, reason siteprotocol.Reason, ids map[string]string) {
	t.Helper()
	if r.Outcome != siteprotocol.OutcomeRefused || r.Reason != reason {
		t.Errorf("%s: %s / %s (%s), want refused / %s", what, r.Outcome, r.Reason, r.Message, reason)
		return
	}
	for name, id := range ids {
		if strings.Contains(r.Message, id) || strings.Contains(string(r.Detail), id) {
			t.Errorf("%s: the refusal names %s %s: %s %s", what, name, id, r.Message, r.Detail)
		}
	}
}

// Refusals name nothing of another member (docs/site-runtime.md#private-reads,
// docs/site-runtime.md#access-before-every-native-start): member A has
// prepared and started the Attempt (a batch one, and an application one);
// member B, bound in the same Project and namespace, sends the Attempt's
// commands for its own Run — prepare, start, read-logs, read-file, proxy —
// and a command naming A's binding. Each is refused attempt-conflict or
// binding-missing, and no message or detail carries A's member ID, A's
// Run ID, A's binding or any of A's commands' IDs.
func TestRefusalsNameNothingOfAnotherMember(t *testing.T) {
	other, otherBinding, otherRun := uuidN(4242), uuidN(4243), uuidN(4244)

	t.Run("batch", func(t *testing.T) {
		f := newReadFileFixture(t, 5*time.Second)
		ids := map[string]string{"A's member": member, "A's Run": uuidN(500), "A's binding command": uuidN(900)}
		for n := 1; n <= f.n; n++ {
			ids["A's command"+uuidN(n)] = uuidN(n)
		}
		f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
		byB := func(op siteprotocol.Operation, binding string, payload any) siteprotocol.Result {
			f.n++
			return f.run(t, memberCommand(t, f.n, op, siteprotocol.FamilyBatch, other, otherRun, binding, payload), false)
		}
		withBinding := map[string]string{"A's binding": bindingID}
		for k, v := range ids {
			withBinding[k] = v
		}
		refusalNamesNothingOf(t, "prepare", byB(siteprotocol.OpPrepare, otherBinding, map[string]any{"workspace_size_bytes": 1 << 20}), siteprotocol.ReasonAttemptConflict, withBinding)
		refusalNamesNothingOf(t, "start", byB(siteprotocol.OpStart, otherBinding, startBody), siteprotocol.ReasonAttemptConflict, withBinding)
		refusalNamesNothingOf(t, "read-logs", byB(siteprotocol.OpReadLogs, otherBinding, readLogs(100, "")), siteprotocol.ReasonAttemptConflict, withBinding)
		refusalNamesNothingOf(t, "read-file", byB(siteprotocol.OpReadFile, otherBinding, readFile("out.txt", 10)), siteprotocol.ReasonAttemptConflict, withBinding)
		// B's command naming A's binding: the refusal may repeat the
		// binding the command names, nothing else of A.
		refusalNamesNothingOf(t, "a command naming A's binding", byB(siteprotocol.OpPrepare, bindingID, map[string]any{"workspace_size_bytes": 1 << 20}),
			siteprotocol.ReasonBindingMissing, ids)
		if f.readerCreates() != 0 || f.kubelet.logsRead() != 0 {
			t.Errorf("B's reads created %d readers and read %d logs", f.readerCreates(), f.kubelet.logsRead())
		}
	})

	t.Run("application", func(t *testing.T) {
		proxy := &fakeProxy{resp: application.ProxyResponse{Status: 200, Body: []byte("A's answer")}}
		f := newProxyFixture(t, readyPods{fakePods: &fakePods{}, ready: true}, proxy)
		ids := map[string]string{"A's member": member, "A's Run": uuidN(500), "A's binding": bindingID, "A's binding command": uuidN(900)}
		for n := 1; n <= f.n; n++ {
			ids["A's command"+uuidN(n)] = uuidN(n)
		}
		f.run(t, pending(t, otherBind(t, other, otherBinding)), false)
		byB := func(op siteprotocol.Operation, payload any) siteprotocol.Result {
			f.n++
			return f.run(t, memberCommand(t, f.n, op, siteprotocol.FamilyApplication, other, otherRun, otherBinding, payload), false)
		}
		refusalNamesNothingOf(t, "prepare", byB(siteprotocol.OpPrepare, preparePayload(8080)), siteprotocol.ReasonAttemptConflict, ids)
		refusalNamesNothingOf(t, "start", byB(siteprotocol.OpStart, nil), siteprotocol.ReasonAttemptConflict, ids)
		refusalNamesNothingOf(t, "proxy", byB(siteprotocol.OpProxy, map[string]any{"method": "GET", "path": "/"}), siteprotocol.ReasonAttemptConflict, ids)
		proxy.mu.Lock()
		defer proxy.mu.Unlock()
		if len(proxy.targets) != 0 {
			t.Errorf("B's proxy reached the Service port %d times", len(proxy.targets))
		}
	})
}
