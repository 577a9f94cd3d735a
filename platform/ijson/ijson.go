// Package ijson checks that a JSON text is one strict I-JSON value before it
// is decoded, so Go's encoding/json cannot hide or repair what the sender
// wrote. The rules and their sources:
//   - the text is valid UTF-8 (RFC 8259 section 8.1): encoding/json would
//     replace invalid bytes by U+FFFD, so two distinct texts could decode
//     to one value;
//   - no string escapes a lone UTF-16 surrogate (RFC 7493 section 2.1):
//     decoded as U+FFFD, the same collision;
//   - no object names a member twice, at any depth (RFC 7493 section 2.3):
//     encoding/json keeps the last one silently; nor two members whose
//     names differ only in case ("id" and "ID"), because encoding/json
//     matches struct fields without regard to case, so the decoded value
//     would depend on member order, which canonical re-encoding changes;
//   - exactly one JSON value (RFC 8259 section 2), nothing after it;
//   - no null anywhere, and no U+0000 (NUL) in any string or member name
//     (docs/site-protocol.md#canonical-encoding-and-strict-json: optional members are absent,
//     never null; text columns of the stores cannot hold NUL). These two go
//     beyond I-JSON; Options.RefuseControl widens the second to every
//     control character.
//
// Check reports the first rule broken as an *Error naming the Rule and the
// Path of the offending member (renderable as Huma's "body.limits.cpu" or as
// an RFC 6901 JSON Pointer). The package knows no domain types.
package ijson

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Rule is one strictness rule a JSON text can break.
type Rule int

// The rules Check applies, in the order Error.Rule can name them.
const (
	// Syntax: the text is not JSON (RFC 8259), or holds no value at all.
	Syntax Rule = iota + 1
	// InvalidUTF8: the text is not valid UTF-8 (RFC 8259 section 8.1).
	InvalidUTF8
	// LoneSurrogate: a string or member name escapes a UTF-16 surrogate
	// that is not part of a pair (RFC 7493 section 2.1).
	LoneSurrogate
	// DuplicateMember: an object names a member twice (RFC 7493 section
	// 2.3), or two members whose names are equal under Unicode case folding.
	DuplicateMember
	// TrailingData: something other than white space follows the value.
	TrailingData
	// Null: a null literal, anywhere.
	Null
	// NUL: a string or member name holds U+0000.
	NUL
	// ControlCharacter: a string or member name holds another control
	// character (U+0001 to U+001F, U+007F to U+009F); only with
	// Options.RefuseControl.
	ControlCharacter
	// Depth: objects and arrays nest deeper than Options.MaxDepth.
	Depth
)

// String returns the rule's name in lower case with hyphens, e.g.
// "duplicate-member".
func (r Rule) String() string {
	switch r {
	case Syntax:
		return "syntax"
	case InvalidUTF8:
		return "invalid-utf8"
	case LoneSurrogate:
		return "lone-surrogate"
	case DuplicateMember:
		return "duplicate-member"
	case TrailingData:
		return "trailing-data"
	case Null:
		return "null"
	case NUL:
		return "nul"
	case ControlCharacter:
		return "control-character"
	case Depth:
		return "depth"
	}
	return "rule(" + strconv.Itoa(int(r)) + ")"
}

// NotText reports whether r is broken by bytes that are not one I-JSON text
// at all (RFC 8259, RFC 7493): Syntax, InvalidUTF8, LoneSurrogate,
// DuplicateMember, TrailingData and Depth (nesting is a bound on the text,
// read before any member is). The other rules (Null, NUL,
// ControlCharacter) are broken by a well-formed text whose content an API
// refuses. Both central roles answer the first kind 400 and the second 422
// naming the member (README, "Bad input";
// docs/architecture.md#one-answer-per-fault).
func (r Rule) NotText() bool {
	switch r {
	case Null, NUL, ControlCharacter:
		return false
	}
	return true
}

// MaxDepth is the one nesting bound of every JSON body the central roles
// read (docs/architecture.md#one-answer-per-fault): objects and arrays
// nested deeper than 32 levels are refused (Options.MaxDepth), so a body
// cannot make a refusal's location, or a decoder's stack, large.
const MaxDepth = 32

// Options selects the variable rules of Check. The zero value applies the
// rules of the package documentation.
type Options struct {
	// RefuseControl refuses every control character (unicode.IsControl:
	// U+0000 to U+001F and U+007F to U+009F) in strings and member names,
	// not only U+0000. A string holding U+0000 is still reported as NUL.
	RefuseControl bool
	// MaxDepth, when positive, is the deepest nesting of objects and
	// arrays allowed: 1 allows {"a":1} but not {"a":[]}. Zero leaves only
	// the tokenizer's own bound (10,000).
	MaxDepth int
}

// Segment is one step of a Path: into an object by member name, or into an
// array by element index (from 0).
type Segment struct {
	Name    string // the member name, when !IsIndex
	Index   int    // the element index, when IsIndex
	IsIndex bool
}

// Path locates a value from the root of a JSON text; the empty Path is the
// whole text.
type Path []Segment

// Location renders p in Huma's error-location notation below root: member
// names joined by dots, indexes in brackets, e.g. Location("body") of
// reports/0/limits/cpu is "body.reports[0].limits.cpu". Names are written
// as they are (a name holding a dot is ambiguous, as in Huma).
func (p Path) Location(root string) string {
	var b strings.Builder
	b.WriteString(root)
	for _, s := range p {
		if s.IsIndex {
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.Name)
	}
	return b.String()
}

// Pointer renders p as an RFC 6901 JSON Pointer, e.g. "/reports/0/limits/cpu"
// ("" for the root; "~" and "/" in names escaped as "~0" and "~1").
func (p Path) Pointer() string {
	var b strings.Builder
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, s := range p {
		b.WriteByte('/')
		if s.IsIndex {
			b.WriteString(strconv.Itoa(s.Index))
		} else {
			b.WriteString(esc.Replace(s.Name))
		}
	}
	return b.String()
}

// String returns p.Pointer().
func (p Path) String() string { return p.Pointer() }

// Error is the first rule a JSON text breaks, and where.
type Error struct {
	// Rule is the rule broken.
	Rule Rule
	// Path locates the offending member or element: for DuplicateMember the
	// repeated member itself; for LoneSurrogate, NUL and ControlCharacter
	// the member or element holding the string, or the member so named when
	// InName; for Null the null member or element; for Syntax where the
	// decoder stopped, as far as the text was read. It is empty (the root)
	// for InvalidUTF8, TrailingData and a text holding no value.
	Path Path
	// InName reports that the offending string is a member name rather than
	// a value (LoneSurrogate, NUL, ControlCharacter).
	InName bool
	// MaxDepth is the bound Depth broke.
	MaxDepth int
	// Member is the repeated member name of DuplicateMember.
	Member string
	// Other is, for DuplicateMember, the earlier member's name when it
	// differs from Member only in case ("" for an exact repeat).
	Other string
	// Err is the tokenizer's account of a Syntax error (jsontext's, without
	// its location): io.ErrUnexpectedEOF for a text ending inside an object
	// or array, nil for a text holding no value.
	Err error
}

// Description states the rule broken without the location, e.g.
// `member "cpu" appears twice in one object`.
func (e *Error) Description() string {
	str := "a string"
	if e.InName {
		str = "a member name"
	}
	switch e.Rule {
	case Syntax:
		switch {
		case e.Err == nil:
			return "no JSON value"
		case errors.Is(e.Err, io.ErrUnexpectedEOF):
			return "unexpected end of JSON input"
		}
		return e.Err.Error()
	case InvalidUTF8:
		return "not valid UTF-8"
	case LoneSurrogate:
		return str + " escapes a lone UTF-16 surrogate"
	case DuplicateMember:
		if e.Other != "" {
			return "members " + strconv.Quote(e.Other) + " and " + strconv.Quote(e.Member) + " of one object differ only in case"
		}
		return "member " + strconv.Quote(e.Member) + " appears twice in one object"
	case TrailingData:
		return "trailing data after the JSON value"
	case Null:
		return "null is not allowed; leave an optional member out"
	case NUL:
		return str + " holds U+0000 (NUL)"
	case ControlCharacter:
		return str + " holds a control character (U+0000 to U+001F, U+007F to U+009F)"
	case Depth:
		return "objects and arrays nest deeper than " + strconv.Itoa(e.MaxDepth) + " levels"
	}
	return e.Rule.String()
}

// Error returns the description and, below the root, the JSON Pointer of
// the location: `member "cpu" appears twice in one object at /limits/cpu`.
func (e *Error) Error() string {
	if len(e.Path) == 0 {
		return e.Description()
	}
	return e.Description() + " at " + e.Path.Pointer()
}

// Unwrap returns the tokenizer's account of a Syntax error.
func (e *Error) Unwrap() error { return e.Err }

// Check returns a nil error when raw is exactly one JSON value that keeps
// every rule of the package documentation (with opts), or the first rule
// broken as an *Error. It also returns the member names of raw's top-level
// object in the order written (empty, not nil, for {}; nil when raw is not
// an object, or on error), so a caller can tell an absent member from a
// zero one without decoding twice.
//
// The text is read once by jsontext's tokenizer (github.com/go-json-experiment/json,
// the encoding/json/v2 of Go 1.27), which refuses what is not JSON; the
// rules beyond syntax are applied here.
func Check(raw []byte, opts Options) ([]string, error) {
	if !utf8.Valid(raw) {
		return nil, &Error{Rule: InvalidUTF8}
	}
	// frame is one open object or array: an object's member names (fold
	// key → the name as sent), whether its next string token is a name,
	// and its current member; an array's current element index.
	type frame struct {
		object   bool
		names    map[string]string
		wantName bool
		name     string
		named    bool
		index    int
	}
	var (
		stack []frame
		top   []string
		done  bool
	)
	path := func() Path {
		p := make(Path, 0, len(stack))
		for _, f := range stack {
			switch {
			case f.object && f.named:
				p = append(p, Segment{Name: f.name})
			case !f.object:
				p = append(p, Segment{Index: f.index, IsIndex: true})
			}
			// An object whose first member name is not read yet has no
			// member to name: the location stops at the object.
		}
		return p
	}
	// Duplicate and invalid-UTF-8 detection are this function's own (with
	// their rule, path and the case-fold comparison); the tokenizer only
	// reads.
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		start := dec.InputOffset()
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			if len(stack) > 0 {
				return nil, &Error{Rule: Syntax, Path: path(), Err: io.ErrUnexpectedEOF}
			}
			if !done {
				return nil, &Error{Rule: Syntax}
			}
			return top, nil
		}
		if done { // a second value, or anything else after the first
			return nil, &Error{Rule: TrailingData}
		}
		if err != nil {
			return nil, &Error{Rule: Syntax, Path: path(), Err: syntaxCause(err)}
		}
		var parent *frame
		if n := len(stack); n > 0 {
			parent = &stack[n-1]
		}
		switch tok.Kind() {
		case 'n':
			return nil, &Error{Rule: Null, Path: path()}
		case '"':
			// The token's text: separators and white space, then the quoted
			// string (which alone can hold a backslash). Without one, the
			// string holds no escape, so no NUL or C0 control character.
			text := raw[start:dec.InputOffset()]
			escaped := bytes.IndexByte(text, '\\') >= 0
			isName := parent != nil && parent.wantName
			var v string
			if isName || escaped || opts.RefuseControl {
				v = tok.String()
			}
			if isName {
				parent.name, parent.named = v, true
			}
			if escaped && loneSurrogate(text) {
				return nil, &Error{Rule: LoneSurrogate, Path: path(), InName: isName}
			}
			if isName {
				key := foldKey(v)
				if first, seen := parent.names[key]; seen {
					e := &Error{Rule: DuplicateMember, Path: path(), Member: v}
					if first != v {
						e.Other = first
					}
					return nil, e
				}
				parent.names[key], parent.wantName = v, false
				if len(stack) == 1 {
					top = append(top, v)
				}
			}
			if escaped || opts.RefuseControl {
				if r := forbidden(v, opts); r != 0 {
					return nil, &Error{Rule: r, Path: path(), InName: isName}
				}
			}
			if isName {
				continue
			}
		case '{', '[':
			if opts.MaxDepth > 0 && len(stack) >= opts.MaxDepth {
				return nil, &Error{Rule: Depth, Path: path(), MaxDepth: opts.MaxDepth}
			}
			if tok.Kind() == '[' {
				stack = append(stack, frame{})
				continue
			}
			if len(stack) == 0 {
				top = []string{} // an object, even without members
			}
			stack = append(stack, frame{object: true, names: map[string]string{}, wantName: true})
			continue
		case '}', ']':
			stack = stack[:len(stack)-1]
			parent = nil
			if n := len(stack); n > 0 {
				parent = &stack[n-1]
			}
		}
		// A complete value: move its container past it.
		switch {
		case parent == nil:
			done = true
		case parent.object:
			parent.wantName = true
		default:
			parent.index++
		}
	}
}

// syntaxCause is the tokenizer's own account of a syntax error, without
// its package prefix and location (Error adds the location as a Path).
func syntaxCause(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err != nil {
		if errors.Is(se.Err, io.ErrUnexpectedEOF) {
			return io.ErrUnexpectedEOF
		}
		return se.Err
	}
	return err
}

// forbidden returns the rule s breaks by the characters it holds (NUL, or
// ControlCharacter with opts.RefuseControl), or 0.
func forbidden(s string, opts Options) Rule {
	if strings.IndexByte(s, 0) >= 0 {
		return NUL
	}
	if opts.RefuseControl && strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return ControlCharacter
	}
	return 0
}

// loneSurrogate reports whether tok, the text of one string token (the
// separators and white space before it, then the quoted string, already
// accepted by the decoder), escapes a UTF-16 surrogate that is not a high
// surrogate directly followed by an escaped low one.
func loneSurrogate(tok []byte) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] != '\\' {
			continue
		}
		i++ // the escaped character; "\\\\" skips the second backslash
		if i >= len(tok) || tok[i] != 'u' {
			continue
		}
		r, ok := hex4(tok, i+1)
		if !ok {
			continue // the decoder refuses it
		}
		i += 4 // the last hex digit
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xdc00 { // a low surrogate first
			return true
		}
		if i+2 >= len(tok) || tok[i+1] != '\\' || tok[i+2] != 'u' {
			return true
		}
		if low, ok := hex4(tok, i+3); !ok || low < 0xdc00 || low > 0xdfff {
			return true
		}
		i += 6
	}
	return false
}

// foldKey maps name to one representative of its Unicode simple case
// folding orbit per rune, so two names have equal keys exactly when
// strings.EqualFold holds for them. The representative is the orbit's
// smallest rune, except that an ASCII upper-case letter (the smallest of
// every orbit holding an ASCII letter, such as k, K and the Kelvin sign)
// is written in lower case: an ASCII name's key is then strings.ToLower's,
// which allocates nothing for a name already in lower case.
func foldKey(name string) string {
	if isASCII(name) {
		return strings.ToLower(name)
	}
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < least {
				least = f
			}
		}
		if 'A' <= least && least <= 'Z' {
			least += 'a' - 'A'
		}
		return least
	}, name)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// hex4 reads four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}
