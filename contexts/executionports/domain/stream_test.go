package domain

import (
	"errors"
	"testing"
)

func TestAcknowledgementDecisionTable(t *testing.T) {
	stored := &StoredCommand{ID: "c5", Digest: "d5"}
	acked := &StoredCommand{ID: "c4", Digest: "d4", ResultDigest: "r4"}
	ok := ReceivedResult{CommandID: "c5", CommandDigest: "d5", Sequence: 5, Digest: "r5"}
	for _, tc := range []struct {
		name         string
		acknowledged int64
		sequence     int64
		stored       *StoredCommand
		result       ReceivedResult
		want         AckAction
		err          error
	}{
		{"the next sequence with its command's identity is recorded", 4, 5, stored, ok, AckRecord, nil},
		{"a gap is out of order", 3, 5, stored, ok, 0, ErrOutOfOrder},
		{"sequence zero is out of order", 0, 0, nil, ok, 0, ErrOutOfOrder},
		{"another command's id is an identity mismatch", 4, 5, stored, ReceivedResult{CommandID: "c6", CommandDigest: "d5", Sequence: 5, Digest: "r"}, 0, ErrIdentityMismatch},
		{"another digest is an identity mismatch", 4, 5, stored, ReceivedResult{CommandID: "c5", CommandDigest: "dx", Sequence: 5, Digest: "r"}, 0, ErrIdentityMismatch},
		{"a body sequence other than the path's is an identity mismatch", 4, 5, stored, ReceivedResult{CommandID: "c5", CommandDigest: "d5", Sequence: 6, Digest: "r"}, 0, ErrIdentityMismatch},
		{"the next sequence beyond the head is an unknown command", 4, 5, nil, ok, 0, ErrUnknownCommand},
		{"the recorded digest again is a replay", 4, 4, acked, ReceivedResult{CommandID: "c4", CommandDigest: "d4", Sequence: 4, Digest: "r4"}, AckReplay, nil},
		{"another digest for an acknowledged sequence is a result conflict", 4, 4, acked, ReceivedResult{CommandID: "c4", CommandDigest: "d4", Sequence: 4, Digest: "rX"}, 0, ErrResultConflict},
		{"a body sequence other than an acknowledged path sequence is an identity mismatch, not a result conflict", 4, 4, acked, ReceivedResult{CommandID: "c4", CommandDigest: "d4", Sequence: 3, Digest: "rX"}, 0, ErrIdentityMismatch},
		{"an older acknowledged sequence replays too", 9, 4, acked, ReceivedResult{CommandID: "c4", CommandDigest: "d4", Sequence: 4, Digest: "r4"}, AckReplay, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecideAcknowledgement(tc.acknowledged, tc.sequence, tc.stored, tc.result)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRetryDecision(t *testing.T) {
	existing := ExistingCommand{Environment: "alpha-k8s", Sequence: 7, Digest: "d"}
	if seq, err := DecideRetry(existing, "alpha-k8s", "d"); err != nil || seq != 7 {
		t.Fatalf("same content: %d, %v", seq, err)
	}
	if _, err := DecideRetry(existing, "alpha-k8s", "e"); !errors.Is(err, ErrConflictingRetry) {
		t.Fatalf("other content: %v", err)
	}
	if _, err := DecideRetry(existing, "beta-k8s", "d"); !errors.Is(err, ErrConflictingRetry) {
		t.Fatalf("another stream: %v", err)
	}
}

func TestInstallationFence(t *testing.T) {
	if err := CheckInstallation("", "a"); err != nil {
		t.Fatalf("an unbound stream serves anyone: %v", err)
	}
	if err := CheckInstallation("a", "a"); err != nil {
		t.Fatalf("the bound installation: %v", err)
	}
	if err := CheckInstallation("a", "b"); !errors.Is(err, ErrInstallationMismatch) {
		t.Fatalf("another installation: %v", err)
	}
}

func TestOnlyTheBoundInstallationMayAcknowledge(t *testing.T) {
	if err := CheckAcknowledger("", "a"); !errors.Is(err, ErrInstallationMismatch) {
		t.Fatalf("unbound stream: got %v, want ErrInstallationMismatch", err)
	}
	if err := CheckAcknowledger("a", "b"); !errors.Is(err, ErrInstallationMismatch) {
		t.Fatalf("another installation: got %v, want ErrInstallationMismatch", err)
	}
	if err := CheckAcknowledger("a", "a"); err != nil {
		t.Fatalf("the bound installation: %v", err)
	}
}
