package siteprotocol

import (
	"errors"
	"testing"
)

// Every reason of the vocabulary has exactly one outcome, and a result is
// valid only with its reason's outcome (docs/site-protocol.md#repository-checkout-reasons).
func TestEveryReasonHasItsOutcomeAndResultsMustCarryIt(t *testing.T) {
	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	served, _ := EncodeStored(canonical, 7, c.Digest)
	pulled, _ := ParsePulled(served)
	seen := map[Reason]bool{}
	for _, r := range Reasons() {
		if seen[r] {
			t.Errorf("%s is listed twice", r)
		}
		seen[r] = true
		want, ok := r.Outcome()
		if !ok || !want.Valid() {
			t.Errorf("%s has no outcome", r)
			continue
		}
		_, b, err := NewResult(pulled, want, r, "m", nil, nil)
		if err != nil {
			t.Errorf("%s with %s: %v", r, want, err)
			continue
		}
		if _, err := ParseResult(b); err != nil {
			t.Errorf("%s with %s does not parse back: %v", r, want, err)
		}
		for _, other := range []Outcome{OutcomeSucceeded, OutcomeFailed, OutcomeRefused} {
			if other == want {
				continue
			}
			if _, _, err := NewResult(pulled, other, r, "m", nil, nil); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s with outcome %s: want ErrInvalid, got %v", r, other, err)
			}
		}
	}
	if _, ok := Reason("made-up").Outcome(); ok {
		t.Error("a reason outside the vocabulary has an outcome")
	}
	// The repository checkout reasons: what the repository or its content
	// caused fails; the credential is refused.
	for r, want := range map[Reason]Outcome{
		ReasonRepositoryUnavailable: OutcomeFailed, ReasonCommitMissing: OutcomeFailed, ReasonSizeExceeded: OutcomeFailed,
		ReasonSymlinkEscape: OutcomeFailed, ReasonLFSMissing: OutcomeFailed, ReasonCredentialUnavailable: OutcomeRefused,
	} {
		if got, ok := r.Outcome(); !ok || got != want || !r.Known() {
			t.Errorf("%s: outcome %s (known %v), want %s", r, got, ok, want)
		}
	}
}

// The read operations are exactly read-logs, read-file and proxy: their
// results are the ones whose content the server keeps only for its
// retention (docs/site-protocol.md#read-results-expire).
func TestTheReadOperationsAreThePrivateReads(t *testing.T) {
	reads := map[Operation]bool{}
	for _, op := range ReadOperations() {
		reads[op] = true
	}
	if len(reads) != 3 || !reads[OpReadLogs] || !reads[OpReadFile] || !reads[OpProxy] {
		t.Fatalf("ReadOperations() = %v", ReadOperations())
	}
	for _, op := range append(Operations(), "x-unknown") {
		if op.IsRead() != reads[op] {
			t.Fatalf("%s.IsRead() = %v", op, op.IsRead())
		}
	}
}
