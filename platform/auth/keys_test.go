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
