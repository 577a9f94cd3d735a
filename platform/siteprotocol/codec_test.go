package siteprotocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const startCmd = `{
  "id": "3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e", "operation": "start",
  "issued_at": "2026-11-29T10:00:00.123Z",
  "run_id": "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10", "attempt_id": "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
  "member_id": "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80", "project_id": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
  "account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, "family": "batch",
  "payload": {"demand": {"cpu": 2000, "memory": 4294967296}, "time_limit_seconds": 3600,
              "argv": ["python", "train.py"], "env": {"EPOCHS": "3"}}
}`

func TestCommandDigestIsJCSOfEveryFieldButSequenceAndDigest(t *testing.T) {
	// Hand-derived canonical form: members sorted by UTF-16 code units, no
	// whitespace, numbers in shortest form.
	raw := `{"sequence": 9, "operation":"observe","id":"x","digest":"abc","issued_at":"2026-01-01T00:00:00Z","n":1.0E2}`
	d, canonical, err := CommandDigest([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"x","issued_at":"2026-01-01T00:00:00Z","n":100,"operation":"observe"}`
	if string(canonical) != want {
		t.Fatalf("canonical = %s, want %s", canonical, want)
	}
	if d != Digest([]byte(want)) {
		t.Fatal("digest is not SHA-256 of the canonical form")
	}
}

func TestReorderedAndReformattedCommandHasTheSameDigest(t *testing.T) {
	c1, _, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(startCmd), &m); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(m) // keys sorted, whitespace gone
	c2, _, err := ParseAppend(compact)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Digest != c2.Digest {
		t.Fatalf("digests differ: %s vs %s", c1.Digest, c2.Digest)
	}
	changed := strings.Replace(startCmd, "10:00:00.123Z", "10:00:00.124Z", 1)
	c3, _, err := ParseAppend([]byte(changed))
	if err != nil {
		t.Fatal(err)
	}
	if c3.Digest == c1.Digest {
		t.Fatal("a changed issued_at must change the digest")
	}
}

func TestStoredCommandRoundTripsToThePuller(t *testing.T) {
	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	served, err := EncodeStored(canonical, 7, c.Digest)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := ParsePulled(served)
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Sequence != 7 || pulled.Digest != c.Digest || pulled.ID != c.ID {
		t.Fatalf("pulled %+v", pulled)
	}
	tampered := strings.Replace(string(served), `"python"`, `"python3"`, 1)
	if _, err := ParsePulled([]byte(tampered)); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("tampered command: want ErrDigestMismatch, got %v", err)
	}
}

func TestNullsUnknownMembersAndBadPayloadsAreRefused(t *testing.T) {
	cases := map[string]struct {
		raw  string
		want error
	}{
		"null member":        {strings.Replace(startCmd, `"family": "batch"`, `"family": null`, 1), ErrMalformed},
		"unknown member":     {strings.Replace(startCmd, `"family": "batch"`, `"family": "batch", "colour": "red"`, 1), ErrMalformed},
		"unknown payload":    {strings.Replace(startCmd, `"argv"`, `"image": "x", "argv"`, 1), ErrInvalid},
		"bad demand key":     {strings.Replace(startCmd, `"cpu": 2000`, `"cpu": 2000, "cores": 2`, 1), ErrInvalid},
		"local time":         {strings.Replace(startCmd, `10:00:00.123Z`, `10:00:00.123+01:00`, 1), ErrInvalid},
		"sequence given":     {strings.Replace(startCmd, `"id"`, `"sequence": 3, "id"`, 1), ErrInvalid},
		"wrong digest given": {strings.Replace(startCmd, `"id"`, `"digest": "`+strings.Repeat("0", 64)+`", "id"`, 1), ErrDigestMismatch},
		"missing account":    {strings.Replace(startCmd, `"account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1},`, ``, 1), ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ParseAppend([]byte(tc.raw)); !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
	big := strings.Replace(startCmd, `"EPOCHS": "3"`, `"BIG": "`+strings.Repeat("x", MaxCommandBytes)+`"`, 1)
	if _, _, err := ParseAppend([]byte(big)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
}

func TestUnknownOperationIsAValidEnvelope(t *testing.T) {
	raw := `{"id":"3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","operation":"teleport","issued_at":"2026-11-29T10:00:00Z","payload":{"anything":1}}`
	if _, _, err := ParseAppend([]byte(raw)); err != nil {
		t.Fatalf("unknown operations are relayed for the Runtime to refuse: %v", err)
	}
}

func TestResultBytesAreCanonicalAndVerifiable(t *testing.T) {
	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	served, _ := EncodeStored(canonical, 7, c.Digest)
	pulled, _ := ParsePulled(served)
	r, b, err := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued},
		[]NativeRef{{Kind: "Job", Namespace: "project-x", Name: "attempt-y", UID: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	again, b2, _ := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued},
		[]NativeRef{{Kind: "Job", Namespace: "project-x", Name: "attempt-y", UID: "u"}})
	if string(b) != string(b2) || r.Digest != again.Digest {
		t.Fatal("the same result must encode to the same bytes")
	}
	parsed, err := ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Digest != r.Digest || parsed.Sequence != 7 {
		t.Fatalf("parsed %+v", parsed)
	}
	if _, err := ParseResult([]byte(strings.Replace(string(b), "Job created", "Job made", 1))); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("altered result: want ErrDigestMismatch, got %v", err)
	}
	if _, _, err := NewResult(pulled, OutcomeSucceeded, Reason("made-up"), "", nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reason outside the vocabulary: want ErrInvalid, got %v", err)
	}
}

func TestSafeRelativePath(t *testing.T) {
	for p, ok := range map[string]bool{"out/a.txt": true, "a": true, "../a": false, "/etc/passwd": false, "a/../../b": false, "": false, "./a": false, "a//b": false} {
		if SafeRelativePath(p) != ok {
			t.Errorf("SafeRelativePath(%q) != %v", p, ok)
		}
	}
}
