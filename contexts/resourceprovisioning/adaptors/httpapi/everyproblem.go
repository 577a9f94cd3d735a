package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/ijson"
)

// bodyProblems returns every problem of raw, a JSON text that passed
// checkJSONText, as the one 422 of its intake names them
// (docs/resource-provisioning.md#bad-input), in this order and at most one
// per location:
//   - each number that does not fit the integer field it decodes into (a
//     fraction, an exponent such as 1e0, beyond the 64-bit range), located
//     at its member with a plain message;
//   - with those numbers read as 0, every failure of the operation's body
//     schema (Huma's validation: types, enums, lengths, unknown members);
//   - check's, with the body decoded as far as it can be: the intake's
//     rules (negative amounts, unknown limit keys, IDs, times, clock skew).
//
// body is the pointer the body decodes into; check reads it after decoding.
// An empty result means the intake's own checks pass too.
func bodyProblems(reg huma.Registry, op *huma.Operation, raw []byte, body any, check func() error) []*huma.ErrorDetail {
	var out []*huma.ErrorDetail
	seen := map[string]bool{}
	add := func(d *huma.ErrorDetail) {
		if d == nil || seen[d.Location] {
			return
		}
		seen[d.Location] = true
		if !echoable(d.Value) {
			d.Value = nil
		}
		out = append(out, d)
	}
	fixed := raw
	if t := reflect.TypeOf(body); t != nil && t.Kind() == reflect.Pointer {
		var numbers []*huma.ErrorDetail
		numbers, fixed = integerProblems(raw, t.Elem())
		for _, d := range numbers {
			add(d)
		}
	}
	if schema := bodySchema(op); reg != nil && schema != nil {
		var data any
		if json.Unmarshal(fixed, &data) == nil {
			for _, d := range httpserver.ValidateBody(reg, schema, "body", data) {
				add(d)
			}
		}
	}
	if check == nil {
		return out
	}
	// encoding/json decodes every member it can and reports the first of
	// a wrong type, which the schema's failures name already; the rules of
	// the intake apply to the rest.
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(fixed, body); err != nil && !errors.As(err, &te) {
		return out
	}
	var ve *domain.ValidationError
	if err := check(); errors.As(err, &ve) {
		for _, p := range ve.Problems {
			add(&huma.ErrorDetail{Location: p.Location, Message: p.Message, Value: p.Value})
		}
	}
	return out
}

// bodySchema is the JSON request body schema of op, or nil.
func bodySchema(op *huma.Operation) *huma.Schema {
	if op == nil || op.RequestBody == nil {
		return nil
	}
	if mt := op.RequestBody.Content["application/json"]; mt != nil {
		return mt.Schema
	}
	return nil
}

// echoable reports whether v is short enough to be echoed in a problem: a
// number, a boolean or a string of at most 256 bytes.
func echoable(v any) bool {
	switch x := v.(type) {
	case nil, bool, float64, int, int64, json.Number:
		return true
	case string:
		return len(x) <= 256
	}
	return false
}

// integerProblems walks raw (a JSON text that passed checkJSONText) once
// against t, the Go type it decodes into, and returns a problem for every
// number whose field is an integer type but that is not an integer of that
// type as written (1.5, 1e0, 1e30, 9223372036854775808), located at its
// member ("body.reports[0].limits.cpu"), and raw with each of those numbers
// replaced by 0, so the rest of the body can be checked.
func integerProblems(raw []byte, t reflect.Type) ([]*huma.ErrorDetail, []byte) {
	type frame struct {
		t      reflect.Type // the container's type; nil when not followed
		object bool
		name   string
		index  int
		inName bool
	}
	var (
		stack []frame
		out   []*huma.ErrorDetail
		spans [][2]int64
	)
	path := func() ijson.Path {
		p := make(ijson.Path, 0, len(stack))
		for _, f := range stack {
			if f.object {
				p = append(p, ijson.Segment{Name: f.name})
			} else {
				p = append(p, ijson.Segment{Index: f.index, IsIndex: true})
			}
		}
		return p
	}
	// expected is the type of the value about to be read.
	expected := func() reflect.Type {
		if len(stack) == 0 {
			return deref(t)
		}
		f := stack[len(stack)-1]
		if f.t == nil {
			return nil
		}
		switch f.t.Kind() {
		case reflect.Slice, reflect.Array:
			return deref(f.t.Elem())
		case reflect.Map:
			return deref(f.t.Elem())
		case reflect.Struct:
			return deref(fieldType(f.t, f.name))
		}
		return nil
	}
	done := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].inName = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	for {
		start := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return out, raw // not JSON: checkJSONText answers that
			}
			break
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].inName && tok.Kind() == '"' {
			stack[n-1].name, stack[n-1].inName = tok.String(), false
			// encoding/json and Huma's schema match member names without regard to case; the
			// API's names are exact (docs/architecture.md#one-answer-per-fault), so a
			// member that matches a field only so is unknown.
			if ft := stack[n-1].t; ft != nil && ft.Kind() == reflect.Struct && !hasField(ft, tok.String()) && fieldType(ft, tok.String()) != nil {
				out = append(out, &huma.ErrorDetail{Location: path().Location("body"), Message: "unexpected property: member names are matched exactly, case included", Value: tok.String()})
			}
			continue
		}
		switch tok.Kind() {
		case '{', '[':
			stack = append(stack, frame{t: expected(), object: tok.Kind() == '{', inName: tok.Kind() == '{'})
			continue
		case '}', ']':
			stack = stack[:len(stack)-1]
		case '0':
			if et := expected(); et != nil {
				if msg := integerFit(tok.String(), et.Kind()); msg != "" {
					out = append(out, &huma.ErrorDetail{Location: path().Location("body"), Message: msg, Value: tok.String()})
					end := dec.InputOffset()
					if i := bytes.IndexAny(raw[start:end], "-0123456789"); i >= 0 {
						spans = append(spans, [2]int64{start + int64(i), end})
					}
				}
			}
		}
		done()
	}
	if len(spans) == 0 {
		return out, raw
	}
	fixed := make([]byte, 0, len(raw))
	last := int64(0)
	for _, s := range spans {
		fixed = append(fixed, raw[last:s[0]]...)
		fixed = append(fixed, '0')
		last = s[1]
	}
	return out, append(fixed, raw[last:]...)
}

// integerFit returns "" when the JSON number num is an integer of kind
// (for a kind that is not an integer, always ""), or why not.
func integerFit(num string, kind reflect.Kind) string {
	switch {
	case kind >= reflect.Int && kind <= reflect.Int64:
		if _, err := strconv.ParseInt(num, 10, 64); err == nil {
			return ""
		}
	case kind >= reflect.Uint && kind <= reflect.Uint64:
		if _, err := strconv.ParseUint(num, 10, 64); err == nil {
			return ""
		}
	default:
		return ""
	}
	if strings.ContainsAny(num, ".eE") {
		return "must be an integer written without a fraction or an exponent"
	}
	if kind >= reflect.Uint {
		return "is out of range: must be a non-negative integer that fits 64 bits"
	}
	return "is out of range: must be an integer from -9223372036854775808 to 9223372036854775807"
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// hasField tells whether struct t has a field whose JSON name is exactly name.
func hasField(t reflect.Type, name string) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" {
			tag = f.Name
		}
		if tag == name && tag != "-" && f.IsExported() {
			return true
		}
	}
	return false
}

// fieldType is the type of struct t's field that JSON member name decodes
// into (by its json tag, as encoding/json matches: exactly, else without
// regard to case), or nil.
func fieldType(t reflect.Type, name string) reflect.Type {
	var folded reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f.Type
		}
		if folded == nil && strings.EqualFold(tag, name) {
			folded = f.Type
		}
	}
	return folded
}
