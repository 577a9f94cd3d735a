// Package storetest is the conformance suite of application.StreamStore:
// every storage engine's adaptor (SQLite, PostgreSQL) runs Exercise, so both
// obey the same stream rules (docs/site-protocol.md;
// docs/architecture.md#one-port-two-engines). Binding, acknowledgement and rebind run through
// the application's flows (BindStream, ApplyResult, RebindStream) over
// the store's Locked transactions, as the service runs them.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// NewStore returns a fresh, migrated, empty store for one subtest.
type NewStore func(t *testing.T) application.StreamStore

// Exercise runs every conformance test against stores made by newStore.
func Exercise(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s application.StreamStore)
	}{
		{"AppendAssignsGaplessSequencesFromOne", testAppendAssignsSequences},
		{"AppendOfTheSameContentReturnsTheOriginalSequence", testIdempotentAppend},
		{"AppendOfAKnownIDWithOtherContentIsAConflictingRetry", testConflictingRetry},
		{"CommandIDsAreUniqueAcrossStreams", testIDUniqueAcrossStreams},
		{"ConcurrentAppendersGetGaplessUniqueSequences", testConcurrentAppends},
		{"CommandsAfterReturnsStoredCanonicalFormOldestFirst", testCommandsAfter},
		{"CommandsAfterStopsAtTheByteBudgetButAlwaysServesTheNext", testCommandsAfterByteBudget},
		{"AcknowledgementsAdvanceInOrderOnly", testAcknowledgeInOrder},
		{"AResultNamingAnotherCommandIsAnIdentityMismatch", testIdentityMismatch},
		{"AnIdenticalResultAfterAcknowledgementIsReplayed", testReplay},
		{"ADifferentResultAfterAcknowledgementConflictsAndChangesNothing", testResultConflict},
		{"TheFirstInstallationBindsTheStreamAndFencesOthers", testBinding},
		{"RebindRecordsWhoAndWhenAndMovesTheFence", testRebind},
		{"AnUnusedStreamHasZeroPositions", testUnusedStream},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC)

// uuidFor returns a deterministic lower-case UUID for n and a salt.
func uuidFor(salt, n int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", salt, n)
}

// Command builds an observe command with id n (salt separates suites) and
// returns it as application.NewCommand together with the decoded command.
func Command(t testing.TB, salt, n int) (application.NewCommand, siteprotocol.Command) {
	t.Helper()
	raw := fmt.Sprintf(`{"id":%q,"operation":"observe","issued_at":"2026-11-29T10:00:00.123Z","run_id":%q,"attempt_id":%q,"member_id":%q,"project_id":%q,"family":"batch"}`,
		uuidFor(salt, n), uuidFor(salt+1, n), uuidFor(salt+2, n), uuidFor(salt+3, n), uuidFor(salt+4, n))
	cmd, canonical, err := siteprotocol.ParseAppend([]byte(raw))
	if err != nil {
		t.Fatalf("build command: %v", err)
	}
	return application.NewCommand{ID: cmd.ID, Digest: cmd.Digest, Canonical: canonical}, cmd
}

// Result builds the encoded result of cmd at sequence with message msg.
func Result(t testing.TB, c application.NewCommand, sequence int64, msg string) application.ReceivedResult {
	t.Helper()
	cmd := siteprotocol.Command{ID: c.ID, Digest: c.Digest, Sequence: sequence}
	r, raw, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, msg, map[string]string{"state": "running"}, nil)
	if err != nil {
		t.Fatalf("build result: %v", err)
	}
	return application.ReceivedResult{
		ReceivedResult: domain.ReceivedResult{CommandID: r.CommandID, CommandDigest: r.CommandDigest, Sequence: r.Sequence, Digest: r.Digest},
		Bytes:          raw,
	}
}

func appendN(t *testing.T, s application.StreamStore, env string, salt, n int) []application.NewCommand {
	t.Helper()
	var out []application.NewCommand
	for i := 1; i <= n; i++ {
		c, _ := Command(t, salt, i)
		a, err := s.Append(context.Background(), env, c, t0)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if a.Sequence != int64(i) || !a.Created {
			t.Fatalf("append %d: got sequence %d created %v", i, a.Sequence, a.Created)
		}
		out = append(out, c)
	}
	return out
}

func mustState(t *testing.T, s application.StreamStore, env string) domain.StreamState {
	t.Helper()
	st, err := s.State(context.Background(), env)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	return st
}

// mustBind binds env's stream to installation as its first pull does
// (only a pull binds a stream; a result never does).
func mustBind(t *testing.T, s application.StreamStore, env, installation string) {
	t.Helper()
	if _, err := application.BindStream(context.Background(), s, env, installation, "environment:"+env, t0); err != nil {
		t.Fatalf("bind %s: %v", env, err)
	}
}

func testAppendAssignsSequences(t *testing.T, s application.StreamStore) {
	appendN(t, s, "alpha-k8s", 1, 5)
	appendN(t, s, "beta-k8s", 2, 2) // another stream starts at 1 again
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != 5 || st.AcknowledgedSequence != 0 {
		t.Fatalf("state %+v, want head 5, acknowledged 0", st)
	}
}

func testIdempotentAppend(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 3)
	a, err := s.Append(context.Background(), "alpha-k8s", cs[1], t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if a.Sequence != 2 || a.Created || a.Digest != cs[1].Digest {
		t.Fatalf("retry: got %+v, want sequence 2, created false", a)
	}
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != 3 {
		t.Fatalf("a retry moved the head to %d", st.HeadSequence)
	}
}

func testConflictingRetry(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 2)
	other := cs[0]
	other.Digest = cs[1].Digest
	other.Canonical = cs[1].Canonical
	if _, err := s.Append(context.Background(), "alpha-k8s", other, t0); !errors.Is(err, domain.ErrConflictingRetry) {
		t.Fatalf("got %v, want ErrConflictingRetry", err)
	}
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != 2 {
		t.Fatalf("a conflicting retry moved the head to %d", st.HeadSequence)
	}
}

func testIDUniqueAcrossStreams(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 1)
	if _, err := s.Append(context.Background(), "beta-k8s", cs[0], t0); !errors.Is(err, domain.ErrConflictingRetry) {
		t.Fatalf("same ID on another stream: got %v, want ErrConflictingRetry", err)
	}
	if st := mustState(t, s, "beta-k8s"); st.HeadSequence != 0 {
		t.Fatalf("the refused append moved beta's head to %d", st.HeadSequence)
	}
}

func testConcurrentAppends(t *testing.T, s application.StreamStore) {
	const workers, each = 8, 40
	ctx := context.Background()
	var (
		mu   sync.Mutex
		seen = map[int64]string{}
		wg   sync.WaitGroup
		errs = make(chan error, workers*each*2)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c, _ := Command(t, 100, w*each+i)
				a, err := s.Append(ctx, "alpha-k8s", c, t0)
				if err != nil {
					errs <- err
					return
				}
				// Every worker also retries a command of its neighbour,
				// concurrently with its first append.
				n, _ := Command(t, 100, ((w+1)%workers)*each+i)
				if _, err := s.Append(ctx, "alpha-k8s", n, t0); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := seen[a.Sequence]; dup && prev != c.ID {
					errs <- fmt.Errorf("sequence %d given to %s and %s", a.Sequence, prev, c.ID)
				}
				seen[a.Sequence] = c.ID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct sequences for %d commands", len(seen), workers*each)
	}
	for i := int64(1); i <= workers*each; i++ {
		if _, ok := seen[i]; !ok {
			t.Fatalf("gap at sequence %d", i)
		}
	}
	if st := mustState(t, s, "alpha-k8s"); st.HeadSequence != workers*each {
		t.Fatalf("head %d, want %d", st.HeadSequence, workers*each)
	}
}

func testCommandsAfter(t *testing.T, s application.StreamStore) {
	cs := appendN(t, s, "alpha-k8s", 1, 5)
	got, err := s.CommandsAfter(context.Background(), "alpha-k8s", 1, 3, siteprotocol.MaxPullBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d commands, want 3", len(got))
	}
	for i, c := range got {
		want := cs[i+1]
		if c.Sequence != int64(i+2) || c.Digest != want.Digest || !bytes.Equal(c.Canonical, want.Canonical) {
			t.Fatalf("command %d: got %+v", i, c)
		}
		served, err := siteprotocol.EncodeStored(c.Canonical, c.Sequence, c.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := siteprotocol.ParsePulled(served); err != nil {
			t.Fatalf("served command %d does not verify: %v", c.Sequence, err)
		}
	}
	if rest, _ := s.CommandsAfter(context.Background(), "alpha-k8s", 5, 100, siteprotocol.MaxPullBytes); len(rest) != 0 {
		t.Fatalf("after the head: got %d commands", len(rest))
	}
}

const inst = "6a0f3c1e-0000-4000-8000-000000000001"

func testAcknowledgeInOrder(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := appendN(t, s, "alpha-k8s", 1, 3)
	mustBind(t, s, "alpha-k8s", inst)
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 2, Result(t, cs[1], 2, "two"), t0); !errors.Is(err, domain.ErrOutOfOrder) {
		t.Fatalf("ack 2 before 1: got %v, want ErrOutOfOrder", err)
	}
	for i, c := range cs {
		seq := int64(i + 1)
		r := Result(t, c, seq, "done")
		ack, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, seq, r, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatalf("ack %d: %v", seq, err)
		}
		if ack.Sequence != seq || ack.ResultDigest != r.Digest || ack.Replayed {
			t.Fatalf("ack %d: got %+v", seq, ack)
		}
	}
	c4, _ := Command(t, 1, 4)
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 4, Result(t, c4, 4, "x"), t0); !errors.Is(err, domain.ErrUnknownCommand) {
		t.Fatalf("ack beyond the head: got %v, want ErrUnknownCommand", err)
	}
	if st := mustState(t, s, "alpha-k8s"); st.AcknowledgedSequence != 3 {
		t.Fatalf("acknowledged %d, want 3", st.AcknowledgedSequence)
	}
	rec, err := s.Command(ctx, "alpha-k8s", cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	want := Result(t, cs[0], 1, "done")
	if !bytes.Equal(rec.Result, want.Bytes) || rec.ResultDigest != want.Digest || !rec.AcknowledgedAt.Equal(t0) || !rec.AppendedAt.Equal(t0) {
		t.Fatalf("record: result %s digest %s at %v/%v", rec.Result, rec.ResultDigest, rec.AppendedAt, rec.AcknowledgedAt)
	}
	if _, err := s.Command(ctx, "beta-k8s", cs[0].ID); !errors.Is(err, domain.ErrUnknownCommand) {
		t.Fatalf("command read on another stream: got %v, want ErrUnknownCommand", err)
	}
}

func testIdentityMismatch(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := appendN(t, s, "alpha-k8s", 1, 2)
	mustBind(t, s, "alpha-k8s", inst)
	for name, r := range map[string]application.ReceivedResult{
		"another command's result":   Result(t, cs[1], 1, "x"),
		"the wrong sequence in body": Result(t, cs[0], 2, "x"),
		"a wrong command digest": func() application.ReceivedResult {
			c := cs[0]
			c.Digest = cs[1].Digest
			return Result(t, c, 1, "x")
		}(),
	} {
		if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, r, t0); !errors.Is(err, domain.ErrIdentityMismatch) {
			t.Fatalf("%s: got %v, want ErrIdentityMismatch", name, err)
		}
	}
	if st := mustState(t, s, "alpha-k8s"); st.AcknowledgedSequence != 0 {
		t.Fatalf("a refused result advanced the stream to %d", st.AcknowledgedSequence)
	}
	if rec, _ := s.Command(ctx, "alpha-k8s", cs[0].ID); rec.Result != nil {
		t.Fatalf("a refused result was recorded: %s", rec.Result)
	}
}

func testReplay(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := appendN(t, s, "alpha-k8s", 1, 2)
	mustBind(t, s, "alpha-k8s", inst)
	r1 := Result(t, cs[0], 1, "one")
	first, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, r1, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 2, Result(t, cs[1], 2, "two"), t0); err != nil {
		t.Fatal(err)
	}
	again, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, r1, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if again.Sequence != first.Sequence || again.ResultDigest != first.ResultDigest || !again.Replayed {
		t.Fatalf("replay: got %+v, first %+v", again, first)
	}
	if rec, _ := s.Command(ctx, "alpha-k8s", cs[0].ID); !rec.AcknowledgedAt.Equal(t0) {
		t.Fatalf("a replay moved the acknowledgement time to %v", rec.AcknowledgedAt)
	}
}

func testResultConflict(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := appendN(t, s, "alpha-k8s", 1, 1)
	mustBind(t, s, "alpha-k8s", inst)
	r1 := Result(t, cs[0], 1, "one")
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, r1, t0); err != nil {
		t.Fatal(err)
	}
	other := Result(t, cs[0], 1, "another outcome")
	if _, err := application.ApplyResult(ctx, s, "alpha-k8s", inst, 1, other, t0); !errors.Is(err, domain.ErrResultConflict) {
		t.Fatalf("got %v, want ErrResultConflict", err)
	}
	rec, err := s.Command(ctx, "alpha-k8s", cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Result, r1.Bytes) || rec.ResultDigest != r1.Digest {
		t.Fatalf("the recorded result changed to %s", rec.Result)
	}
	if st := mustState(t, s, "alpha-k8s"); st.AcknowledgedSequence != 1 {
		t.Fatalf("acknowledged %d, want 1", st.AcknowledgedSequence)
	}
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

// Padded returns a command with id n whose canonical form is exactly size
// bytes (an operation the codec does not know, so any payload goes).
func Padded(t testing.TB, salt, n, size int) application.NewCommand {
	t.Helper()
	head := fmt.Sprintf(`{"id":%q,"issued_at":"2026-11-29T10:00:00.123Z","operation":"x-pad","payload":{"pad":"`, uuidFor(salt, n))
	tail := `"}}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("a padded command needs at least %d bytes", len(head)+len(tail))
	}
	raw := head + strings.Repeat("x", pad) + tail
	digest, canonical, err := siteprotocol.CommandDigest([]byte(raw))
	if err != nil {
		t.Fatalf("build padded command: %v", err)
	}
	if len(canonical) != size {
		t.Fatalf("padded command is %d canonical bytes, want %d", len(canonical), size)
	}
	return application.NewCommand{ID: uuidFor(salt, n), Digest: digest, Canonical: canonical}
}

// testCommandsAfterByteBudget: the commands answered add up to at most
// maxBytes of canonical form, except that the first is always answered (a
// command larger than the budget never stalls the stream).
func testCommandsAfterByteBudget(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	for i, size := range []int{1000, 1000, 1000, 5000, 1000} {
		if _, err := s.Append(ctx, "alpha-k8s", Padded(t, 70, i+1, size), t0); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		after    int64
		limit    int
		maxBytes int64
		want     []int64
	}{
		{0, 100, 2999, []int64{1, 2}},
		{0, 100, 3000, []int64{1, 2, 3}}, // exactly the budget
		{0, 100, 100, []int64{1}},        // the first always
		{3, 100, 4999, []int64{4}},       // alone over the budget
		{3, 100, 6000, []int64{4, 5}},
		{0, 2, 1 << 20, []int64{1, 2}}, // the count limit still holds
		{0, 100, 1 << 20, []int64{1, 2, 3, 4, 5}},
		{5, 100, 1 << 20, nil},
	} {
		got, err := s.CommandsAfter(ctx, "alpha-k8s", tc.after, tc.limit, tc.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, c := range got {
			seqs = append(seqs, c.Sequence)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.want) {
			t.Errorf("after %d, limit %d, %d bytes: got sequences %v, want %v", tc.after, tc.limit, tc.maxBytes, seqs, tc.want)
		}
	}
}
