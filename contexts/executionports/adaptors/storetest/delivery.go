package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// The conformance suite of application.DeliveryStore and of the delivery
// of member bindings over it (docs/execution-ports.md#delivery-of-member-bindings).

// DeliveryStore is a store of both ports, as each engine's adaptor is.
type DeliveryStore interface {
	application.StreamStore
	application.DeliveryStore
}

// NewDeliveryStore returns a fresh, migrated, empty store for one subtest.
type NewDeliveryStore func(t *testing.T) DeliveryStore

// ExerciseDelivery runs every delivery conformance test against stores made
// by newStore.
func ExerciseDelivery(t *testing.T, newStore NewDeliveryStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s DeliveryStore)
	}{
		{"APlannedDeliveryKeepsTheFirstPlannersBytes", testPlanKeepsFirstBytes},
		{"LatestDeliveriesAnswerTheNewestRevisionPerBinding", testLatestDeliveries},
		{"AppendedAndAcknowledgedAreRecordedOnce", testMarksOnce},
		{"TheDeliveryLockAdmitsOneHolder", testDeliveryLock},
		{"DeliveryAppendsEachRevisionOnceInOrder", testDeliveryOrder},
		{"APlannedButUnappendedDeliveryIsAppendedWithItsStoredBytes", testDeliveryResumes},
		{"ConcurrentDeliverersAppendEachRevisionOnce", testConcurrentDeliverers},
		{"AnAcknowledgedResultRecordsTheAppliedRevision", testAppliedRevision},
		{"AnUndeliverableBindingDoesNotHoldBackTheOthers", testUndeliverableBinding},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

const deliveryEnv = "alpha-k8s"

func planned(env, binding string, revision int64, issued time.Time) application.Delivery {
	raw, _ := json.Marshal(map[string]any{
		"id": application.DeliveryCommandID(env, binding, revision), "operation": "retire-member",
		"issued_at": issued.UTC().Format(time.RFC3339Nano), "member_id": uuidFor(7, 1), "project_id": uuidFor(7, 2),
		"payload": map[string]any{"binding_id": binding, "generation": 1},
	})
	cmd, canonical, err := siteprotocol.ParseAppend(raw)
	if err != nil {
		panic(err)
	}
	return application.Delivery{
		Environment: env, BindingID: binding, Revision: revision, Generation: 1, Operation: siteprotocol.OpRetireMember,
		CommandID: cmd.ID, Digest: cmd.Digest, Canonical: canonical, PlannedAt: issued,
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testPlanKeepsFirstBytes(t *testing.T, s DeliveryStore) {
	ctx := context.Background()
	b := uuidFor(8, 1)
	first, err := s.PlanDelivery(ctx, planned(deliveryEnv, b, 1, t0))
	mustNil(t, err)
	second, err := s.PlanDelivery(ctx, planned(deliveryEnv, b, 1, t0.Add(time.Hour)))
	mustNil(t, err)
	if !bytes.Equal(first.Canonical, second.Canonical) || first.Digest != second.Digest || !second.PlannedAt.Equal(t0) {
		t.Fatalf("second plan answered other bytes:\n%s\n%s", first.Canonical, second.Canonical)
	}
	if second.Sequence != 0 || second.Operation != siteprotocol.OpRetireMember || second.Generation != 1 {
		t.Fatalf("stored delivery = %+v", second)
	}
}

func testLatestDeliveries(t *testing.T, s DeliveryStore) {
	ctx := context.Background()
	b1, b2 := uuidFor(8, 2), uuidFor(8, 1)
	for _, d := range []application.Delivery{planned(deliveryEnv, b1, 1, t0), planned(deliveryEnv, b1, 3, t0), planned(deliveryEnv, b2, 2, t0), planned("beta-k8s", b1, 9, t0)} {
		_, err := s.PlanDelivery(ctx, d)
		mustNil(t, err)
	}
	got, err := s.LatestDeliveries(ctx, deliveryEnv)
	mustNil(t, err)
	if len(got) != 2 || got[0].BindingID != b2 || got[0].Revision != 2 || got[1].BindingID != b1 || got[1].Revision != 3 {
		t.Fatalf("latest = %+v", got)
	}
}

func testMarksOnce(t *testing.T, s DeliveryStore) {
	ctx := context.Background()
	b := uuidFor(8, 3)
	_, err := s.PlanDelivery(ctx, planned(deliveryEnv, b, 1, t0))
	mustNil(t, err)
	mustNil(t, s.MarkAppended(ctx, deliveryEnv, b, 1, 4, t0))
	mustNil(t, s.MarkAppended(ctx, deliveryEnv, b, 1, 5, t0.Add(time.Minute)))
	mustNil(t, s.MarkAcknowledged(ctx, deliveryEnv, b, 1, "succeeded", "applied", 1, t0))
	mustNil(t, s.MarkAcknowledged(ctx, deliveryEnv, b, 1, "refused", "binding-missing", 0, t0.Add(time.Minute)))
	got, err := s.LatestDeliveries(ctx, deliveryEnv)
	mustNil(t, err)
	d := got[0]
	if d.Sequence != 4 || !d.AppendedAt.Equal(t0) || d.Outcome != "succeeded" || d.Reason != "applied" || d.AppliedRevision != 1 || !d.AcknowledgedAt.Equal(t0) {
		t.Fatalf("delivery = %+v", d)
	}
}

func testDeliveryLock(t *testing.T, s DeliveryStore) {
	ctx := context.Background()
	ran, err := s.WithDeliveryLock(ctx, deliveryEnv, func(ctx context.Context) error {
		inner, err := s.WithDeliveryLock(ctx, deliveryEnv, func(context.Context) error {
			t.Error("a second holder ran")
			return nil
		})
		if inner || err != nil {
			t.Errorf("second holder = %v, %v; want false, nil", inner, err)
		}
		other, err := s.WithDeliveryLock(ctx, "beta-k8s", func(context.Context) error { return nil })
		if !other || err != nil {
			t.Errorf("another environment's lock = %v, %v; want true", other, err)
		}
		return nil
	})
	if !ran || err != nil {
		t.Fatalf("first holder = %v, %v", ran, err)
	}
	again, err := s.WithDeliveryLock(ctx, deliveryEnv, func(context.Context) error { return nil })
	if !again || err != nil {
		t.Fatalf("after release = %v, %v", again, err)
	}
}

// scriptedBindings stands in for the MemberBindings owner port, answering
// the bindings a test sets (the owner's own rules are tested in
// resource_provisioning).
type scriptedBindings struct {
	mu       sync.Mutex
	bindings []application.MemberBinding
}

func (o *scriptedBindings) set(b ...application.MemberBinding) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bindings = append([]application.MemberBinding(nil), b...)
}

func (o *scriptedBindings) DesiredBindings(_ context.Context, env string) (application.DesiredBindings, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return application.DesiredBindings{Environment: env, Site: "alpha", Bindings: append([]application.MemberBinding(nil), o.bindings...)}, nil
}

type oneEnvironment struct{}

func (oneEnvironment) Environment(id string) (domain.Environment, bool) {
	return domain.Environment{ID: id, Site: "alpha", Authority: "https://metallo.example.org"}, id == deliveryEnv
}

func (oneEnvironment) IDs() []string { return []string{deliveryEnv} }

type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func deliverer(s DeliveryStore, owner application.MemberBindings) (*application.Deliverer, *application.Streams) {
	c := &steppingClock{t: t0}
	streams := application.NewStreams(s, oneEnvironment{}, c, application.NewWakeups(), time.Second)
	return application.NewDeliverer(s, streams, owner, c), streams
}

var (
	party   = uuidFor(9, 1)
	project = uuidFor(9, 2)
	binding = uuidFor(9, 3)
)

func ready(revision, generation int64, uid string) application.MemberBinding {
	return application.MemberBinding{
		PartyID: party, ProjectID: project, Environment: deliveryEnv, Namespace: "project-a", Account: siteprotocol.MemberAccount(party),
		BindingID: binding, Revision: revision, Generation: generation, State: "ready", AccountUID: kubeUID(uid),
	}
}

// uidPrefix makes a test's UID label ("uid-3") a Kubernetes UID (a
// lower-case UUID, as bind-member's account_uid must be); streamOps shows
// the label again.
const uidPrefix = "00000000-0000-4000-8000-"

func kubeUID(label string) string {
	n, err := strconv.ParseInt(strings.TrimPrefix(label, "uid-"), 10, 64)
	if err != nil {
		return label
	}
	return fmt.Sprintf("%s%012d", uidPrefix, n)
}

func uidLabel(uid string) string {
	if n, err := strconv.ParseInt(strings.TrimPrefix(uid, uidPrefix), 10, 64); strings.HasPrefix(uid, uidPrefix) && err == nil {
		return "uid-" + itoa(n)
	}
	return uid
}

// streamOps returns the stream's commands as (operation, revision or
// generation, uid) lines, and fails on a duplicated command ID.
func streamOps(t *testing.T, s DeliveryStore) []string {
	t.Helper()
	cmds, err := s.CommandsAfter(context.Background(), deliveryEnv, 0, 1000, 1<<30)
	mustNil(t, err)
	seen := map[string]bool{}
	var out []string
	for _, c := range cmds {
		var v struct {
			ID        string `json:"id"`
			Operation string `json:"operation"`
			Payload   struct {
				Revision   int64  `json:"revision"`
				Generation int64  `json:"generation"`
				AccountUID string `json:"account_uid"`
			} `json:"payload"`
		}
		mustNil(t, json.Unmarshal(c.Canonical, &v))
		if seen[v.ID] {
			t.Fatalf("command %s appended twice", v.ID)
		}
		seen[v.ID] = true
		if v.Operation == "bind-member" {
			out = append(out, v.Operation+" r"+itoa(v.Payload.Revision)+" "+uidLabel(v.Payload.AccountUID))
		} else {
			out = append(out, v.Operation+" g"+itoa(v.Payload.Generation))
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func equalOps(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("stream = %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("stream = %q, want %q", got, want)
		}
	}
}

func reconcile(t *testing.T, d *application.Deliverer) {
	t.Helper()
	if _, err := d.ReconcileAll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func testDeliveryOrder(t *testing.T, s DeliveryStore) {
	owner := &scriptedBindings{}
	d, _ := deliverer(s, owner)
	retiredNeverBound := application.MemberBinding{PartyID: uuidFor(9, 4), ProjectID: project, BindingID: uuidFor(9, 5), Revision: 2, Generation: 1, Retired: true, State: "retired"}
	pending := application.MemberBinding{PartyID: uuidFor(9, 6), ProjectID: project, BindingID: uuidFor(9, 7), Revision: 1, Generation: 1, State: "pending", Reasons: []string{"account_missing"}}
	owner.set(ready(1, 1, "uid-1"), retiredNeverBound, pending)
	reconcile(t, d)
	reconcile(t, d) // nothing new: nothing appended
	equalOps(t, streamOps(t, s), "bind-member r1 uid-1")
	owner.set(ready(2, 1, "uid-2"), retiredNeverBound, pending) // the account made again: a new UID
	reconcile(t, d)
	owner.set(application.MemberBinding{PartyID: party, ProjectID: project, BindingID: binding, Revision: 3, Generation: 1, Retired: true, State: "retired"})
	reconcile(t, d)
	owner.set(ready(4, 2, "uid-3"))
	reconcile(t, d)
	reconcile(t, d)
	equalOps(t, streamOps(t, s), "bind-member r1 uid-1", "bind-member r2 uid-2", "retire-member g1", "bind-member r4 uid-3")
}

func testDeliveryResumes(t *testing.T, s DeliveryStore) {
	ctx := context.Background()
	owner := &scriptedBindings{}
	d, streams := deliverer(s, owner)
	// A kill between the plan and the append: the plan is stored, nothing
	// appended. The next pass appends the stored bytes before any newer
	// revision of any binding.
	other := uuidFor(9, 8)
	stale := planned(deliveryEnv, other, 1, t0)
	_, err := s.PlanDelivery(ctx, stale)
	mustNil(t, err)
	// A kill between the append and its record: appended, not recorded.
	lost := planned(deliveryEnv, uuidFor(9, 9), 1, t0)
	_, err = s.PlanDelivery(ctx, lost)
	mustNil(t, err)
	_, err = streams.Append(ctx, deliveryEnv, lost.Canonical)
	mustNil(t, err)
	owner.set(ready(1, 1, "uid-1"))
	reconcile(t, d)
	reconcile(t, d)
	cmds, err := s.CommandsAfter(ctx, deliveryEnv, 0, 10, 1<<20)
	mustNil(t, err)
	if len(cmds) != 3 || !bytes.Equal(cmds[0].Canonical, lost.Canonical) || !bytes.Equal(cmds[1].Canonical, stale.Canonical) {
		t.Fatalf("stream after the resume = %d commands, want the lost, the stale and revision 1", len(cmds))
	}
	equalOps(t, streamOps(t, s)[2:], "bind-member r1 uid-1")
	latest, err := s.LatestDeliveries(ctx, deliveryEnv)
	mustNil(t, err)
	for _, l := range latest {
		if l.Sequence == 0 {
			t.Fatalf("delivery %s revision %d left unrecorded", l.BindingID, l.Revision)
		}
	}
}

func testConcurrentDeliverers(t *testing.T, s DeliveryStore) {
	owner := &scriptedBindings{}
	var want []string
	for rev := int64(1); rev <= 6; rev++ {
		owner.set(ready(rev, 1, "uid-"+itoa(rev)))
		want = append(want, "bind-member r"+itoa(rev)+" uid-"+itoa(rev))
		var wg sync.WaitGroup
		for range 3 {
			d, _ := deliverer(s, owner)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					if _, err := d.ReconcileAll(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
	}
	equalOps(t, streamOps(t, s), want...)
}

func testAppliedRevision(t *testing.T, s DeliveryStore) {
	ctx := context.Background()
	owner := &scriptedBindings{}
	owner.set(ready(1, 1, "uid-1"))
	d, streams := deliverer(s, owner)
	reconcile(t, d)
	states, err := d.DeliveryStates(ctx, deliveryEnv)
	mustNil(t, err)
	if len(states) != 1 || states[0].DesiredRevision != 1 || states[0].Delivered == nil || states[0].Delivered.AppliedRevision != 0 {
		t.Fatalf("before the result: %+v", states)
	}
	cmds, err := s.CommandsAfter(ctx, deliveryEnv, 0, 1, 1<<20)
	mustNil(t, err)
	served, err := siteprotocol.EncodeStored(cmds[0].Canonical, cmds[0].Sequence, cmds[0].Digest)
	mustNil(t, err)
	cmd, err := siteprotocol.ParsePulled(served)
	mustNil(t, err)
	_, raw, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonApplied, "applied", siteprotocol.BindingDetail{AppliedRevision: 1}, nil)
	mustNil(t, err)
	_, err = streams.Pull(ctx, application.PullQuery{Environment: deliveryEnv, Installation: "inst-1", Principal: "environment:" + deliveryEnv, Limit: 1, Bind: true})
	mustNil(t, err)
	_, err = streams.RecordResult(ctx, deliveryEnv, "inst-1", cmds[0].Sequence, raw)
	mustNil(t, err)
	reconcile(t, d)
	states, err = d.DeliveryStates(ctx, deliveryEnv)
	mustNil(t, err)
	got := states[0].Delivered
	if got.AppliedRevision != 1 || got.Outcome != "succeeded" || got.Reason != "applied" || got.AcknowledgedAt.IsZero() {
		t.Fatalf("after the result: %+v", got)
	}
}

// testUndeliverableBinding: a ready binding whose owner's facts make no
// valid command (a namespace that is not a Kubernetes name) is reported by
// every pass and passed over; the environment's other bindings are
// delivered.
func testUndeliverableBinding(t *testing.T, s DeliveryStore) {
	owner := &scriptedBindings{}
	d, _ := deliverer(s, owner)
	bad := application.MemberBinding{
		PartyID: uuidFor(9, 10), ProjectID: project, Environment: deliveryEnv, Namespace: "Not_A_Namespace", Account: siteprotocol.MemberAccount(uuidFor(9, 10)),
		BindingID: uuidFor(9, 11), Revision: 1, Generation: 1, State: "ready", AccountUID: "uid-bad",
	}
	owner.set(bad, ready(1, 1, "uid-1"))
	for range 2 {
		_, err := d.ReconcileAll(context.Background())
		if !errors.Is(err, siteprotocol.ErrInvalid) || !strings.Contains(err.Error(), bad.BindingID) {
			t.Fatalf("pass with an undeliverable binding: %v, want it reported as invalid", err)
		}
	}
	equalOps(t, streamOps(t, s), "bind-member r1 uid-1")
}
