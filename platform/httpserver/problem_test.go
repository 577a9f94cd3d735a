package httpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
)

// Echoed values: short scalars stay; long strings, objects and arrays go
// (objects without being formatted), and the message and location stay.
func TestBoundEchoedValuesKeepsOnlyShortScalars(t *testing.T) {
	wide := map[string]any{}
	for i := range 4000 {
		wide[strings.Repeat("k", i%50)+string(rune('a'+i%26))] = i
	}
	errs := []*huma.ErrorDetail{
		{Location: "body.a", Message: "m", Value: "short"},
		{Location: "body.b", Message: "m", Value: strings.Repeat("x", maxEchoedValue+1)},
		{Location: "body.c", Message: "m", Value: 12.5},
		{Location: "body.d", Message: "m", Value: true},
		{Location: "body.e", Message: "m", Value: json.Number("7")},
		{Location: "body.f", Message: "m", Value: wide},
		{Location: "body.g", Message: "m", Value: []any{1}},
		{Location: "body.h", Message: "m", Value: "a\x00b"},
		{Location: "body.i", Message: "m", Value: "\xff"},
		nil,
	}
	got := boundEchoedValues(errs)
	want := []bool{true, false, true, true, true, false, false, false, false}
	for i, keep := range want {
		if (got[i].Value != nil) != keep || got[i].Message != "m" || got[i].Location == "" {
			t.Errorf("error %d (%s): value kept %v, want %v", i, got[i].Location, got[i].Value != nil, keep)
		}
	}
	if got[9] != nil {
		t.Errorf("a nil error became %v", got[9])
	}
}
