package siteprotocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Errors returned by the codec. Each returned error wraps one of these.
var (
	// ErrMalformed: not a JSON object of the expected shape (syntax, not
	// valid UTF-8, an escaped lone surrogate, a duplicate member name, an
	// unknown field, a null value, a wrong type).
	ErrMalformed = errors.New("malformed")
	// ErrInvalid: well-formed but breaks a rule (see *ValidationError).
	ErrInvalid = errors.New("invalid")
	// ErrDigestMismatch: the digest carried does not match the content.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrTooLarge: the encoded command exceeds MaxCommandBytes.
	ErrTooLarge = errors.New("too large")
)

// Digest returns the lower-case hex SHA-256 of b.
func Digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Canonical returns the RFC 8785 (JCS) canonical form of a JSON text.
func Canonical(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		// The text passed the strict checks, so the one way left to fail is
		// a number JCS cannot represent; the library's text (strconv's)
		// is not shown.
		return nil, &DecodeError{Message: "holds a number outside the range of IEEE 754 double precision, which RFC 8785 canonical JSON requires"}
	}
	return out, nil
}

// canonicalWithout returns the JCS form of the JSON object raw without the
// named top-level members. raw must have passed checkJSON (a duplicate
// top-level name would otherwise be dropped silently here).
func canonicalWithout(raw []byte, drop ...string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := strictUnmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("%w: want a JSON object", ErrMalformed)
	}
	for _, d := range drop {
		delete(obj, d)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return Canonical(b)
}

// CommandDigest returns the digest of a command object (SHA-256 of the JCS
// form of every member except "sequence" and "digest") and that canonical
// form. raw must pass the strict JSON rules (checkJSON: valid UTF-8, no
// duplicate member name, no null); otherwise the error wraps ErrMalformed.
func CommandDigest(raw []byte) (digest string, canonical []byte, err error) {
	if _, err := checkJSON(raw); err != nil {
		return "", nil, err
	}
	return commandDigest(raw)
}

// commandDigest is CommandDigest of a command that passed checkJSON.
func commandDigest(raw []byte) (string, []byte, error) {
	canonical, err := canonicalWithout(raw, "sequence", "digest")
	if err != nil {
		return "", nil, err
	}
	return Digest(canonical), canonical, nil
}

// ResultDigest returns the digest of a result object: SHA-256 of the JCS
// form of every member except "digest". raw must pass the strict JSON
// rules (checkJSON); otherwise the error wraps ErrMalformed.
func ResultDigest(raw []byte) (string, error) {
	if _, err := checkJSON(raw); err != nil {
		return "", err
	}
	return resultDigest(raw)
}

// resultDigest is ResultDigest of a result that passed checkJSON.
func resultDigest(raw []byte) (string, error) {
	canonical, err := canonicalWithout(raw, "digest")
	if err != nil {
		return "", err
	}
	return Digest(canonical), nil
}

// ParseAppend reads a command as Execution appends it: at most
// MaxCommandBytes, valid UTF-8, no null anywhere, no member name twice in
// one object at any depth, no unknown member (all ErrMalformed), no
// "sequence" member at all, whatever its value (ErrInvalid: the server
// assigns it); a "digest", if present, must equal the computed one
// (ErrDigestMismatch). It validates the
// envelope and, for known operations, the payload. It returns the decoded
// command with Digest set, the canonical form the digest covers (what the
// server stores) and the digest.
func ParseAppend(raw []byte) (Command, []byte, error) {
	if len(raw) > MaxCommandBytes {
		return Command{}, nil, fmt.Errorf("%w: command is %d bytes, the limit is %d", ErrTooLarge, len(raw), MaxCommandBytes)
	}
	c, members, err := decodeCommand(raw)
	if err != nil {
		return Command{}, nil, err
	}
	if members["sequence"] {
		return Command{}, nil, invalid(FieldError{Field: "sequence", Message: "is assigned by the server; leave it out"})
	}
	digest, canonical, err := commandDigest(raw)
	if err != nil {
		return Command{}, nil, err
	}
	if c.Digest != "" && c.Digest != digest {
		return Command{}, nil, fmt.Errorf("%w: digest %s given, content digests to %s", ErrDigestMismatch, c.Digest, digest)
	}
	c.Digest = digest
	if err := Validate(c); err != nil {
		return Command{}, nil, err
	}
	return c, canonical, nil
}

// EncodeStored returns a stored command as the server serves it: the JCS
// form of its canonical object with "sequence" and "digest" added.
func EncodeStored(canonical []byte, sequence int64, digest string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &obj); err != nil {
		return nil, fmt.Errorf("%w: stored command: %v", ErrMalformed, err)
	}
	obj["sequence"] = json.RawMessage(fmt.Sprintf("%d", sequence))
	d, _ := json.Marshal(digest)
	obj["digest"] = d
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode stored command: %w", err)
	}
	return Canonical(b)
}

// ParsePulled reads a command as the Runtime pulls it: it must pass the
// same strict JSON rules as an append (valid UTF-8, no null, no duplicate
// member name, no unknown member: ErrMalformed otherwise), carry a positive
// sequence and a digest that matches its content (ErrDigestMismatch
// otherwise), and its envelope must be valid. The payload of a known
// operation is NOT validated here: an invalid payload is answered with a
// refused result (ValidatePayload), not by stopping.
func ParsePulled(raw []byte) (Command, error) {
	c, _, err := decodeCommand(raw)
	if err != nil {
		return Command{}, err
	}
	if c.Sequence < 1 {
		return Command{}, invalid(FieldError{Field: "sequence", Message: "must be a positive integer"})
	}
	digest, _, err := commandDigest(raw)
	if err != nil {
		return Command{}, err
	}
	if c.Digest != digest {
		return Command{}, fmt.Errorf("%w: command %d carries digest %q, content digests to %s", ErrDigestMismatch, c.Sequence, c.Digest, digest)
	}
	if err := ValidateEnvelope(c); err != nil {
		return Command{}, err
	}
	return c, nil
}

// decodeCommand checks raw with checkJSON and decodes it strictly; it
// also returns the command's top-level member names.
func decodeCommand(raw []byte) (Command, map[string]bool, error) {
	members, err := checkJSON(raw)
	if err != nil {
		return Command{}, nil, err
	}
	var c Command
	if err := strictUnmarshal(raw, &c); err != nil {
		return Command{}, nil, err
	}
	return c, members, nil
}

// EncodeResult fills r.Digest and returns the exact bytes to send and save:
// the JCS form of the result with its digest. Detail must be a JSON object
// (or absent).
func EncodeResult(r Result) (Result, []byte, error) {
	r.Digest = ""
	if err := ValidateResult(r); err != nil {
		return Result{}, nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return Result{}, nil, fmt.Errorf("encode result: %w", err)
	}
	canonical, err := Canonical(b)
	if err != nil {
		return Result{}, nil, err
	}
	r.Digest = Digest(canonical)
	b, err = json.Marshal(r)
	if err != nil {
		return Result{}, nil, fmt.Errorf("encode result: %w", err)
	}
	out, err := Canonical(b)
	if err != nil {
		return Result{}, nil, err
	}
	return r, out, nil
}

// NewResult builds and encodes a result for cmd with detail (any value that
// encodes as a JSON object; nil for none).
func NewResult(cmd Command, outcome Outcome, reason Reason, message string, detail any, refs []NativeRef) (Result, []byte, error) {
	r := Result{
		CommandID:     cmd.ID,
		CommandDigest: cmd.Digest,
		Sequence:      cmd.Sequence,
		Outcome:       outcome,
		Reason:        reason,
		Message:       message,
		NativeRefs:    refs,
	}
	if detail != nil {
		d, err := json.Marshal(detail)
		if err != nil {
			return Result{}, nil, fmt.Errorf("encode result detail: %w", err)
		}
		r.Detail = d
	}
	return EncodeResult(r)
}

// ParseResult reads a result as the server receives it: the strict JSON
// rules (valid UTF-8, no null, no duplicate member name at any depth, no
// unknown member: ErrMalformed otherwise), a digest matching its content
// (ErrDigestMismatch otherwise) and valid fields (ErrInvalid).
func ParseResult(raw []byte) (Result, error) {
	if _, err := checkJSON(raw); err != nil {
		return Result{}, err
	}
	var r Result
	if err := strictUnmarshal(raw, &r); err != nil {
		return Result{}, err
	}
	digest, err := resultDigest(raw)
	if err != nil {
		return Result{}, err
	}
	if r.Digest != digest {
		return Result{}, fmt.Errorf("%w: result carries digest %q, content digests to %s", ErrDigestMismatch, r.Digest, digest)
	}
	if err := ValidateResult(r); err != nil {
		return Result{}, err
	}
	return r, nil
}

// DecodePayload decodes cmd's payload strictly (unknown members, nulls,
// duplicate member names and invalid UTF-8 are ErrMalformed); an absent
// payload decodes as the zero value.
func DecodePayload[T any](cmd Command) (T, error) {
	var v T
	if len(cmd.Payload) == 0 {
		return v, nil
	}
	if _, err := checkJSON(cmd.Payload); err != nil {
		return v, err
	}
	if err := strictUnmarshalAt(cmd.Payload, &v, "payload."); err != nil {
		return v, err
	}
	return v, nil
}

// DecodeDetail decodes a result's detail into T (not strict: details may
// grow members).
func DecodeDetail[T any](r Result) (T, error) {
	var v T
	if len(r.Detail) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(r.Detail, &v); err != nil {
		return v, fmt.Errorf("%w: detail: %v", ErrMalformed, err)
	}
	return v, nil
}

// DecodeError is a strict JSON text that does not have the protocol's
// shape: a member of the wrong JSON type, a number out of range, an
// unknown member. Field is the member's dotted path ("account_ref.generation",
// "payload.tail_bytes"; "" for the whole text) and Message states the rule
// in plain words, without Go type names or library text. It wraps
// ErrMalformed.
type DecodeError struct {
	Field   string
	Message string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "malformed: " + e.Message
	}
	return "malformed: " + e.Field + ": " + e.Message
}

// Unwrap returns ErrMalformed.
func (e *DecodeError) Unwrap() error { return ErrMalformed }

// strictUnmarshal decodes raw into v (unknown members refused, numbers kept
// exact); prefix is prepended to the dotted path of a failing member (e.g.
// "payload."). Its errors are *DecodeError.
func strictUnmarshal(raw []byte, v any) error { return strictUnmarshalAt(raw, v, "") }

func strictUnmarshalAt(raw []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return plainDecodeError(err, prefix)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &DecodeError{Message: "trailing data after the JSON value"}
	}
	return nil
}

// plainDecodeError turns encoding/json's error into a *DecodeError naming
// the member and the rule.
func plainDecodeError(err error, prefix string) *DecodeError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := strings.TrimSuffix(prefix, ".")
		if te.Field != "" {
			field = prefix + te.Field
		}
		want := jsonKind(te.Type)
		if strings.HasPrefix(te.Value, "number") && want == "an integer" {
			return &DecodeError{Field: field, Message: fmt.Sprintf("must be an integer from %d to %d", math.MinInt64, math.MaxInt64)}
		}
		return &DecodeError{Field: field, Message: "must be " + want + ", not " + jsonValueKind(te.Value)}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return &DecodeError{Field: strings.TrimSuffix(prefix, "."), Message: fmt.Sprintf("unknown member %q: the protocol defines no such member", bounded(name, 64))}
	}
	return &DecodeError{Field: strings.TrimSuffix(prefix, "."), Message: "does not have the expected shape"}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// jsonValueKind names the JSON value encoding/json found ("number 1e400"
// is "a number": the value itself is not echoed).
func jsonValueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "object", "array", "number", "string":
		if kind == "object" || kind == "array" {
			return "an " + kind
		}
		return "a " + kind
	case "bool":
		return "true or false"
	}
	return "this value"
}

// bounded returns s cut to at most n bytes (at a rune boundary), marked
// with "…" when cut: echoed values stay short.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
