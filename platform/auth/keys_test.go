package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyAuthenticatesAsItsPrincipalAndNothingElseDoes(t *testing.T) {
	p, _ := ParsePrincipal("site:alpha")
	key, entry, err := NewKey(p)
	if err != nil {
		t.Fatal(err)
	}
	other, otherEntry, _ := NewKey(Principal{Kind: KindService, ID: "beto"})
	ks, err := NewKeyStore(KeysFile{Keys: []KeyEntry{entry, otherEntry}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ks.Authenticate(t.Context(), key)
	if err != nil || !got.Is(KindSite, "alpha") {
		t.Fatalf("got %v, %v", got, err)
	}
	got, err = ks.Authenticate(t.Context(), other)
	if err != nil || got.String() != "service:beto" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", key + "x", strings.ToUpper(key), entry.SHA256} {
		if _, err := ks.Authenticate(t.Context(), bad); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("token %q: want ErrUnauthenticated, got %v", bad, err)
		}
	}
}

func TestKeysFileIsValidatedNamingTheEntry(t *testing.T) {
	cases := map[string]string{
		"bad principal":  "keys:\n- principal: root\n  sha256: " + strings.Repeat("a", 64) + "\n",
		"short hash":     "keys:\n- principal: site:a\n  sha256: abc\n",
		"upper hash":     "keys:\n- principal: site:a\n  sha256: " + strings.Repeat("A", 64) + "\n",
		"duplicate hash": "keys:\n- principal: site:a\n  sha256: " + strings.Repeat("a", 64) + "\n- principal: site:b\n  sha256: " + strings.Repeat("a", 64) + "\n",
		"unknown field":  "keys:\n- principal: site:a\n  sha256: " + strings.Repeat("a", 64) + "\n  key: plaintext\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.yaml")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadKeys(path); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestParsePrincipal(t *testing.T) {
	for s, ok := range map[string]bool{"site:alpha": true, "environment:alpha-k8s": true, "service:execution": true, "user:x": false, "site:": false, "site": false, "site:a b": false} {
		if _, err := ParsePrincipal(s); (err == nil) != ok {
			t.Errorf("ParsePrincipal(%q) err=%v", s, err)
		}
	}
}

// keys.yaml never holds an environment's key: an environment:<id> entry is refused naming it
// and where the key goes (docs/site-protocol.md#authentication-and-authorisation); a file
// listing no key is refused saying so; an unknown field is one fault naming its entry, reported
// with every other fault (docs/architecture.md#configuration-files).
func TestParseKeysRefusesEnvironmentKeysNoKeysAndReportsEveryFault(t *testing.T) {
	svc := "  - principal: service:execution\n    sha256: " + HashKey("k1") + "\n"
	for name, tc := range map[string]struct {
		body string
		want []string
	}{
		"environment principal": {"keys:\n" + svc + "  - principal: environment:alpha-k8s\n    sha256: " + HashKey("k2") + "\n",
			[]string{"keys[1] (environment:alpha-k8s): an environment's key never goes in keys.yaml", "environments.yaml"}},
		"no key":      {"keys: []\n", []string{"no key is listed"}},
		"no keys key": {"{}\n", []string{"no key is listed"}},
		"unknown field with other faults": {"keys:\n" + svc + "    retired: true\n  - principal: nobody\n    sha256: " + HashKey("k3") + "\nextra: 1\n",
			[]string{`keys[0] (service:execution): unknown field "retired"`, `unknown field "extra"`, `keys[1]: bad principal "nobody"`}},
		"field in the wrong case": {"keys:\n  - Principal: site:a\n    sha256: " + HashKey("k4") + "\n", []string{`unknown field "Principal"`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseKeys([]byte(tc.body))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
