package siteprotocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gowebpki/jcs"
)

// Errors returned by the codec. Each returned error wraps one of these.
var (
	// ErrMalformed: not a JSON object of the expected shape (syntax, unknown
	// field, null value, wrong type).
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
		return nil, fmt.Errorf("%w: canonical json: %v", ErrMalformed, err)
	}
	return out, nil
}

// canonicalWithout returns the JCS form of the JSON object raw without the
// named top-level members.
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
// form.
func CommandDigest(raw []byte) (digest string, canonical []byte, err error) {
	canonical, err = canonicalWithout(raw, "sequence", "digest")
	if err != nil {
		return "", nil, err
	}
	return Digest(canonical), canonical, nil
}

// ResultDigest returns the digest of a result object: SHA-256 of the JCS
// form of every member except "digest".
func ResultDigest(raw []byte) (string, error) {
	canonical, err := canonicalWithout(raw, "digest")
	if err != nil {
		return "", err
	}
	return Digest(canonical), nil
}

// ParseAppend reads a command as Execution appends it: at most
// MaxCommandBytes, no null anywhere, no unknown member, no "sequence"; a
// "digest", if present, must equal the computed one. It validates the
// envelope and, for known operations, the payload. It returns the decoded
// command with Digest set, the canonical form the digest covers (what the
// server stores) and the digest.
func ParseAppend(raw []byte) (Command, []byte, error) {
	if len(raw) > MaxCommandBytes {
		return Command{}, nil, fmt.Errorf("%w: command is %d bytes, the limit is %d", ErrTooLarge, len(raw), MaxCommandBytes)
	}
	c, err := decodeCommand(raw)
	if err != nil {
		return Command{}, nil, err
	}
	if c.Sequence != 0 {
		return Command{}, nil, invalid(FieldError{Field: "sequence", Message: "is assigned by the server; omit it"})
	}
	digest, canonical, err := CommandDigest(raw)
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

// ParsePulled reads a command as the Runtime pulls it: it must carry a
// positive sequence and a digest that matches its content (ErrDigestMismatch
// otherwise), and its envelope must be valid. The payload of a known
// operation is NOT validated here: an invalid payload is answered with a
// refused result (ValidatePayload), not by stopping.
func ParsePulled(raw []byte) (Command, error) {
	c, err := decodeCommand(raw)
	if err != nil {
		return Command{}, err
	}
	if c.Sequence < 1 {
		return Command{}, invalid(FieldError{Field: "sequence", Message: "must be a positive integer"})
	}
	digest, _, err := CommandDigest(raw)
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

func decodeCommand(raw []byte) (Command, error) {
	if err := rejectNulls(raw); err != nil {
		return Command{}, err
	}
	var c Command
	if err := strictUnmarshal(raw, &c); err != nil {
		return Command{}, err
	}
	return c, nil
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

// ParseResult reads a result as the server receives it: strict shape, a
// digest matching its content (ErrDigestMismatch otherwise) and valid
// fields.
func ParseResult(raw []byte) (Result, error) {
	if err := rejectNulls(raw); err != nil {
		return Result{}, err
	}
	var r Result
	if err := strictUnmarshal(raw, &r); err != nil {
		return Result{}, err
	}
	digest, err := ResultDigest(raw)
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

// DecodePayload decodes cmd's payload strictly (unknown members and nulls
// are ErrMalformed); an absent payload decodes as the zero value.
func DecodePayload[T any](cmd Command) (T, error) {
	var v T
	if len(cmd.Payload) == 0 {
		return v, nil
	}
	if err := rejectNulls(cmd.Payload); err != nil {
		return v, err
	}
	if err := strictUnmarshal(cmd.Payload, &v); err != nil {
		return v, fmt.Errorf("payload: %w", err)
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

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after the JSON value", ErrMalformed)
	}
	return nil
}

// rejectNulls fails on a JSON null anywhere in raw: optional members are
// absent, never null (site-protocol.md, "Encoding rules").
func rejectNulls(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if tok == nil {
			return fmt.Errorf("%w: null is not allowed; leave optional members out", ErrMalformed)
		}
	}
}
