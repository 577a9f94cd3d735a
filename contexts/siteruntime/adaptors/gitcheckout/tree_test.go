package gitcheckout

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Links are resolved for real, component by component, with the checkout
// as the root: a link through another link, ".." above the root, an
// absolute target and a path into .git are found; links that stay inside
// (dangling ones included) are not.
func TestEscapingLinksAreFoundByRealResolution(t *testing.T) {
	for name, c := range map[string]struct {
		links map[string]string
		want  string // "" for none, else a word of the description
	}{
		"inside":                {map[string]string{"a": "b", "d/up": "../a", "dangling": "x/y/z"}, ""},
		"dot-dot above":         {map[string]string{"up": ".."}, "leaves"},
		"absolute":              {map[string]string{"passwd": "/etc/passwd"}, "absolute"},
		"through another link":  {map[string]string{"sub/inner": "..", "data": "sub/inner/../../outside"}, "leaves"},
		"into .git":             {map[string]string{"tools/hooks": "../.git/hooks"}, "enters .git"},
		".git itself":           {map[string]string{"g": ".git"}, "enters .git"},
		"into .git via a link":  {map[string]string{"here": ".", "x": "here/.git/config"}, "enters .git"},
		"a prefix is not a dir": {map[string]string{"x": "../checkout-sibling"}, "leaves"},
		"loop":                  {map[string]string{"a": "b", "b": "a"}, "loops"},
	} {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "checkout")
			if err := os.MkdirAll(filepath.Join(root, ".git", "hooks"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "b"), []byte("b"), 0o644); err != nil && c.want != "loops" {
				t.Fatal(err)
			}
			if c.want == "loops" {
				_ = os.Remove(filepath.Join(root, "b"))
			}
			for link, target := range c.links {
				p := filepath.Join(root, link)
				_ = os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			got, err := findEscapingLink(root)
			if err != nil {
				t.Fatal(err)
			}
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// The credential helper answers only for the repository's protocol and
// host, and stores nothing.
func TestTheCredentialHelperAnswersOnlyTheRepositoryHost(t *testing.T) {
	dir := t.TempDir()
	for f, v := range map[string]string{UsernameFile: "member\n", TokenFile: "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(op, in string) string {
		var out bytes.Buffer
		if err := AnswerCredential(op, strings.NewReader(in), &out, dir, "https://git.example.org:8443/lab/model.git"); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if got := ask("get", "protocol=https\nhost=git.example.org:8443\npath=lab/model.git\n\n"); got != "username=member\npassword=s3cret\n" {
		t.Fatalf("for the host: %q", got)
	}
	for _, in := range []string{"protocol=https\nhost=objects.example.org\n\n", "protocol=http\nhost=git.example.org:8443\n\n", "protocol=https\nhost=git.example.org\n\n"} {
		if got := ask("get", in); got != "" {
			t.Errorf("%q answered %q", in, got)
		}
	}
	if got := ask("store", "protocol=https\nhost=git.example.org:8443\nusername=u\npassword=p\n\n"); got != "" {
		t.Errorf("store answered %q", got)
	}
	if HelperCommand("/usr/bin/metallo", "a b", "it's") != `!'/usr/bin/metallo' 'a b' 'it'\''s'` {
		t.Errorf("quoting: %s", HelperCommand("/usr/bin/metallo", "a b", "it's"))
	}
}
