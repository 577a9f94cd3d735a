package httpserver

import (
	"errors"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// ValidateBody validates data, a decoded JSON value (encoding/json's any),
// against schema as Huma validates a request body, and returns every
// failure located under root ("body"), in Huma's order. Unlike a bare
// huma.Validate, a member name holding '.' or '[' (a limit key such as
// gpu.nvidia) is located exactly and leaves later locations alone: Huma's
// path buffer pops a name only back to its last '.' or '[', which shifts
// every location after it. Such names are swapped for placeholders while
// validating and restored in the locations
// (docs/architecture.md#one-answer-per-fault).
func ValidateBody(reg huma.Registry, schema *huma.Schema, root string, data any) []*huma.ErrorDetail {
	var names []string
	data = placeholders(data, &names)
	res := &huma.ValidateResult{}
	pb := huma.NewPathBuffer([]byte{}, 0)
	pb.Push(root)
	huma.Validate(reg, schema, pb, huma.ModeWriteToServer, data, res)
	restore := make([]string, 0, 2*len(names))
	for i, name := range names {
		restore = append(restore, placeholder(i), name)
	}
	r := strings.NewReplacer(restore...)
	out := make([]*huma.ErrorDetail, 0, len(res.Errors))
	for _, e := range res.Errors {
		var d *huma.ErrorDetail
		if !errors.As(e, &d) {
			continue
		}
		if len(names) > 0 {
			d.Location = r.Replace(d.Location)
		}
		out = append(out, d)
	}
	return out
}

// placeholder is the i-th stand-in name: NUL-delimited, so no JSON name a
// client sends through the strict body checks (which refuse NUL) equals it.
func placeholder(i int) string { return "\x00" + strconv.Itoa(i) + "\x00" }

// placeholders returns a copy of v with every object member name that
// holds '.' or '[' renamed to a placeholder, appending the original names
// to names in placeholder order.
func placeholders(v any, names *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if strings.ContainsAny(k, ".[") {
				*names = append(*names, k)
				k = placeholder(len(*names) - 1)
			}
			out[k] = placeholders(val, names)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = placeholders(val, names)
		}
		return out
	}
	return v
}
