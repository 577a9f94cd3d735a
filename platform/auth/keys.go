package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/pharos-metallo/metallo/platform/configfile"
)

// KeysFile is the shape of keys.yaml:
//
//	keys:
//	  - principal: site:alpha
//	    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//
// Only the lower-case hex SHA-256 of each key is stored; the key itself is
// shown once by `metallo keys new` and never written.
type KeysFile struct {
	Keys []KeyEntry `json:"keys"`
}

// KeyEntry is one line of the keys file.
type KeyEntry struct {
	Principal string `json:"principal"`
	SHA256    string `json:"sha256"`
}

// KeyStore authenticates static bearer keys against their stored hashes.
type KeyStore struct {
	entries []storedKey
}

type storedKey struct {
	principal Principal
	hash      [sha256.Size]byte
}

// LoadKeys reads and validates a keys file. It fails, naming the entry, on a
// malformed principal or hash and on a hash listed twice (a key can stand for
// only one principal).
func LoadKeys(path string) (*KeyStore, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keys file: %w", err)
	}
	s, err := ParseKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	return s, nil
}

// ParseKeys decodes a keys file's text (YAML; a repeated field or text
// that is not YAML is an error) and validates it as NewKeyStore does, and
// more: the file lists at least one key, has no unknown field, and names
// no environment:<id> principal — an environment's Runtime key is only
// ever in environments.yaml (docs/site-protocol.md#authentication-and-authorisation).
// Its error joins every fault, each naming its entry (keys[i] (principal));
// it never panics, whatever raw holds (FuzzParseKeys).
func ParseKeys(raw []byte) (*KeyStore, error) {
	var f KeysFile
	unknown, err := configfile.Decode(raw, &f)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs []error
	if len(f.Keys) == 0 {
		errs = append(errs, errors.New("no key is listed: list at least one under the keys key (`metallo keys new --principal <kind>:<id> --append <file>`)"))
	}
	for _, u := range unknown {
		if u.Entry < 0 {
			errs = append(errs, fmt.Errorf("unknown field %q", u.Field))
		} else {
			errs = append(errs, fmt.Errorf("keys[%d] (%s): unknown field %q", u.Entry, f.Keys[u.Entry].Principal, u.Field))
		}
	}
	for i, e := range f.Keys {
		if p, err := ParsePrincipal(e.Principal); err == nil && p.Kind == KindEnvironment {
			errs = append(errs, fmt.Errorf("keys[%d] (%s): an environment's key never goes in keys.yaml; give its SHA-256 as auth.key_sha256 of environment %s in environments.yaml", i, e.Principal, p.ID))
		}
	}
	s, err := NewKeyStore(f)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// NewKeyStore validates f and returns a store for it. Its error joins every
// fault, each naming its entry: a malformed principal or hash, a hash
// listed twice (a key stands for one principal).
func NewKeyStore(f KeysFile) (*KeyStore, error) {
	s := &KeyStore{}
	seen := map[[sha256.Size]byte]bool{}
	var errs []error
	for i, e := range f.Keys {
		p, err := ParsePrincipal(e.Principal)
		if err != nil {
			errs = append(errs, fmt.Errorf("keys[%d]: %w", i, err))
		}
		b, herr := hex.DecodeString(e.SHA256)
		if herr != nil || len(b) != sha256.Size || strings.ToLower(e.SHA256) != e.SHA256 {
			errs = append(errs, fmt.Errorf("keys[%d] (%s): sha256 must be 64 lower-case hex digits", i, e.Principal))
			continue
		}
		var h [sha256.Size]byte
		copy(h[:], b)
		if seen[h] {
			errs = append(errs, fmt.Errorf("keys[%d] (%s): the same key hash is listed twice", i, e.Principal))
			continue
		}
		seen[h] = true
		if err == nil {
			s.entries = append(s.entries, storedKey{principal: p, hash: h})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// Len returns the number of keys held.
func (s *KeyStore) Len() int { return len(s.entries) }

// LogFields describe the store in a reload's log line (platform/reload):
// how many keys it holds and their principals (never a hash).
func (s *KeyStore) LogFields() []zap.Field {
	ps := make([]string, 0, len(s.entries))
	for _, e := range s.entries {
		ps = append(ps, e.principal.String())
	}
	slices.Sort(ps)
	return []zap.Field{zap.Int("keys", len(s.entries)), zap.Strings("principals", slices.Compact(ps))}
}

// Authenticate hashes token and compares it with every stored hash in
// constant time (every entry is compared, whatever matches). It returns
// ErrUnauthenticated when no entry matches.
func (s *KeyStore) Authenticate(_ context.Context, token string) (Principal, error) {
	h := sha256.Sum256([]byte(token))
	var found Principal
	matched := 0
	for _, e := range s.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			found = e.principal
			matched = 1
		}
	}
	if matched == 0 || token == "" {
		return Principal{}, ErrUnauthenticated
	}
	return found, nil
}

// HashKey returns the lower-case hex SHA-256 of key, as stored in keys.yaml.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// NewKey returns a fresh random key (32 bytes from crypto/rand, base64url
// without padding, prefixed "mtl_") and its keys-file entry for p.
func NewKey(p Principal) (string, KeyEntry, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", KeyEntry{}, fmt.Errorf("read random key: %w", err)
	}
	key := "mtl_" + base64.RawURLEncoding.EncodeToString(b[:])
	return key, KeyEntry{Principal: p.String(), SHA256: HashKey(key)}, nil
}
