package environments_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/environments"
	"github.com/pharos-metallo/metallo/platform/fuzzlane"
)

// FuzzParse: an environments file's text never panics the parser, and
// every set it accepts names each environment once, with a Site, an
// authority and a backend of the closed set, each found again by its ID,
// and a principal environment:<id> that parses (README, --environments-file).
func FuzzParse(f *testing.F) {
	fuzzlane.Mark(f)
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "beta.kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("environments:\n  - id: alpha-k8s\n    site: alpha\n    authority: https://metallo.example.org\n    auth: {key_sha256: " + hashA + "}\n" +
		"  - id: beta-k8s\n    site: beta\n    authority: http://127.0.0.1:8080\n    auth:\n      tokenreview: {kubeconfig: beta.kubeconfig, username: 'system:serviceaccount:metallo-runtime:runtime', audience: metallo}\n"))
	f.Add([]byte("environments: []\n"))
	f.Add([]byte("environments:\n  - id: gamma-hpc\n    site: gamma\n    authority: https://metallo.example.org\n    backend: slurm\n    auth: {key_sha256: " + hashA + "}\n"))
	f.Add([]byte("environments:\n  - id: a\n    site: a\n    authority: http://example.org\n    auth: {key_sha256: " + hashA + "}\n  - id: a\n    site: b\n    authority: https://x\n    auth: {key_sha256: " + hashA + "}\n"))
	f.Add([]byte("environments:\n  - {id: 'x y', site: '', authority: 'ftp://x', auth: {}, extra: 1}\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := environments.Parse(raw, dir)
		if err != nil {
			return
		}
		ids := s.IDs()
		if len(ids) == 0 {
			t.Fatalf("%q: accepted with no environment", raw)
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%q: %s listed twice", raw, id)
			}
			seen[id] = true
			e, ok := s.Environment(id)
			if !ok || e.ID != id || e.Site == "" || e.Authority == "" || !slices.Contains(environments.Backends(), e.Backend) {
				t.Fatalf("%q: environment %s reads %+v, %v", raw, id, e, ok)
			}
			if _, err := auth.ParsePrincipal(auth.KindEnvironment + ":" + id); err != nil {
				t.Fatalf("%q: accepted ID %q: %v", raw, id, err)
			}
		}
	})
}
