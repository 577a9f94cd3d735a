package auth

import (
	"testing"

	"github.com/pharos-metallo/metallo/platform/fuzzlane"
)

// FuzzParseKeys: a keys file's text never panics the parser, and every
// key store it accepts holds at least one key, only valid principals, none
// of them an environment's, each key hash once
// (docs/architecture.md#configuration-files).
func FuzzParseKeys(f *testing.F) {
	fuzzlane.Mark(f)
	f.Add([]byte("keys:\n  - principal: site:alpha\n    sha256: " + HashKey("k1") + "\n  - principal: service:beto\n    sha256: " + HashKey("k2") + "\n"))
	f.Add([]byte("keys: []\n"))
	f.Add([]byte("keys:\n  - principal: site:alpha\n    sha256: " + HashKey("k1") + "\n  - principal: site:beta\n    sha256: " + HashKey("k1") + "\n"))
	f.Add([]byte("keys:\n  - principal: nobody\n    sha256: xyz\n    extra: 1\n"))
	f.Add([]byte("{keys: [{principal: 'environment:alpha-k8s', sha256: \"" + HashKey("k3") + "\"}]}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseKeys(raw)
		if err != nil {
			return
		}
		if len(s.entries) == 0 {
			t.Fatalf("%q: accepted with no key", raw)
		}
		seen := map[[32]byte]bool{}
		for _, e := range s.entries {
			if _, err := ParsePrincipal(e.principal.String()); err != nil {
				t.Fatalf("%q: accepted principal %v: %v", raw, e.principal, err)
			}
			if e.principal.Kind == KindEnvironment {
				t.Fatalf("%q: accepted an environment's key", raw)
			}
			if seen[e.hash] {
				t.Fatalf("%q: a hash accepted twice", raw)
			}
			seen[e.hash] = true
		}
	})
}
