package siteprotocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const startCmd = `{
  "id": "3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e", "operation": "start",
  "issued_at": "2026-11-29T10:00:00.123Z",
  "run_id": "5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10", "attempt_id": "7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
  "member_id": "9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80", "project_id": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
  "account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1}, "family": "batch",
  "payload": {"demand": {"cpu": 2000, "memory": 4294967296}, "time_limit_seconds": 3600,
              "argv": ["python", "train.py"], "env": {"EPOCHS": "3"}}
}`

func TestCommandDigestIsJCSOfEveryFieldButSequenceAndDigest(t *testing.T) {
	// Hand-derived canonical form: members sorted by UTF-16 code units, no
	// whitespace, numbers in shortest form.
	raw := `{"sequence": 9, "operation":"observe","id":"x","digest":"abc","issued_at":"2026-01-01T00:00:00Z","n":1.0E2}`
	d, canonical, err := CommandDigest([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"x","issued_at":"2026-01-01T00:00:00Z","n":100,"operation":"observe"}`
	if string(canonical) != want {
		t.Fatalf("canonical = %s, want %s", canonical, want)
	}
	if d != Digest([]byte(want)) {
		t.Fatal("digest is not SHA-256 of the canonical form")
	}
}

func TestReorderedAndReformattedCommandHasTheSameDigest(t *testing.T) {
	c1, _, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(startCmd), &m); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(m) // keys sorted, whitespace gone
	c2, _, err := ParseAppend(compact)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Digest != c2.Digest {
		t.Fatalf("digests differ: %s vs %s", c1.Digest, c2.Digest)
	}
	changed := strings.Replace(startCmd, "10:00:00.123Z", "10:00:00.124Z", 1)
	c3, _, err := ParseAppend([]byte(changed))
	if err != nil {
		t.Fatal(err)
	}
	if c3.Digest == c1.Digest {
		t.Fatal("a changed issued_at must change the digest")
	}
}

func TestStoredCommandRoundTripsToThePuller(t *testing.T) {
	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	served, err := EncodeStored(canonical, 7, c.Digest)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := ParsePulled(served)
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Sequence != 7 || pulled.Digest != c.Digest || pulled.ID != c.ID {
		t.Fatalf("pulled %+v", pulled)
	}
	tampered := strings.Replace(string(served), `"python"`, `"python3"`, 1)
	if _, err := ParsePulled([]byte(tampered)); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("tampered command: want ErrDigestMismatch, got %v", err)
	}
}

func TestNullsUnknownMembersAndBadPayloadsAreRefused(t *testing.T) {
	cases := map[string]struct {
		raw  string
		want error
	}{
		"null member":        {strings.Replace(startCmd, `"family": "batch"`, `"family": null`, 1), ErrMalformed},
		"unknown member":     {strings.Replace(startCmd, `"family": "batch"`, `"family": "batch", "colour": "red"`, 1), ErrMalformed},
		"unknown payload":    {strings.Replace(startCmd, `"argv"`, `"image": "x", "argv"`, 1), ErrInvalid},
		"bad demand key":     {strings.Replace(startCmd, `"cpu": 2000`, `"cpu": 2000, "cores": 2`, 1), ErrInvalid},
		"local time":         {strings.Replace(startCmd, `10:00:00.123Z`, `10:00:00.123+01:00`, 1), ErrInvalid},
		"sequence given":     {strings.Replace(startCmd, `"id"`, `"sequence": 3, "id"`, 1), ErrInvalid},
		"wrong digest given": {strings.Replace(startCmd, `"id"`, `"digest": "`+strings.Repeat("0", 64)+`", "id"`, 1), ErrDigestMismatch},
		"missing account":    {strings.Replace(startCmd, `"account_ref": {"binding_id": "e41f0000-0000-4000-8000-000000000001", "generation": 1},`, ``, 1), ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ParseAppend([]byte(tc.raw)); !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
	big := strings.Replace(startCmd, `"EPOCHS": "3"`, `"BIG": "`+strings.Repeat("x", MaxCommandBytes)+`"`, 1)
	if _, _, err := ParseAppend([]byte(big)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
}

func TestUnknownOperationIsAValidEnvelope(t *testing.T) {
	raw := `{"id":"3e8d2b10-5f6a-4c7b-9d8e-1f2a3b4c5d6e","operation":"teleport","issued_at":"2026-11-29T10:00:00Z","payload":{"anything":1}}`
	if _, _, err := ParseAppend([]byte(raw)); err != nil {
		t.Fatalf("unknown operations are relayed for the Runtime to refuse: %v", err)
	}
}

func TestResultBytesAreCanonicalAndVerifiable(t *testing.T) {
	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	served, _ := EncodeStored(canonical, 7, c.Digest)
	pulled, _ := ParsePulled(served)
	r, b, err := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued},
		[]NativeRef{{Kind: "Job", Namespace: "project-x", Name: "attempt-y", UID: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	again, b2, _ := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued},
		[]NativeRef{{Kind: "Job", Namespace: "project-x", Name: "attempt-y", UID: "u"}})
	if string(b) != string(b2) || r.Digest != again.Digest {
		t.Fatal("the same result must encode to the same bytes")
	}
	parsed, err := ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Digest != r.Digest || parsed.Sequence != 7 {
		t.Fatalf("parsed %+v", parsed)
	}
	if _, err := ParseResult([]byte(strings.Replace(string(b), "Job created", "Job made", 1))); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("altered result: want ErrDigestMismatch, got %v", err)
	}
	if _, _, err := NewResult(pulled, OutcomeSucceeded, Reason("made-up"), "", nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reason outside the vocabulary: want ErrInvalid, got %v", err)
	}
}

func TestSafeRelativePath(t *testing.T) {
	name := strings.Repeat("n", MaxFileNameBytes)
	long := strings.Repeat(name+"/", MaxFilePathBytes/(MaxFileNameBytes+1)) // 4096 bytes with the last slash
	for p, ok := range map[string]bool{"out/a.txt": true, "a": true, "../a": false, "/etc/passwd": false, "a/../../b": false, "": false, "./a": false, "a//b": false,
		"a b/ünï.txt": true, name: true, name + "n": false, long[:len(long)-1]: true, long + "x": false, strings.Repeat("q/", 100000) + "f": false,
		"a\nb": false, "a\x00b": false, "a\x7fb": false, "a\u202eb": false, "a\tb": false, "a\xffb": false} {
		if SafeRelativePath(p) != ok {
			t.Errorf("SafeRelativePath(%q) != %v", p, ok)
		}
	}
}

func TestCommandsAndResultsMustBeValidUTF8(t *testing.T) {
	badBytes := strings.Replace(startCmd, `"EPOCHS": "3"`, "\"EPOCHS\": \"3\xff\xfe\"", 1)
	if _, _, err := ParseAppend([]byte(badBytes)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("append with raw bytes \\xff\\xfe: want ErrMalformed, got %v", err)
	}
	loneSurrogate := strings.Replace(startCmd, `"EPOCHS": "3"`, `"EPOCHS": "3\ud800"`, 1)
	if _, _, err := ParseAppend([]byte(loneSurrogate)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("append with an escaped lone surrogate: want ErrMalformed, got %v", err)
	}
	pair := strings.Replace(startCmd, `"EPOCHS": "3"`, `"EPOCHS": "3\ud83d\ude00 \\ud800"`, 1)
	if _, _, err := ParseAppend([]byte(pair)); err != nil {
		t.Fatalf("a surrogate pair and an escaped backslash before \"ud800\" are valid: %v", err)
	}

	c, canonical, err := ParseAppend([]byte(startCmd))
	if err != nil {
		t.Fatal(err)
	}
	served, _ := EncodeStored(canonical, 7, c.Digest)
	broken := []byte(strings.Replace(string(served), `"EPOCHS":"3"`, "\"EPOCHS\":\"3\xff\"", 1))
	if _, err := ParsePulled(broken); !errors.Is(err, ErrMalformed) {
		t.Fatalf("pulled with raw byte \\xff: want ErrMalformed, got %v", err)
	}

	pulled, _ := ParsePulled(served)
	r, _, err := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Message = "Job created \xff"
	raw, _ := json.Marshal(r) // encoding/json would turn \xff into U+FFFD; put the raw byte back
	raw = []byte(strings.Replace(string(raw), `\ufffd`, "\xff", 1))
	if _, err := ParseResult(raw); !errors.Is(err, ErrMalformed) {
		t.Fatalf("result with raw byte \\xff: want ErrMalformed, got %v", err)
	}
}

func TestDuplicateMemberNamesAreRefusedAtEveryLevel(t *testing.T) {
	cases := map[string]string{
		"top level":               strings.Replace(startCmd, `"family": "batch"`, `"family": "batch", "family": "inference"`, 1),
		"top level, escaped name": strings.Replace(startCmd, `"family": "batch"`, `"family": "batch", "f\u0061mily": "batch"`, 1),
		"account_ref":             strings.Replace(startCmd, `"generation": 1}`, `"generation": 1, "generation": 2}`, 1),
		"payload":                 strings.Replace(startCmd, `"time_limit_seconds": 3600`, `"time_limit_seconds": 3600, "time_limit_seconds": 60`, 1),
		"payload, deep":           strings.Replace(startCmd, `"cpu": 2000`, `"cpu": 2000, "cpu": 1`, 1),
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ParseAppend([]byte(raw)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "twice") {
				t.Fatalf("append: want ErrMalformed naming the duplicate, got %v", err)
			}
			if _, _, err := CommandDigest([]byte(raw)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("digest: want ErrMalformed, got %v", err)
			}
		})
	}
	// The same name in sibling objects, or in an object and its parent, is
	// not a duplicate.
	siblings := strings.Replace(startCmd, `"env": {"EPOCHS": "3"}`, `"env": {"EPOCHS": "3", "env": "x", "demand": "y"}`, 1)
	if _, _, err := ParseAppend([]byte(siblings)); err != nil {
		t.Fatalf("names repeated across objects are legal: %v", err)
	}

	c, canonical, _ := ParseAppend([]byte(startCmd))
	served, _ := EncodeStored(canonical, 7, c.Digest)
	dup := []byte(strings.Replace(string(served), `"family":"batch"`, `"family":"batch","family":"batch"`, 1))
	if _, err := ParsePulled(dup); !errors.Is(err, ErrMalformed) {
		t.Fatalf("pulled with a duplicate member: want ErrMalformed, got %v", err)
	}
	pulled, _ := ParsePulled(served)
	_, result, _ := NewResult(pulled, OutcomeSucceeded, ReasonCreated, "Job created", StateDetail{State: StateQueued}, nil)
	for name, raw := range map[string]string{
		"top level": strings.Replace(string(result), `"outcome":"succeeded"`, `"outcome":"failed","outcome":"succeeded"`, 1),
		"detail":    strings.Replace(string(result), `"state":"queued"`, `"state":"failed","state":"queued"`, 1),
	} {
		if _, err := ParseResult([]byte(raw)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("result with a duplicate member (%s): want ErrMalformed, got %v", name, err)
		}
	}
}

func TestAnAppendMustNotCarryASequenceEvenZero(t *testing.T) {
	for _, seq := range []string{"0", "4", "-1"} {
		raw := strings.Replace(startCmd, `"id"`, `"sequence": `+seq+`, "id"`, 1)
		_, _, err := ParseAppend([]byte(raw))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Fields[0].Field != "sequence" {
			t.Fatalf("sequence %s: want a validation error on sequence, got %v", seq, err)
		}
	}
}

func TestAStrictJSONTextIsExactlyOneValue(t *testing.T) {
	for _, raw := range []string{``, `{} {}`, `{"a":1}x`, `{"a":1`} {
		if _, err := checkJSON([]byte(raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: want ErrMalformed, got %v", raw, err)
		}
	}
	names, err := checkJSON([]byte(` {"b":[{"b":1},{"b":2}],"a":{"a":{}}} `))
	if err != nil || len(names) != 2 || !names["a"] || !names["b"] {
		t.Fatalf("top-level names %v, %v", names, err)
	}
}

func TestNULIsRefusedInEveryStringAndEveryBody(t *testing.T) {
	nulValue := strings.Replace(startCmd, `"EPOCHS": "3"`, `"EPOCHS": "3\u0000"`, 1)
	if _, _, err := ParseAppend([]byte(nulValue)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("append with an escaped NUL in a value: want ErrMalformed naming NUL, got %v", err)
	}
	nulName := strings.Replace(startCmd, `"EPOCHS": "3"`, `"EPOCHS\u0000": "3"`, 1)
	if _, _, err := ParseAppend([]byte(nulName)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("append with an escaped NUL in a member name: want ErrMalformed, got %v", err)
	}
	if err := CheckJSON([]byte(`{"reason":"a\u0000b"}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("CheckJSON with NUL: want ErrMalformed, got %v", err)
	}
	for _, raw := range []string{`{"a":null}`, `{"a":1,"a":1}`, "{\"a\":\"\xff\"}", `{"a":"\udc00"}`} {
		if err := CheckJSON([]byte(raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("CheckJSON(%q): want ErrMalformed, got %v", raw, err)
		}
	}
	if err := CheckJSON([]byte(`{"a":"\\u0000 is text here","b":[1,{"c":true}]}`)); err != nil {
		t.Fatalf("an escaped backslash before u0000 is not NUL: %v", err)
	}
}

// RFC 8785's own examples: section 3.2.3's sorting input and output, and
// number serialisations from Appendix B; and a number beyond double
// precision, which RFC 8785 cannot represent, refused rather than clamped.
func TestCanonicalFollowsRFC8785(t *testing.T) {
	sorting := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	if got, err := Canonical([]byte(sorting)); err != nil || string(got) != want {
		t.Errorf("sorting example: got %s, %v\nwant %s", got, err, want)
	}
	for in, out := range map[string]string{
		"0.0": "0", "-0.0": "0", "1e21": "1e+21", "9007199254740991": "9007199254740991", "99999999999999999999999": "1e+23", "9007199254740991.0": "9007199254740991",
		"5e-324": "5e-324", "-1.7976931348623157e+308": "-1.7976931348623157e+308", "0.000001": "0.000001", "1e-7": "1e-7",
		"333333333.33333329": "333333333.3333333", "1E30": "1e+30", "4.50": "4.5", "2e-3": "0.002", "1e-400": "0",
	} {
		got, err := Canonical([]byte(`[` + in + `]`))
		if err != nil || string(got) != `[`+out+`]` {
			t.Errorf("number %s: got %s, %v; want [%s]", in, got, err, out)
		}
	}
	for in, field := range map[string]string{
		`{"account_ref":{"generation":9223372036854775807}}`: "account_ref.generation",
		`{"payload":{"env":{"0":[1,-9007199254740992]}}}`:    "payload.env.0[1]",
		`[1e20]`:                   "[0]",
		`{"n":9007199254740992.0}`: "n",
		`{"p":{"n":[9e20]}}`:       "p.n[0]",
	} {
		_, err := Canonical([]byte(in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != field || !strings.Contains(de.Message, "RFC 7493") {
			t.Errorf("Canonical(%s): %v, want a refusal at %s naming I-JSON's integer range", in, err, field)
		}
	}
	for _, in := range []string{`{"a":1e400}`, `[-2e308]`, `{"a":{"b":[1,179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792]}}`} {
		if _, err := Canonical([]byte(in)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "IEEE 754") {
			t.Errorf("Canonical(%s): %v, want a refusal naming IEEE 754", in, err)
		}
	}
}

func TestCanonicalLeavesItsInputAlone(t *testing.T) {
	in := []byte(`{ "b" : 1.0, "a" : [ 2 ] }`)
	before := string(in)
	if got, err := Canonical(in); err != nil || string(got) != `{"a":[2],"b":1}` {
		t.Fatalf("Canonical = %s, %v", got, err)
	}
	if string(in) != before {
		t.Errorf("the input changed to %s", in)
	}
}

// Member names match exactly: a member written in another case is an
// unknown member, never taken for the protocol's own (encoding/json v1
// matched names without regard to case). Decode errors name the member's
// path in the protocol's dotted notation and say the rule in plain words.
func TestDecodeErrorsNameTheMemberAndTheRule(t *testing.T) {
	cases := []struct{ name, raw, field, message string }{
		{"a member in another case", strings.Replace(startCmd, `"family": "batch"`, `"Family": "batch"`, 1), "", `unknown member "Family"`},
		{"a nested member in another case", strings.Replace(startCmd, `"generation": 1`, `"Generation": 1`, 1), "account_ref", `unknown member "Generation"`},
		{"a string where an integer goes", strings.Replace(startCmd, `"generation": 1`, `"generation": "1"`, 1), "account_ref.generation", "must be an integer, not a string"},
		{"a fraction where an integer goes", strings.Replace(startCmd, `"generation": 1`, `"generation": 1.5`, 1), "account_ref.generation", "must be an integer written in digits, without a fraction or an exponent, from"},
		{"an integer beyond int64", strings.Replace(startCmd, `"generation": 1`, `"generation": 9223372036854775808`, 1), "account_ref.generation", "must be an integer from"},
		{"an object where a string goes", strings.Replace(startCmd, `"family": "batch"`, `"family": {}`, 1), "family", "must be a string, not an object"},
	}
	for _, c := range cases {
		_, _, err := ParseAppend([]byte(c.raw))
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: want a *DecodeError, got %v", c.name, err)
			continue
		}
		if de.Field != c.field || !strings.HasPrefix(de.Message, c.message) || strings.Contains(de.Message, "Go ") || strings.Contains(de.Message, "int64") {
			t.Errorf("%s: got %q: %q; want %q: %q…", c.name, de.Field, de.Message, c.field, c.message)
		}
	}
	type argv struct {
		Argv []string `json:"argv"`
	}
	err := strictUnmarshalAt([]byte(`{"argv":["a",2]}`), &argv{}, "payload.")
	var de *DecodeError
	if !errors.As(err, &de) || de.Field != "payload.argv[1]" || de.Message != "must be a string, not a number" {
		t.Errorf("an array element of the wrong type: %#v", err)
	}
	// A member named like an index is still a member.
	_, _, err = ParseAppend([]byte(strings.Replace(startCmd, `"EPOCHS": "3"`, `"0": 3`, 1)))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "payload.env.0" {
		t.Errorf("a number in env under the name \"0\": %#v", err)
	}
}

// A command nested deeper than MaxDepth is refused at append, so none the
// server accepted is too deep to serve; the same bound holds for results.
func TestNestingIsBoundedByMaxDepth(t *testing.T) {
	nest := func(levels int) string { return strings.Repeat(`{"a":`, levels) + "1" + strings.Repeat("}", levels) }
	unknown := `{"id":"11111111-2222-4333-8444-555555555577","operation":"frobnicate","issued_at":"2026-11-29T10:00:01.000Z","payload":`
	if _, _, err := ParseAppend([]byte(unknown + nest(MaxDepth-1) + `}`)); err != nil {
		t.Fatalf("a payload reaching MaxDepth: %v", err)
	}
	_, _, err := ParseAppend([]byte(unknown + nest(MaxDepth) + `}`))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "nest deeper than 32 levels") {
		t.Fatalf("a payload past MaxDepth: %v", err)
	}
	if err := CheckJSON([]byte(strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a body past MaxDepth: %v", err)
	}
}

// The limit holds for the canonical form too (stored and served):
// canonicalisation can lengthen numbers (1e15 is served as
// 1000000000000000), so a command within MaxCommandBytes as sent can be
// refused as too large in canonical form.
func TestTheCommandLimitHoldsAsServed(t *testing.T) {
	head := `{"id":"11111111-2222-4333-8444-555555555577","operation":"frobnicate","issued_at":"2026-11-29T10:00:01.000Z","payload":{"n":[`
	n := (MaxCommandBytes - len(head) - 10) / len("1e15,")
	raw := head + strings.TrimSuffix(strings.Repeat("1e15,", n), ",") + `]}}`
	if len(raw) > MaxCommandBytes {
		t.Fatalf("the test command is %d bytes", len(raw))
	}
	if _, _, err := ParseAppend([]byte(raw)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "in canonical form") {
		t.Fatalf("a command that grows past the limit when canonical: %v", err)
	}
	small := head + `1e15]}}`
	_, canonical, err := ParseAppend([]byte(small))
	if err != nil || !strings.Contains(string(canonical), `[1000000000000000]`) {
		t.Fatalf("a small command with 1e15: %s, %v", canonical, err)
	}
}

func TestTheIntegerRangeTextStatesMaxExactInteger(t *testing.T) {
	want := fmt.Sprintf("from %d to %d ", -MaxExactInteger, MaxExactInteger)
	if !strings.HasPrefix(integerRange, want) {
		t.Fatalf("integerRange %q does not start with %q", integerRange, want)
	}
}
