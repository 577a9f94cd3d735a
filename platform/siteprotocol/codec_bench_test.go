package siteprotocol

import "testing"

// The codec's per-command cost on both sides of the protocol: the server
// parses an append and encodes it for pulls; the Runtime parses the pull
// and encodes its result; the server parses the result.
func BenchmarkCodecRoundTrip(b *testing.B) {
	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		b.Fatal(err)
	}
	served, err := EncodeStored(canonical, 7, c.Digest)
	if err != nil {
		b.Fatal(err)
	}
	refs := []NativeRef{{Kind: "Job", Namespace: "project-x", Name: "attempt-y", UID: "u"}}
	b.Run("ParseAppend", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := ParseAppend([]byte(startCmd)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeStored", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeStored(canonical, 7, c.Digest); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParsePulled", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParsePulled(served); err != nil {
				b.Fatal(err)
			}
		}
	})
	pulled, _ := ParsePulled(served)
	_, result, _ := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued}, refs)
	b.Run("NewResult", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued}, refs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParseResult", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseResult(result); err != nil {
				b.Fatal(err)
			}
		}
	})
}
