package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
)

// resultTests are results: in-order acknowledgement, identity mismatch, exact replay and conflicts.
var resultTests = []testCase{
	{"AcknowledgementsAdvanceInOrderOnly", testAcknowledgeInOrder},
	{"AResultNamingAnotherCommandIsAnIdentityMismatch", testIdentityMismatch},
	{"AnIdenticalResultAfterAcknowledgementIsReplayed", testReplay},
	{"ADifferentResultAfterAcknowledgementConflictsAndChangesNothing", testResultConflict},
}

func testAcknowledgeInOrder(t *testing.T, s application.StreamStore) {
	ctx := context.Background()
	cs := boundStream(t, s, 3)
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
	cs := boundStream(t, s, 2)
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
	cs := boundStream(t, s, 2)
	r1 := Result(t, cs[0], 1, "one")
	first := mustApply(t, s, 1, r1)
	mustApply(t, s, 2, Result(t, cs[1], 2, "two"))
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
	cs := boundStream(t, s, 1)
	r1 := Result(t, cs[0], 1, "one")
	mustApply(t, s, 1, r1)
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
