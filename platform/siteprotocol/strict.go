package siteprotocol

import (
	"fmt"

	"github.com/pharos-metallo/metallo/platform/ijson"
)

// checkJSON is the one strictness check every command, result and payload
// passes before it is decoded, digested or stored
// (docs/site-protocol.md#canonical-encoding-and-strict-json; RFC 8785 canonicalises I-JSON, RFC 7493), applied by
// ijson.Check with its default options:
//   - the text is valid UTF-8 (RFC 8259 section 8.1) and no string escapes
//     a lone surrogate (RFC 7493 section 2.1), so what is stored and served
//     back is the text that was digested;
//   - no null anywhere: optional members are absent, never null;
//   - no string (value or member name) holds U+0000: text columns of the
//     stores cannot hold it, and no field of the protocol needs it;
//   - no object names a member twice, at any depth (RFC 7493 section 2.3):
//     decoders keep one of the two silently, so the digest and the decoded
//     command could disagree;
//   - exactly one JSON value;
//   - objects and arrays nest at most MaxDepth levels.
//
// It returns the top-level member names when raw is an object (nil
// otherwise), or an error wrapping ErrMalformed and the *ijson.Error that
// names the rule and its location.
func checkJSON(raw []byte) (map[string]bool, error) {
	names, err := ijson.Check(raw, ijson.Options{MaxDepth: MaxDepth})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if names == nil {
		return nil, nil
	}
	top := make(map[string]bool, len(names))
	for _, n := range names {
		top[n] = true
	}
	return top, nil
}

// CheckJSON applies the same strict rules to any JSON request body (valid
// UTF-8, no escaped lone surrogate, no null, no U+0000 in any string, no
// member name twice in one object, exactly one value, at most MaxDepth
// levels), so every body of
// the protocol's routes is refused the same way as a command or a result.
// The error wraps ErrMalformed and an *ijson.Error naming the rule broken
// and where.
func CheckJSON(raw []byte) error {
	_, err := checkJSON(raw)
	return err
}
