package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
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

// TestTheApplicationPrepareSchemaStatesWhatTheServerChecks reads
// PrepareApplicationPayload as registered, requires its example, and
// probes the server's check (siteprotocol.ParseAppend, what append runs)
// at each stated bound: the bound itself is accepted, one past it is
// refused naming the member, and each required demand key is required.
func TestTheApplicationPrepareSchemaStatesWhatTheServerChecks(t *testing.T) {
	api := httpserver.NewAPI(http.NewServeMux(), "execution")
	Register(api, &Handlers{})
	schemas := api.OpenAPI().Components.Schemas.Map()
	app := schemas["PrepareApplicationPayload"]
	if app == nil || len(app.Examples) != 1 {
		t.Fatalf("PrepareApplicationPayload has no example: %+v", app)
	}
	var command map[string]any
	for _, c := range exampleCommands() {
		if c.name == "prepare-application" {
			command = c.command
		}
	}
	if command == nil {
		t.Fatal("no prepare-application append example")
	}
	// check appends the example with payload member path set to v (nil:
	// left out) and returns the refused fields.
	check := func(v any, path ...string) []string {
		t.Helper()
		raw, _ := json.Marshal(command)
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		m := c["payload"].(map[string]any)
		for _, p := range path[:len(path)-1] {
			m = m[p].(map[string]any)
		}
		if v == nil {
			delete(m, path[len(path)-1])
		} else {
			m[path[len(path)-1]] = v
		}
		raw, _ = json.Marshal(c)
		_, _, err := siteprotocol.ParseAppend(raw)
		var ve *siteprotocol.ValidationError
		var de *siteprotocol.DecodeError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ve):
			var out []string
			for _, f := range ve.Fields {
				out = append(out, f.Field)
			}
			return out
		case errors.As(err, &de):
			return []string{de.Field}
		}
		t.Fatalf("%v: %v", path, err)
		return nil
	}
	bounds := []struct {
		schema *huma.Schema
		path   []string
	}{
		{app.Properties["port"], []string{"port"}},
		{schemas["Readiness"].Properties["initial_delay_seconds"], []string{"readiness", "initial_delay_seconds"}},
		{schemas["Readiness"].Properties["period_seconds"], []string{"readiness", "period_seconds"}},
		{app.Properties["demand"].Properties["cpu"], []string{"demand", "cpu"}},
		{app.Properties["demand"].Properties["memory"], []string{"demand", "memory"}},
		{app.Properties["demand"].AdditionalProperties.(*huma.Schema), []string{"demand", "gpu.nvidia"}},
	}
	for _, b := range bounds {
		field := "payload." + strings.Join(b.path, ".")
		if b.schema == nil || b.schema.Minimum == nil {
			t.Errorf("%s states no minimum", field)
			continue
		}
		lo := int64(*b.schema.Minimum)
		if got := check(lo, b.path...); got != nil {
			t.Errorf("%s = its minimum %d is refused: %v", field, lo, got)
		}
		if got := check(lo-1, b.path...); len(got) != 1 || got[0] != field {
			t.Errorf("%s = %d (below its minimum): refused %v, want [%s]", field, lo-1, got, field)
		}
		if b.schema.Maximum != nil {
			hi := int64(*b.schema.Maximum)
			if got := check(hi, b.path...); got != nil {
				t.Errorf("%s = its maximum %d is refused: %v", field, hi, got)
			}
			if got := check(hi+1, b.path...); len(got) != 1 || got[0] != field {
				t.Errorf("%s = %d (above its maximum): refused %v, want [%s]", field, hi+1, got, field)
			}
		}
	}
	for _, k := range app.Properties["demand"].Required {
		if got := check(nil, "demand", k); len(got) != 1 || got[0] != "payload.demand."+k {
			t.Errorf("demand without %s: refused %v", k, got)
		}
	}
	if got := check(nil, "readiness", "path"); len(got) != 1 || got[0] != "payload.readiness.path" {
		t.Errorf("readiness without path: refused %v", got)
	}
	image := command["payload"].(map[string]any)["image"].(string)
	if !regexp.MustCompile(app.Properties["image"].Pattern).MatchString(image) {
		t.Errorf("the example image %q does not match the stated pattern", image)
	}
	if got := check("::://@sha256:"+strings.Repeat("0", 64), "image"); len(got) != 1 || got[0] != "payload.image" {
		t.Errorf("an image within the pattern but no OCI reference: refused %v", got)
	}
}
