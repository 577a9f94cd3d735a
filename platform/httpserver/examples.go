package httpserver

import (
	"maps"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
)

// Example is one documented exchange of an operation: the parameters and
// body a client sends and the status and body the server answers. Name
// joins the two halves in the document: the request's examples (of each
// parameter and of the body) and the response's example carry the same
// name under the status answered, so a reader (and app's consistency test,
// docs/testing.md#the-documents-examples) can pair them.
type Example struct {
	// Name is the example's key in every examples map it appears in
	// (kebab-case, e.g. "bind-member").
	Name    string
	Summary string
	// Params are the path, query and header parameters by name.
	Params map[string]any
	// Request is the request body (a value encoded as JSON); nil for none.
	Request any
	// Status is the status answered; Response its body (JSON).
	Status   int
	Response any
}

// examplesKey is the operation metadata holding its examples.
const examplesKey = "httpserver.examples"

// WithExamples returns metadata m with the operation's examples, documented
// by DocumentExamples as Huma adds the operation.
func WithExamples(m map[string]any, ex ...Example) map[string]any {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	out[examplesKey] = ex
	return out
}

// ExamplesOf returns the examples an operation's metadata holds.
func ExamplesOf(op *huma.Operation) []Example {
	ex, _ := op.Metadata[examplesKey].([]Example)
	return ex
}

// DocumentExamples writes an operation's examples (WithExamples) into its
// document: each parameter's examples, the request body's (every media type
// it declares) and the answered status's. It is an OnAddOperation hook of
// every API (NewAPI) and may run again on the same operation: a later hook
// that replaces a body's media types calls it once more.
func DocumentExamples(_ *huma.OpenAPI, op *huma.Operation) {
	for _, ex := range ExamplesOf(op) {
		doc := func(v any) *huma.Example { return &huma.Example{Summary: ex.Summary, Value: v} }
		for _, p := range op.Parameters {
			if v, ok := ex.Params[p.Name]; ok && p != nil {
				if p.Examples == nil {
					p.Examples = map[string]*huma.Example{}
				}
				p.Examples[ex.Name] = doc(v)
			}
		}
		if ex.Request != nil && op.RequestBody != nil {
			for _, mt := range op.RequestBody.Content {
				if mt.Examples == nil {
					mt.Examples = map[string]*huma.Example{}
				}
				mt.Examples[ex.Name] = doc(ex.Request)
			}
		}
		resp := op.Responses[strconv.Itoa(ex.Status)]
		if resp == nil || ex.Response == nil {
			continue
		}
		for _, mt := range resp.Content {
			if mt.Examples == nil {
				mt.Examples = map[string]*huma.Example{}
			}
			mt.Examples[ex.Name] = doc(ex.Response)
		}
	}
}
