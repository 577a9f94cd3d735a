package httpapi

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// TestEveryOperationDocumentsItsPrincipalAndTheReasonsOfEachProblemStatus
// reads the document as registered (no Handlers: the routes are documented,
// not served) and requires every operation to name the principals it
// admits and every problem status it declares to list its reasons.
func TestEveryOperationDocumentsItsPrincipalAndTheReasonsOfEachProblemStatus(t *testing.T) {
	api := httpserver.NewAPI(http.NewServeMux(), "execution")
	Register(api, &Handlers{})
	ops := 0
	for path, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post} {
			if op == nil {
				continue
			}
			ops++
			if p, ok := op.Extensions["x-principal"].([]string); !ok || len(p) == 0 {
				t.Errorf("%s (%s) names no principal", op.OperationID, path)
			}
			for status, resp := range op.Responses {
				code, err := strconv.Atoi(status)
				if err != nil || code < 400 {
					continue
				}
				if r, ok := resp.Extensions["x-reasons"].([]string); !ok || len(r) == 0 {
					t.Errorf("%s %s lists no reason", op.OperationID, status)
				}
			}
		}
	}
	if ops == 0 {
		t.Fatal("no operation documented")
	}
}

// TestEveryKnownOperationNamesItsPayloadAndDetailSchemas requires every
// operation of the protocol's vocabulary (siteprotocol.Operations, so a new
// one joins) to name, for every family it takes, a registered payload
// component, and a registered detail component, and the Command and
// Result schemas to list each in their anyOf.
func TestEveryKnownOperationNamesItsPayloadAndDetailSchemas(t *testing.T) {
	api := httpserver.NewAPI(http.NewServeMux(), "execution")
	Register(api, &Handlers{})
	schemas := api.OpenAPI().Components.Schemas.Map()
	listed := func(s *huma.Schema) map[string]bool {
		out := map[string]bool{}
		for _, a := range s.AnyOf {
			out[a.Ref] = true
		}
		return out
	}
	payloads, details := listed(schemas["Command"].Properties["payload"]), listed(schemas["Result"].Properties["detail"])
	families := []siteprotocol.Family{siteprotocol.FamilyBatch, siteprotocol.FamilyApplication, siteprotocol.FamilyInference}
	for _, op := range siteprotocol.Operations() {
		names := payloadSchemaNames()[op]
		if len(names) == 0 {
			t.Errorf("operation %s names no payload schema", op)
		}
		for _, f := range families {
			name, ok := names[f]
			if !ok {
				name, ok = names[""]
			}
			if !ok || schemas[name] == nil || !payloads[schemaRef(name)] {
				t.Errorf("operation %s (family %s): payload schema %q is not registered or not in Command.payload's anyOf", op, f, name)
			}
		}
		name := detailSchemaNames()[op]
		if schemas[name] == nil || !details[schemaRef(name)] {
			t.Errorf("operation %s: detail schema %q is not registered or not in Result.detail's anyOf", op, name)
		}
	}
	if got := len(schemas["Result"].Properties["reason"].Enum); got != len(siteprotocol.Reasons()) {
		t.Errorf("Result.reason lists %d reasons, the vocabulary has %d", got, len(siteprotocol.Reasons()))
	}
}
