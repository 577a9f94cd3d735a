package siteprotocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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

// Canonical returns the RFC 8785 (JCS) canonical form of a JSON text that
// passed checkJSON, through jsontext's canonicalisation
// (github.com/go-json-experiment/json, the encoding/json/v2 of Go 1.27).
// RFC 8785 holds every number as an IEEE 754 double. Two kinds of number
// are refused with a *DecodeError naming the member (wrapping
// ErrMalformed), so that every canonical form the server stores and serves
// is one the Runtime accepts in turn:
//   - a number beyond the range of doubles (jsontext would clamp it to
//     the largest double);
//   - a number whose canonical form is a whole number written without an
//     exponent (every whole number below 1e21) beyond ±MaxExactInteger,
//     the integers I-JSON allows (RFC 7493 section 2.2): as written or as
//     9007199254740992.0 or 9e20, whether or not a double rounded it
//     (9223372036854775807 would be served as 9223372036854776000).
//
// Other numbers are written in their shortest double form, as RFC 8785
// says (0.10 as 0.1, -0 as 0).
func Canonical(raw []byte) ([]byte, error) {
	v := jsontext.Value(bytes.Clone(raw)) // Canonicalize rewrites in place
	if err := v.Canonicalize(); err != nil {
		return nil, &DecodeError{Message: "is not a JSON text that can be canonicalised"}
	}
	// A clamped number is written ±1.7976931348623157e+308, and a whole
	// number beyond ±MaxExactInteger below 1e21 as a run of at least 16
	// digits: only a canonical form holding either is searched.
	if bytes.Contains(v, []byte("e+308")) {
		if err := outOfRange(raw); err != nil {
			return nil, err
		}
	}
	if digitRun(v, 16) {
		if err := inexactInteger(v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// MaxExactInteger is the largest magnitude of a whole number in a command
// or result: 2⁵³−1, the range of integers I-JSON allows (RFC 7493 section
// 2.2), which a double holds exactly.
const MaxExactInteger = 1<<53 - 1

// integerRange states the range of whole numbers (±MaxExactInteger), for
// error messages.
const integerRange = "from -9007199254740991 to 9007199254740991 (±(2^53-1), the integers I-JSON allows, RFC 7493 section 2.2, which the protocol's RFC 8785 canonical form holds exactly)"

// digitRun reports whether b holds n decimal digits in a row.
func digitRun(b []byte, n int) bool {
	run := 0
	for _, c := range b {
		if '0' <= c && c <= '9' {
			if run++; run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// numbers calls f with each number of the JSON text raw and its pointer
// until f returns an error, which it returns.
func numbers(raw []byte, f func(num string, at jsontext.Pointer) error) error {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if tok.Kind() == '0' {
			if err := f(tok.String(), dec.StackPointer()); err != nil {
				return err
			}
		}
	}
}

// outOfRange returns a *DecodeError for the first number of raw beyond the
// range of doubles, or nil.
func outOfRange(raw []byte) error {
	return numbers(raw, func(num string, at jsontext.Pointer) error {
		if f, err := strconv.ParseFloat(num, 64); errors.Is(err, strconv.ErrRange) && f != 0 {
			return &DecodeError{Field: locate("", raw, at), Message: "holds a number outside the range of IEEE 754 double precision, which RFC 8785 canonical JSON requires"}
		}
		return nil
	})
}

// inexactInteger returns a *DecodeError for the first whole number of the
// canonical text canonical beyond ±MaxExactInteger, or nil.
func inexactInteger(canonical []byte) error {
	return numbers(canonical, func(num string, at jsontext.Pointer) error {
		if strings.ContainsAny(num, ".eE") {
			return nil
		}
		if n, err := strconv.ParseInt(num, 10, 64); err != nil || n > MaxExactInteger || n < -MaxExactInteger {
			return &DecodeError{Field: locate("", canonical, at), Message: "must be a whole number " + integerRange + ", or not a whole number"}
		}
		return nil
	})
}

// canonicalWithout returns the JCS form of the JSON object raw without the
// named top-level members. raw must have passed checkJSON (so it is one
// object or another single value, with no member named twice).
func canonicalWithout(raw []byte, drop ...string) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("%w: want a JSON object", ErrMalformed)
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		keep := !slices.Contains(drop, name.String())
		if keep {
			if len(out) > 1 {
				out = append(out, ',')
			}
			if out, err = jsontext.AppendQuote(out, name.String()); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			out = append(out, ':')
		}
		value, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if keep {
			out = append(out, value...)
		}
	}
	out = append(out, '}')
	return Canonical(out)
}

// CommandDigest returns the digest of a command object (SHA-256 of the JCS
// form of every member except "sequence" and "digest";
// docs/site-protocol.md#the-digest-rule) and that canonical form. raw must pass the strict JSON rules (checkJSON: valid UTF-8, no
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
// form of every member except "digest" (docs/site-protocol.md#the-digest-rule). raw must pass the strict JSON
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
// server stores) and the digest. The payload rules are a Kubernetes
// environment's (ParseAppendFor for another backend).
func ParseAppend(raw []byte) (Command, []byte, error) {
	return ParseAppendFor(raw, BackendKubernetes)
}

// ParseAppendFor is ParseAppend at an environment of backend b: a
// bind-member is held to b's rules (ValidateFor).
func ParseAppendFor(raw []byte, b Backend) (Command, []byte, error) {
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
	// The canonical form, stored and served, must fit the limit too:
	// canonicalisation can lengthen numbers (1e15 becomes
	// 1000000000000000).
	if len(canonical) > MaxCommandBytes {
		return Command{}, nil, fmt.Errorf("%w: command is %d bytes in canonical form, the limit is %d", ErrTooLarge, len(canonical), MaxCommandBytes)
	}
	if c.Digest != "" && c.Digest != digest {
		return Command{}, nil, fmt.Errorf("%w: digest %s given, content digests to %s", ErrDigestMismatch, c.Digest, digest)
	}
	c.Digest = digest
	if err := ValidateFor(c, b); err != nil {
		return Command{}, nil, err
	}
	return c, canonical, nil
}

// EncodeStored returns a stored command as the server serves it: the JCS
// form of its canonical object with "sequence" and "digest" added.
func EncodeStored(canonical []byte, sequence int64, digest string) ([]byte, error) {
	if len(canonical) < 2 || canonical[0] != '{' {
		return nil, fmt.Errorf("%w: stored command is not a JSON object", ErrMalformed)
	}
	return withMembers(canonical, `"digest":`+strconv.Quote(digest)+`,"sequence":`+strconv.FormatInt(sequence, 10))
}

// withMembers returns the JCS form of the canonical object obj with the
// members of the JSON text fragment members (`"name":value,...`, names not
// already in obj) added.
func withMembers(obj []byte, members string) ([]byte, error) {
	out := make([]byte, 0, len(obj)+len(members)+1)
	out = append(out, '{')
	out = append(out, members...)
	if rest := obj[1:]; !bytes.Equal(bytes.TrimSpace(rest), []byte("}")) {
		out = append(out, ',')
		out = append(out, rest...)
	} else {
		out = append(out, '}')
	}
	v := jsontext.Value(out)
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return v, nil
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
	out, err := withMembers(canonical, `"digest":`+strconv.Quote(r.Digest))
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

// strictUnmarshal decodes raw into v (unknown members refused, member
// names matched exactly, one value and nothing after it) with
// encoding/json/v2 (github.com/go-json-experiment/json); prefix is
// prepended to the dotted path of a failing member (e.g. "payload."). Its
// errors are *DecodeError.
func strictUnmarshal(raw []byte, v any) error { return strictUnmarshalAt(raw, v, "") }

func strictUnmarshalAt(raw []byte, v any, prefix string) error {
	if err := jsonv2.Unmarshal(raw, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return plainDecodeError(err, raw, prefix, reflect.TypeOf(v))
	}
	return nil
}

// plainDecodeError turns the decoder's error into a *DecodeError naming
// the member and the rule, without Go type names or library text.
func plainDecodeError(err error, raw []byte, prefix string, root reflect.Type) *DecodeError {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		var syn *jsontext.SyntacticError
		if errors.As(err, &syn) && syn.JSONPointer != "" {
			return &DecodeError{Field: locate(prefix, raw, syn.JSONPointer), Message: "does not have the expected shape"}
		}
		return &DecodeError{Field: strings.TrimSuffix(prefix, "."), Message: "does not have the expected shape"}
	}
	field := locate(prefix, raw, se.JSONPointer)
	if errors.Is(se.Err, jsonv2.ErrUnknownName) {
		return &DecodeError{Field: locate(prefix, raw, se.JSONPointer.Parent()), Message: fmt.Sprintf("unknown member %q: the protocol defines no such member", bounded(se.JSONPointer.LastToken(), 64))}
	}
	if se.GoType == nil {
		return &DecodeError{Field: field, Message: "does not have the expected shape"}
	}
	want := jsonKind(se.GoType)
	if se.JSONKind == '0' && want == "an integer" {
		return &DecodeError{Field: field, Message: integerMessage(se.JSONValue, se.GoType, memberTag(root, se.JSONPointer))}
	}
	return &DecodeError{Field: field, Message: "must be " + want + ", not " + jsonKindName(se.JSONKind)}
}

// integerMessage states the rule a number broke that does not decode into
// the integer type t: the member's range (its minimum and maximum tags, as
// the OpenAPI document states them, else t's range within
// ±MaxExactInteger) and, for a number written with a fraction or an
// exponent (8080.5, 1e3), that an integer is written in digits only.
func integerMessage(number []byte, t reflect.Type, tag reflect.StructTag) string {
	lo, hi := int64(-MaxExactInteger), int64(MaxExactInteger)
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32:
		lo, hi = -1<<(t.Bits()-1), 1<<(t.Bits()-1)-1
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		lo = 0
		if t.Bits() < 53 {
			hi = 1<<t.Bits() - 1
		}
	}
	if v, err := strconv.ParseInt(tag.Get("minimum"), 10, 64); err == nil && v > lo {
		lo = v
	}
	if v, err := strconv.ParseInt(tag.Get("maximum"), 10, 64); err == nil && v < hi {
		hi = v
	}
	rng := fmt.Sprintf("from %d to %d", lo, hi)
	if lo == -MaxExactInteger && hi == MaxExactInteger {
		rng = integerRange
	}
	if bytes.ContainsAny(number, ".eE") {
		return "must be an integer written in digits, without a fraction or an exponent, " + rng
	}
	return "must be an integer " + rng
}

// memberTag returns the struct tag of the member the RFC 6901 JSON
// Pointer p names below a value of type root ("" when p names no struct
// member, e.g. a map's value).
func memberTag(root reflect.Type, p jsontext.Pointer) reflect.StructTag {
	t, tag := root, reflect.StructTag("")
	for step := range p.Tokens() {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := memberField(t, step)
			if !ok {
				return ""
			}
			t, tag = f.Type, f.Tag
		case reflect.Map, reflect.Slice, reflect.Array:
			t, tag = t.Elem(), ""
		default:
			return ""
		}
	}
	return tag
}

// memberField returns the field of struct type t whose JSON name is name.
func memberField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		json, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if json == name || (json == "" && f.Name == name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// locate renders the RFC 6901 JSON Pointer p into the JSON text raw below
// prefix in the dotted notation of the protocol's errors:
// "/account_ref/generation" is "account_ref.generation", "/argv/2" is
// "argv[2]". Whether a step is an array index or a member name (which can
// be "2" too) is read from raw; past where raw can be followed, steps are
// written as member names.
func locate(prefix string, raw []byte, p jsontext.Pointer) string {
	out := strings.TrimSuffix(prefix, ".")
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	follow := true
	for step := range p.Tokens() {
		if follow {
			follow = descend(dec, step)
			if follow && dec.StackDepth() > 0 {
				if kind, _ := dec.StackIndex(dec.StackDepth()); kind == '[' {
					out += "[" + step + "]"
					continue
				}
			}
		}
		if out != "" {
			out += "."
		}
		out += step
	}
	return out
}

// descend moves dec, positioned before a value, to the start of that
// value's member or element step; it reports whether it could.
func descend(dec *jsontext.Decoder, step string) bool {
	tok, err := dec.ReadToken()
	if err != nil {
		return false
	}
	switch tok.Kind() {
	case '[':
		n, err := strconv.Atoi(step)
		if err != nil || n < 0 {
			return false
		}
		for range n {
			if dec.PeekKind() == ']' || dec.SkipValue() != nil {
				return false
			}
		}
		return dec.PeekKind() != ']'
	case '{':
		for dec.PeekKind() == '"' {
			name, err := dec.ReadToken()
			if err != nil {
				return false
			}
			if name.String() == step {
				return true
			}
			if dec.SkipValue() != nil {
				return false
			}
		}
	}
	return false
}

// jsonKindName names a JSON value's kind (the value itself is not echoed).
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "true or false"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "this value"
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
