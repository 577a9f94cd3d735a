package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// examplesJSON holds the documented example of every operation, in the
// order a client would send them from a fresh server: Beto's events, Site
// alpha's report of the allocation alpha-gpu-ns (the provisioning cases'
// record), the agent's account lookup and account report, then the reads.
// Each response is the answer the server gave to its request on a fresh
// server (app's consistency test posts every request on both engines,
// validates each answer against the document, and rewrites the responses
// with -update-examples; docs/testing.md#the-documents-examples).
//
//go:embed examples/examples.json
var examplesJSON []byte

// ExampleRecord is one documented exchange as examples.json holds it.
type ExampleRecord struct {
	Operation string          `json:"operation"`
	Name      string          `json:"name"`
	Summary   string          `json:"summary"`
	Params    map[string]any  `json:"params,omitempty"`
	Request   json.RawMessage `json:"request,omitempty"`
	Status    int             `json:"status"`
	Response  json.RawMessage `json:"response,omitempty"`
}

// ExampleRecords returns examples.json's records in order; an unreadable
// file is an error (its test fails first).
func ExampleRecords() ([]ExampleRecord, error) {
	var recs []ExampleRecord
	if err := json.Unmarshal(examplesJSON, &recs); err != nil {
		return nil, fmt.Errorf("examples.json: %w", err)
	}
	return recs, nil
}

// examplesByOperation returns examples.json's examples by operation ID
// (none when the file does not parse: TestEveryOperationHasAnExample names
// the error).
func examplesByOperation() map[string][]httpserver.Example {
	recs, err := ExampleRecords()
	if err != nil {
		return nil
	}
	byOp := map[string][]httpserver.Example{}
	for _, r := range recs {
		ex := httpserver.Example{Name: r.Name, Summary: r.Summary, Params: r.Params, Status: r.Status}
		if len(r.Request) > 0 {
			ex.Request = r.Request
		}
		if len(r.Response) > 0 {
			ex.Response = r.Response
		}
		byOp[r.Operation] = append(byOp[r.Operation], ex)
	}
	return byOp
}
