package ijson

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestCheckRefusesEachRuleAtItsLocation(t *testing.T) {
	strict := Options{RefuseControl: true}
	cases := []struct {
		name   string
		raw    string
		opts   Options
		rule   Rule
		loc    string // Path.Location("body")
		inName bool
	}{
		{"empty", ``, Options{}, Syntax, "body", false},
		{"white space only", " \n\t ", Options{}, Syntax, "body", false},
		{"not JSON", `hello`, Options{}, Syntax, "body", false},
		{"unterminated object", `{"a":{"b":1`, Options{}, Syntax, "body.a.b", false},
		{"unterminated array", `{"a":[1,2`, Options{}, Syntax, "body.a[2]", false},
		{"a missing colon", `{"a" 1}`, Options{}, Syntax, "body.a", false},
		{"a bad escape", `["\x"]`, Options{}, Syntax, "body[0]", false},
		{"a raw control character", "[\"a\x01\"]", Options{}, Syntax, "body[0]", false},
		{"invalid UTF-8 in a value", "{\"a\":{\"b\":\"x\xffy\"}}", Options{}, InvalidUTF8, "body", false},
		{"an overlong encoding", "[\"\xc0\xaf\"]", Options{}, InvalidUTF8, "body", false},
		{"an encoded surrogate", "[\"\xed\xa0\x80\"]", Options{}, InvalidUTF8, "body", false},
		{"a lone high surrogate", `{"a":[{"b":"x\ud800y"}]}`, Options{}, LoneSurrogate, "body.a[0].b", false},
		{"a high surrogate at the end", `{"a":"x\ud800"}`, Options{}, LoneSurrogate, "body.a", false},
		{"a low surrogate first", `{"a":"\udc00\ud800"}`, Options{}, LoneSurrogate, "body.a", false},
		{"a lone low surrogate", `["ok","\uDFFF"]`, Options{}, LoneSurrogate, "body[1]", false},
		{"a high surrogate before a non-surrogate escape", `["\ud800\u0041"]`, Options{}, LoneSurrogate, "body[0]", false},
		{"two high surrogates", `["\ud800\ud800"]`, Options{}, LoneSurrogate, "body[0]", false},
		{"a high surrogate before a two-character escape", `["\ud800\n"]`, Options{}, LoneSurrogate, "body[0]", false},
		{"a lone surrogate after an escaped backslash", `["\\\ud800"]`, Options{}, LoneSurrogate, "body[0]", false},
		{"a lone surrogate in a member name", `{"a":{"k\ud800":1}}`, Options{}, LoneSurrogate, "body.a.k\ufffd", true},
		{"a top-level member twice", `{"a":1,"b":2,"a":1}`, Options{}, DuplicateMember, "body.a", false},
		{"a nested member twice", `{"reports":[{"limits":{"cpu":1,"cpu":2}}]}`, Options{}, DuplicateMember, "body.reports[0].limits.cpu", false},
		{"a member twice after an object value", `{"a":{"x":1},"a":{}}`, Options{}, DuplicateMember, "body.a", false},
		{"a member twice, escaped the second time", `{"a":1,"\u0061":2}`, Options{}, DuplicateMember, "body.a", false},
		{"two members differing only in case", `{"id":"a","ID":"b"}`, Options{}, DuplicateMember, "body.ID", false},
		{"nested members differing only in case", `{"reports":[{"paused":false,"Paused":true}]}`, Options{}, DuplicateMember, "body.reports[0].Paused", false},
		{"members equal under Unicode case folding (Kelvin sign)", `{"k":1,"\u212a":2}`, Options{}, DuplicateMember, "body.\u212a", false},
		{"an ASCII name, then the same name with the long s", `{"Status":1,"\u017ftatus":2}`, Options{}, DuplicateMember, "body.\u017ftatus", false},
		{"a non-ASCII name, then its ASCII fold", `{"\u212aind":1,"KIND":2}`, Options{}, DuplicateMember, "body.KIND", false},
		{"a second value", `{} {}`, Options{}, TrailingData, "body", false},
		{"a second scalar", `1 2`, Options{}, TrailingData, "body", false},
		{"garbage after the value", `{"a":1}x`, Options{}, TrailingData, "body", false},
		{"a closing bracket after the value", `[] ]`, Options{}, TrailingData, "body", false},
		{"null at the root", `null`, Options{}, Null, "body", false},
		{"a null member", `{"a":{"b":null}}`, Options{}, Null, "body.a.b", false},
		{"a null element", `{"a":[1,{},null]}`, Options{}, Null, "body.a[2]", false},
		{"a null in nested arrays", `[[1],[2,[3,null]]]`, Options{}, Null, "body[1][1][1]", false},
		{"NUL in a value", `{"a":["x","y\u0000"]}`, Options{}, NUL, "body.a[1]", false},
		{"NUL in a member name", `{"a":{"k\u0000":1}}`, Options{}, NUL, "body.a.k\x00", true},
		{"NUL with RefuseControl", `{"a":"\u0000"}`, strict, NUL, "body.a", false},
		{"a control character", `{"a":{"b":"x\u0001"}}`, strict, ControlCharacter, "body.a.b", false},
		{"a line feed", `["ok","a\nb"]`, strict, ControlCharacter, "body[1]", false},
		{"a C1 control character", `{"a":"\u0085"}`, strict, ControlCharacter, "body.a", false},
		{"DEL", `{"a":"\u007f"}`, strict, ControlCharacter, "body.a", false},
		{"a control character in a member name", `{"a\t":1}`, strict, ControlCharacter, "body.a\t", true},
	}
	for _, c := range cases {
		_, err := Check([]byte(c.raw), c.opts)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: want *Error, got %v", c.name, err)
			continue
		}
		if e.Rule != c.rule || e.Path.Location("body") != c.loc || e.InName != c.inName {
			t.Errorf("%s: got rule %v at %q (in a name: %v), want %v at %q (%v): %v",
				c.name, e.Rule, e.Path.Location("body"), e.InName, c.rule, c.loc, c.inName, err)
		}
		if e.Description() == "" || !strings.HasPrefix(err.Error(), e.Description()) {
			t.Errorf("%s: error %q does not start with the description %q", c.name, err, e.Description())
		}
	}
}

func TestCheckAcceptsStrictTexts(t *testing.T) {
	for _, raw := range []string{
		`{}`, `[]`, `0`, `-1.5e300`, `1e400`, `true`, `false`, `""`, ` "x" `, "\n{}\n",
		`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, // one name in distinct objects
		`{"a":"\ud83d\ude00"}`,                      // a surrogate pair (U+1F600)
		`["\uD83D\uDE00 and \udbff\udfff"]`,         // pairs in upper case, and the last code point
		`["😀"]`,                                     // the same, not escaped
		`["\\ud800"]`,                               // an escaped backslash, then text
		`{"a":"\\u0000 is text here"}`,              // no NUL either
		`{"a\"b":1,"a\\b":2,"ab":3}`,                // distinct names once unescaped
		`{"text":"tab\tand\nline"}`,                 // control characters, allowed by default
		`{"é":"ü","\u00e8":"x"}`,
		`[[[[[]]]],{"x":[{}]}]`,
	} {
		if _, err := Check([]byte(raw), Options{}); err != nil {
			t.Errorf("Check(%q): %v", raw, err)
		}
	}
	for _, raw := range []string{`{"a":"\ud83d\ude00","b":["x"]}`, `{"é":1}`} {
		if _, err := Check([]byte(raw), Options{RefuseControl: true}); err != nil {
			t.Errorf("Check(%q) refusing control characters: %v", raw, err)
		}
	}
}

func TestCheckReturnsTheTopLevelMemberNamesInOrder(t *testing.T) {
	names, err := Check([]byte(` {"b":[{"b":1},{"c":2}],"a":{"d":{}},"\u0065":null1} `), Options{})
	if err == nil {
		t.Fatalf("want a syntax error, got names %v", names)
	}
	names, err = Check([]byte(` {"b":[{"b":1},{"c":2}],"a":{"d":{}},"\u0065":1} `), Options{})
	if err != nil || !slices.Equal(names, []string{"b", "a", "e"}) {
		t.Fatalf("got %q, %v; want [b a e]", names, err)
	}
	for _, raw := range []string{`[{"a":1}]`, `"a"`, `1`} {
		if names, err := Check([]byte(raw), Options{}); err != nil || names != nil {
			t.Errorf("Check(%q) = %q, %v; want no names", raw, names, err)
		}
	}
	if names, err := Check([]byte(`{}`), Options{}); err != nil || names == nil || len(names) != 0 {
		t.Errorf("Check({}) = %q, %v", names, err)
	}
}

func TestErrorsNameTheRuleAndTheLocation(t *testing.T) {
	_, err := Check([]byte(`{"limits":{"cpu":1,"cpu":2}}`), Options{})
	var e *Error
	if !errors.As(err, &e) || e.Member != "cpu" {
		t.Fatalf("want the duplicate member cpu, got %#v", err)
	}
	if got, want := err.Error(), `member "cpu" appears twice in one object at /limits/cpu`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err = Check([]byte(`{"id":"a","ID":"b"}`), Options{})
	if got, want := fmt.Sprint(err), `members "id" and "ID" of one object differ only in case at /ID`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err = Check([]byte(`{"a":1x}`), Options{})
	if !errors.As(err, &e) || e.Rule != Syntax || e.Err == nil || strings.Contains(err.Error(), "jsontext") {
		t.Errorf("a syntax error should carry the tokenizer's cause without its package name: %#v", err)
	} else if got, want := err.Error(), "invalid character 'x' after object value (expecting ',' or '}') at /a"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err = Check([]byte(`{"a":[1`), Options{})
	if !errors.As(err, &e) || !errors.Is(err, io.ErrUnexpectedEOF) || err.Error() != "unexpected end of JSON input at /a/1" {
		t.Errorf("a text ending inside an array: %v", err)
	}
	_, err = Check([]byte("\xff"), Options{})
	if err == nil || err.Error() != "not valid UTF-8" {
		t.Errorf("invalid UTF-8: %v", err)
	}
	_, err = Check([]byte(`{"k\u0000":1}`), Options{})
	if err == nil || !strings.Contains(err.Error(), "member name") || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("NUL in a member name: %v", err)
	}
}

func TestPathRendersInHumaNotationAndAsAJSONPointer(t *testing.T) {
	p := Path{{Name: "reports"}, {Index: 0, IsIndex: true}, {Name: "limits"}, {Name: "a/b~c"}}
	if got := p.Location("body"); got != "body.reports[0].limits.a/b~c" {
		t.Errorf("Location = %q", got)
	}
	if got := p.Location(""); got != "reports[0].limits.a/b~c" {
		t.Errorf("Location without a root = %q", got)
	}
	if got := p.Pointer(); got != "/reports/0/limits/a~1b~0c" {
		t.Errorf("Pointer = %q", got)
	}
	if got := (Path{{Index: 3, IsIndex: true}}).Location("body"); got != "body[3]" {
		t.Errorf("an index at the root = %q", got)
	}
	if got := Path(nil).Location("body") + "|" + Path(nil).Pointer(); got != "body|" {
		t.Errorf("the root = %q", got)
	}
}

func TestRulesHaveNames(t *testing.T) {
	seen := map[string]bool{}
	for r := Syntax; r <= Depth; r++ {
		s := r.String()
		if strings.HasPrefix(s, "rule(") || seen[s] {
			t.Errorf("rule %d: name %q", int(r), s)
		}
		seen[s] = true
	}
	if got := Rule(0).String(); got != "rule(0)" {
		t.Errorf("Rule(0) = %q", got)
	}
}

// Duplicates are found in narrow and wide objects alike (a 120,000-member
// object once took 17 s: names are indexed, never scanned), and the first
// spelling of a case-folded name is reported.
func TestWideObjectsAreChecked(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 50000} {
		var b strings.Builder
		b.WriteString(`{"Wide":1`)
		for i := range n {
			fmt.Fprintf(&b, `,"m%x":%d`, i, i)
		}
		b.WriteByte('}')
		if _, err := Check([]byte(b.String()), Options{}); err != nil {
			t.Fatalf("%d members: %v", n, err)
		}
		raw := strings.TrimSuffix(b.String(), "}") + `,"wIDE":2}`
		_, err := Check([]byte(raw), Options{})
		var e *Error
		if !errors.As(err, &e) || e.Rule != DuplicateMember || e.Member != "wIDE" || e.Other != "Wide" {
			t.Fatalf("%d members and a case-folded repeat of the first: %v", n, err)
		}
	}
}

func TestMaxDepthBoundsNesting(t *testing.T) {
	if _, err := Check([]byte(`{"a":[{"b":1}]}`), Options{MaxDepth: 3}); err != nil {
		t.Fatalf("three levels with MaxDepth 3: %v", err)
	}
	_, err := Check([]byte(`{"a":[{"b":[]}]}`), Options{MaxDepth: 3})
	var e *Error
	if !errors.As(err, &e) || e.Rule != Depth || e.Path.Location("body") != "body.a[0].b" || err.Error() != "objects and arrays nest deeper than 3 levels at /a/0/b" {
		t.Fatalf("four levels with MaxDepth 3: %v", err)
	}
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	if _, err := Check([]byte(deep), Options{}); err != nil {
		t.Fatalf("5,000 levels without MaxDepth: %v", err)
	}
}

// A syntax error before an object's first member name is located at the
// object, not at an empty member name ("body." before).
func TestASyntaxErrorBeforeTheFirstNameIsLocatedAtTheObject(t *testing.T) {
	for raw, loc := range map[string]string{`{1:2}`: "body", `{"a":{1:2}}`: "body.a", `[{'id':1}]`: "body[0]", `{"a":1,}`: "body.a"} {
		_, err := Check([]byte(raw), Options{})
		var e *Error
		if !errors.As(err, &e) || e.Rule != Syntax || e.Path.Location("body") != loc {
			t.Errorf("Check(%s): %v at %q, want a syntax error at %q", raw, err, e.Path.Location("body"), loc)
		}
	}
}

// TestNotTextDrawsTheLineBetween400And422: the rules broken by bytes that
// are not one I-JSON text, and only those, are NotText
// (docs/architecture.md#one-answer-per-fault).
func TestNotTextDrawsTheLineBetween400And422(t *testing.T) {
	for text, want := range map[string]bool{
		`{"a":`:          true,
		"\"\xff\"":       true,
		`"\ud800"`:       true,
		`{"a":1,"a":2}`:  true,
		`{"a":1,"A":2}`:  true,
		`1 2`:            true,
		`[[[1]]]`:        true,
		`{"a":null}`:     false,
		`{"a":"\u0000"}`: false,
		`{"a":"\u0007"}`: false,
	} {
		_, err := Check([]byte(text), Options{RefuseControl: true, MaxDepth: 2})
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%q: %v, want an *Error", text, err)
		}
		if e.Rule.NotText() != want {
			t.Errorf("%q breaks %s: NotText %v, want %v", text, e.Rule, e.Rule.NotText(), want)
		}
	}
}
