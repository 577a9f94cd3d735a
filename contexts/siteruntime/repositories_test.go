package siteruntime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/grants"
	"github.com/pharos-metallo/metallo/platform/clock"
)

// The repository grant provider is chosen explicitly: none, an unknown
// kind, plain http off loopback or a grants file that cannot be parsed
// refuses start-up naming --repository-grants; http: builds the HTTP
// client and file: the grants file.
func TestTheRepositoryGrantProviderIsChosenExplicitly(t *testing.T) {
	dir := t.TempDir()
	good, broken := filepath.Join(dir, "grants.yaml"), filepath.Join(dir, "broken.yaml")
	for f, body := range map[string]string{good: "[]\n", broken: "- project: someone\n"} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"", "vault:x", "http:http://grants.example", "http:", "file:", "file:" + filepath.Join(dir, "absent"), "file:" + broken} {
		_, err := siteruntime.NewRepositoryGrants(siteruntime.Config{RepositoryGrants: v}, clock.System{})
		if err == nil || !strings.Contains(err.Error(), "--repository-grants") {
			t.Errorf("%q: want an error naming --repository-grants, got %v", v, err)
		}
	}
	if g, err := siteruntime.NewRepositoryGrants(siteruntime.Config{RepositoryGrants: "file:" + good}, clock.System{}); err != nil {
		t.Fatal(err)
	} else if _, ok := g.(*grants.File); !ok {
		t.Fatalf("file: built %T", g)
	}
	if g, err := siteruntime.NewRepositoryGrants(siteruntime.Config{RepositoryGrants: "http:https://grants.example.org"}, clock.System{}); err != nil {
		t.Fatal(err)
	} else if _, ok := g.(*grants.HTTP); !ok {
		t.Fatalf("http: built %T", g)
	}
}
