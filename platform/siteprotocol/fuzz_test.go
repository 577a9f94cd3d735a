package siteprotocol

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pharos-metallo/metallo/platform/fuzzlane"
)

// fuzzCommands are seeds of the command targets: every operation's shape,
// and texts that break one rule each.
var fuzzCommands = []string{
	startCmd,
	`{"id":"3f9a6c1e-2b7d-4e5f-9a10-6c2d8e4b7f01","issued_at":"2026-11-29T10:00:00.000Z","member_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","operation":"bind-member","payload":{"account":"member-9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","binding_id":"5d1e7f20-8a3b-4c6d-9e0f-1a2b3c4d5e6f","generation":1,"namespace":"project-0a1b2c3d","party_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","revision":1},"project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"}`,
	`{"id":"3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6f","operation":"observe","issued_at":"2026-11-29T10:00:00Z","run_id":"5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10","attempt_id":"7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24","member_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9","family":"batch"}`,
	`{"id":"x","operation":"observe","n":1.0E2,"payload":{"x":9007199254740993}}`,
	`{"id":"x","operation":"read-logs","payload":{"tail_bytes":1e400}}`,
	`{"id":"x","Operation":"observe"}`,
	`{"id":"x","operation":null}`,
	`[1,2,3]`,
}

// FuzzParseAppend: ParseAppend never panics; every error wraps one of the
// codec's errors; what it accepts, it accepts again in canonical form with
// the same digest, and the Runtime accepts it as served (EncodeStored then
// ParsePulled), so the server never stores a command the Runtime refuses
// (docs/site-protocol.md#canonical-encoding-and-strict-json).
func FuzzParseAppend(f *testing.F) {
	fuzzlane.Mark(f)
	for _, s := range fuzzCommands {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, canonical, err := ParseAppend(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrDigestMismatch) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("ParseAppend(%q): %v wraps none of the codec's errors", raw, err)
			}
			return
		}
		again, canonical2, err := ParseAppend(canonical)
		if err != nil || again.Digest != c.Digest || !bytes.Equal(canonical, canonical2) {
			t.Fatalf("the canonical form %s of %q does not parse to itself: %v", canonical, raw, err)
		}
		served, err := EncodeStored(canonical, 1, c.Digest)
		if err != nil {
			t.Fatalf("EncodeStored(%s): %v", canonical, err)
		}
		pulled, err := ParsePulled(served)
		if err != nil || pulled.Digest != c.Digest || pulled.Sequence != 1 {
			t.Fatalf("the Runtime refuses the served form %s of %q: %v", served, raw, err)
		}
	})
}

// FuzzParsePulled: ParsePulled and the payload decoders behind
// ValidatePayload never panic on what a server might send.
func FuzzParsePulled(f *testing.F) {
	fuzzlane.Mark(f)
	for _, s := range fuzzCommands {
		if _, canonical, err := ParseAppend([]byte(s)); err == nil {
			d, _, _ := CommandDigest(canonical)
			if served, err := EncodeStored(canonical, 7, d); err == nil {
				f.Add(served)
			}
		}
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParsePulled(raw)
		if err != nil {
			return
		}
		if c.Sequence < 1 || c.Digest == "" {
			t.Fatalf("ParsePulled(%q) accepted %+v", raw, c)
		}
		_ = ValidatePayload(c)
	})
}

// FuzzParseResult: ParseResult never panics; a result it accepts carries
// the digest of its content, and encoded again by the Runtime's encoder it
// parses to the same outcome, reason and command.
func FuzzParseResult(f *testing.F) {
	fuzzlane.Mark(f)
	c, err := ParsePulled(mustServed(f, startCmd, 3))
	if err != nil {
		f.Fatal(err)
	}
	_, good, err := NewResult(c, OutcomeSucceeded, ReasonCreated, "created", map[string]string{"state": "queued"}, []NativeRef{{Kind: "Job", Name: "attempt-1", UID: "u"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"sequence":3`), []byte(`"sequence":1e30`), 1))
	f.Add(bytes.Replace(good, []byte(`"outcome":"succeeded"`), []byte(`"outcome":null`), 1))
	f.Add([]byte(`{"digest":"x"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := ParseResult(raw)
		if err != nil {
			return
		}
		if d, err := ResultDigest(raw); err != nil || d != r.Digest {
			t.Fatalf("ParseResult(%q) accepted digest %s, content digests to %s (%v)", raw, r.Digest, d, err)
		}
		again, b, err := EncodeResult(r)
		if err != nil {
			t.Fatalf("a result ParseResult accepted cannot be encoded again: %v (%q)", err, raw)
		}
		back, err := ParseResult(b)
		if err != nil || back.Outcome != r.Outcome || back.Reason != r.Reason || back.CommandID != r.CommandID || back.Digest != again.Digest {
			t.Fatalf("the re-encoded result %s does not parse back: %v", b, err)
		}
	})
}

func mustServed(f *testing.F, cmd string, seq int64) []byte {
	f.Helper()
	c, canonical, err := ParseAppend([]byte(cmd))
	if err != nil {
		f.Fatal(err)
	}
	served, err := EncodeStored(canonical, seq, c.Digest)
	if err != nil {
		f.Fatal(err)
	}
	return served
}
