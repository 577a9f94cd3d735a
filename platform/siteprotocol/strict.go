package siteprotocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkJSON is the one strictness check every command, result and payload
// passes before it is decoded, digested or stored (site-protocol.md
// "Encoding rules"; RFC 8785 canonicalises I-JSON, RFC 7493):
//   - the text is valid UTF-8 (RFC 8259 section 8.1) and no string escapes
//     a lone surrogate (RFC 7493 section 2.1), so what is stored and served
//     back is the text that was digested;
//   - no null anywhere: optional members are absent, never null;
//   - no string (value or member name) holds U+0000: text columns of the
//     stores cannot hold it, and no field of the protocol needs it;
//   - no object names a member twice, at any depth (RFC 7493 section 2.3):
//     decoders keep one of the two silently, so the digest and the decoded
//     command could disagree;
//   - exactly one JSON value.
//
// It returns the top-level member names when raw is an object (nil
// otherwise), or an error wrapping ErrMalformed that names the rule.
func checkJSON(raw []byte) (map[string]bool, error) {
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrMalformed)
	}
	// frame is one open object or array; an object tracks its member names
	// and whether its next string token is a name.
	type frame struct {
		names    map[string]bool
		wantName bool
	}
	var (
		stack []*frame
		top   map[string]bool
		done  bool
	)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if !done {
				return nil, fmt.Errorf("%w: no JSON value", ErrMalformed)
			}
			return top, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if done {
			return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrMalformed)
		}
		var parent *frame
		if n := len(stack); n > 0 {
			parent = stack[n-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if parent != nil && parent.names != nil {
					parent.wantName = true // after this value, a name
				}
				f := &frame{}
				if v == '{' {
					f.names, f.wantName = map[string]bool{}, true
					if len(stack) == 0 {
						top = f.names
					}
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
				done = len(stack) == 0
			}
			continue
		case nil:
			return nil, fmt.Errorf("%w: null is not allowed; leave optional members out", ErrMalformed)
		case string:
			// The token's text: separators and white space, then the quoted
			// string (which alone can hold a backslash).
			if loneSurrogate(raw[start:dec.InputOffset()]) {
				return nil, fmt.Errorf("%w: a string escapes a lone UTF-16 surrogate", ErrMalformed)
			}
			if strings.IndexByte(v, 0) >= 0 {
				return nil, fmt.Errorf("%w: a string holds U+0000 (NUL)", ErrMalformed)
			}
			if parent != nil && parent.wantName {
				if parent.names[v] {
					return nil, fmt.Errorf("%w: member %s appears twice in one object", ErrMalformed, strconv.Quote(v))
				}
				parent.names[v], parent.wantName = true, false
				continue
			}
		}
		// A scalar value.
		if parent == nil {
			done = true
		} else if parent.names != nil {
			parent.wantName = true
		}
	}
}

// loneSurrogate reports whether the JSON string text s (already known to be
// valid JSON) holds a \u escape of a UTF-16 surrogate that is not a high
// surrogate directly followed by an escaped low one.
func loneSurrogate(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++ // the escaped character; "\\\\" skips the second backslash
		if s[i] != 'u' {
			continue
		}
		r := hex4(s[i+1 : i+5])
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xdc00 { // a low surrogate first
			return true
		}
		if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
			return true
		}
		if low := hex4(s[i+3 : i+7]); low < 0xdc00 || low > 0xdfff {
			return true
		}
		i += 6
	}
	return false
}

// hex4 decodes four hex digits (validated by the JSON decoder).
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// CheckJSON applies the same strict rules to any JSON request body (valid
// UTF-8, no escaped lone surrogate, no null, no member name twice in one
// object, exactly one value), so every body of the protocol's routes is
// refused the same way as a command or a result. The error wraps
// ErrMalformed and names the rule broken.
func CheckJSON(raw []byte) error {
	_, err := checkJSON(raw)
	return err
}
