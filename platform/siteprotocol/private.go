package siteprotocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// PrivateValue stands in an operator's view for a member's private bytes:
// their size and SHA-256, never the bytes (docs/operations.md#operator-reads).
type PrivateValue struct {
	// Private is always true: the value was replaced.
	Private bool `json:"private"`
	// SizeBytes is the size of the bytes (decoded, for base64 members).
	SizeBytes int `json:"size_bytes"`
	// SHA256 is the lower-case hex SHA-256 of the bytes.
	SHA256 string `json:"sha256"`
}

func privateOf(b []byte) PrivateValue {
	sum := sha256.Sum256(b)
	return PrivateValue{Private: true, SizeBytes: len(b), SHA256: hex.EncodeToString(sum[:])}
}

// OperatorView returns the JSON object raw (a command as stored or a
// result as recorded) with a member's data replaced by PrivateValue, for
// readers who must not see it (docs/operations.md#operator-reads). Within
// the object's "payload" and "detail" members only:
//   - content_base64 and body_base64 (private-read contents, proxied
//     bodies) become content and body, each the PrivateValue of the
//     decoded bytes (of the text itself when it is not base64);
//   - every value of env (a start's environment variables) and of headers
//     (a proxied request's or answer's header values) becomes its
//     PrivateValue, the names kept.
//
// Everything else is kept as it is. It fails only when raw is not a JSON
// object.
func OperatorView(raw []byte) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("operator view: %w", err)
	}
	for _, member := range []string{"payload", "detail"} {
		inner, ok := obj[member]
		if !ok {
			continue
		}
		view, err := privateMembers(inner)
		if err != nil {
			return nil, fmt.Errorf("operator view of %s: %w", member, err)
		}
		obj[member] = view
	}
	return marshalSorted(obj)
}

// privateMembers replaces the private members of one payload or detail
// object; a value that is not an object is kept.
func privateMembers(raw json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw, nil
	}
	for name, to := range map[string]string{"content_base64": "content", "body_base64": "body"} {
		v, ok := obj[name]
		if !ok {
			continue
		}
		var text string
		if json.Unmarshal(v, &text) != nil {
			return nil, fmt.Errorf("%s is not a string", name)
		}
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			b = []byte(text)
		}
		delete(obj, name)
		enc, _ := json.Marshal(privateOf(b))
		obj[to] = enc
	}
	if v, ok := obj["env"]; ok {
		var env map[string]string
		if json.Unmarshal(v, &env) != nil {
			return nil, fmt.Errorf("env is not an object of strings")
		}
		out := make(map[string]PrivateValue, len(env))
		for k, x := range env {
			out[k] = privateOf([]byte(x))
		}
		obj["env"], _ = json.Marshal(out)
	}
	if v, ok := obj["headers"]; ok {
		var h map[string][]string
		if json.Unmarshal(v, &h) != nil {
			return nil, fmt.Errorf("headers is not an object of string arrays")
		}
		out := make(map[string][]PrivateValue, len(h))
		for k, values := range h {
			for _, x := range values {
				out[k] = append(out[k], privateOf([]byte(x)))
			}
		}
		obj["headers"], _ = json.Marshal(out)
	}
	return marshalSorted(obj)
}

// marshalSorted encodes obj with its members in sorted order (as
// encoding/json writes maps) without escaping HTML characters.
func marshalSorted(obj map[string]json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
