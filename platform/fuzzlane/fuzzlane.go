// Package fuzzlane marks a fuzz target's run as the fuzz lane: when the
// test binary fuzzes (go test -fuzz, as `make fuzz` and the short pass of
// `make test` run it), Mark logs "metallo-lane: fuzz", which
// app/cmd/lanecheck counts; a plain `go test` run, which only replays the
// seed corpus, logs nothing, so the lane proves that fuzzing ran
// (docs/testing.md#fuzzing).
package fuzzlane

import (
	"flag"
	"testing"
)

// Marker is the line that puts a fuzz target in the fuzz lane.
const Marker = "metallo-lane: fuzz"

// Mark logs Marker on f when the test binary was asked to fuzz.
func Mark(f *testing.F) {
	f.Helper()
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		f.Log(Marker)
	}
}
