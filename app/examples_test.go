package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap/zaptest"

	"github.com/pharos-metallo/metallo/contexts/executionports/executiontest"
	rphttp "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/httpapi"
	"github.com/pharos-metallo/metallo/platform/database/dbtest"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// The documents' examples (docs/testing.md#the-documents-examples): the
// OpenAPI documents validate with libopenapi's validator, and every
// documented request example, sent in order to a fresh server on each
// engine, answers its documented status with a body the document
// validates.

var updateExamples = flag.Bool("update-examples", false, "rewrite resource_provisioning's examples.json responses with the answers of a fresh SQLite server")

// exampleOrder is the order the examples are sent in: the Site stream's
// story first (Execution appends, the Runtime pulls and answers, an
// operator rebinds), then resource_provisioning's (Beto's events, the
// Site's reports, the reads), then what reads both (planning, binding
// deliveries). An operation with examples missing here fails the test.
var exampleOrder = []string{
	"append-command", "pull-commands", "record-result", "get-command", "get-stream-state", "report-stop", "rebind-stream",
	"list-environments", "list-commands", "get-binding-history",
	"receive-beto-event", "submit-reports", "account-lookup", "submit-accounts", "list-allocations", "project-allocations",
	"allocation-changes", "project-binding-conflicts", "list-inconsistencies", "desired-bindings", "project-accounts", "allocation-accounts",
	"plan-capacity", "get-binding-deliveries",
}

// documentedExample is one example as the served document holds it.
type documentedExample struct {
	operation, name, method, path string
	params                        map[string]paramValue
	body                          any // nil: no body
	status                        int
	response                      any // the documented answer
}

type paramValue struct {
	in    string
	value any
}

// documentedExamples reads every operation's examples from the document
// doc (decoded JSON), keyed by operation ID, each in the order of its
// name's first appearance in the request body's (or else the response's)
// examples.
func documentedExamples(t *testing.T, doc map[string]any) map[string][]documentedExample {
	t.Helper()
	out := map[string][]documentedExample{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, raw := range item.(map[string]any) {
			op, ok := raw.(map[string]any)
			if !ok {
				continue
			}
			id, _ := op["operationId"].(string)
			byName := map[string]*documentedExample{}
			get := func(name string) *documentedExample {
				if byName[name] == nil {
					byName[name] = &documentedExample{operation: id, name: name, method: strings.ToUpper(method), path: path, params: map[string]paramValue{}}
				}
				return byName[name]
			}
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				pm := p.(map[string]any)
				exs, _ := pm["examples"].(map[string]any)
				for name, ex := range exs {
					get(name).params[pm["name"].(string)] = paramValue{in: pm["in"].(string), value: ex.(map[string]any)["value"]}
				}
			}
			if rb, ok := op["requestBody"].(map[string]any); ok {
				content, _ := rb["content"].(map[string]any)
				mt, _ := content["application/json"].(map[string]any)
				exs, _ := mt["examples"].(map[string]any)
				for name, ex := range exs {
					get(name).body = ex.(map[string]any)["value"]
				}
			}
			responses, _ := op["responses"].(map[string]any)
			for status, r := range responses {
				content, _ := r.(map[string]any)["content"].(map[string]any)
				for _, mt := range content {
					exs, _ := mt.(map[string]any)["examples"].(map[string]any)
					for name, ex := range exs {
						code, err := strconv.Atoi(status)
						if err != nil {
							t.Fatalf("%s: response status %q is not a number: %v", id, status, err)
						}
						get(name).status = code
						get(name).response = ex.(map[string]any)["value"]
					}
				}
			}
			for _, name := range slices.Sorted(func(yield func(string) bool) {
				for n := range byName {
					if !yield(n) {
						return
					}
				}
			}) {
				out[id] = append(out[id], *byName[name])
			}
		}
	}
	return out
}

// orderedBy puts examples in the order their names have in order (the
// code's or examples.json's), unknown names last.
func orderedBy(exs []documentedExample, order []string) []documentedExample {
	slices.SortStableFunc(exs, func(a, b documentedExample) int {
		ia, ib := slices.Index(order, a.name), slices.Index(order, b.name)
		if ia < 0 {
			ia = len(order)
		}
		if ib < 0 {
			ib = len(order)
		}
		return ia - ib
	})
	return exs
}

func TestEveryDocumentedExampleAnswersAsDocumentedOnBothEngines(t *testing.T) {
	for _, file := range []string{"execution.yaml", "provisioning.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "openapi", file))
		dbtest.Must(t, err)
		validateDocument(t, file, b)
	}
	var sqliteAnswers map[string]json.RawMessage
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			answers := checkExamples(t, engine)
			if engine == "sqlite" {
				sqliteAnswers = answers
			}
		})
	}
	if *updateExamples && sqliteAnswers != nil {
		writeProvisioningExamples(t, sqliteAnswers)
	}
}

// validateDocument validates an OpenAPI 3.1 document with libopenapi's
// validator (the document against the specification's schema).
func validateDocument(t *testing.T, name string, spec []byte) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", name, errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s: %s", name, e.Message, e.Reason)
		}
		t.FailNow()
	}
	return v
}

// checkExamples serves both central roles on engine, sends every
// documented example in exampleOrder and returns the answers by
// "<operation>/<name>".
func checkExamples(t *testing.T, engine string) map[string]json.RawMessage {
	dir := t.TempDir()
	files := executiontest.WriteFiles(t, dir, []executiontest.Environment{{ID: "alpha-k8s", Site: "alpha", Authority: "https://metallo.example.org"}},
		"site:alpha", "service:beto")
	provURL, execURL := "sqlite:"+filepath.Join(dir, "provisioning.sqlite"), "sqlite:"+filepath.Join(dir, "execution.sqlite")
	if engine == "postgres" {
		provURL, execURL = dbtest.NewPostgres(t), dbtest.NewPostgres(t)
	}
	// Binding delivery is slowed to a day so that nothing but the examples
	// appends to the stream (its first reconcile finds no binding).
	roles := []Role{
		configured(t, ProvisioningRole(), "--provisioning-database-url", provURL, "--waldur-instance", waldurInstance),
		configured(t, ExecutionRole(), "--execution-database-url", execURL, "--resource-owner", "in-process",
			"--binding-delivery-interval", "24h", "--binding-feed-interval", "24h"),
	}
	var srv *httpserver.Server
	app := fxtest.New(t, Compose(roles, Common{Listen: "127.0.0.1:0", KeysFile: files.KeysFile, EnvironmentsFile: files.EnvironmentsFile, Migrate: true}, zaptest.NewLogger(t)), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	base := "http://" + srv.Addr()

	resp, err := http.Get(base + "/openapi.json")
	dbtest.Must(t, err)
	spec, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	dbtest.Must(t, err)
	v := validateDocument(t, "/openapi.json", spec)
	var doc map[string]any
	dbtest.Must(t, json.Unmarshal(spec, &doc))
	examples := documentedExamples(t, doc)

	// Each operation's examples in their declared order.
	declared := map[string][]string{}
	for _, item := range srv.API.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post} {
			if op != nil {
				for _, ex := range httpserver.ExamplesOf(op) {
					declared[op.OperationID] = append(declared[op.OperationID], ex.Name)
				}
			}
		}
	}
	for id := range examples {
		if !slices.Contains(exampleOrder, id) {
			t.Errorf("operation %s has examples but is not in exampleOrder", id)
		}
	}
	keys := map[string]string{
		"environment": files.EnvironmentKeys["alpha-k8s"], "service:execution": files.ServiceKey,
		"site": files.ExtraKeys["site:alpha"], "service:beto": files.ExtraKeys["service:beto"],
	}
	answers := map[string]json.RawMessage{}
	for _, id := range exampleOrder {
		exs := orderedBy(examples[id], declared[id])
		if len(exs) == 0 {
			t.Errorf("operation %s documents no example", id)
			continue
		}
		for _, ex := range exs {
			if ex.status == 0 {
				t.Errorf("%s example %s has no response example", id, ex.name)
				continue
			}
			req := exampleRequest(t, base, ex, keys)
			if ok, errs := v.ValidateHttpRequest(req); !ok {
				for _, e := range errs {
					t.Errorf("%s example %s: the request does not validate: %s: %s", id, ex.name, e.Message, e.Reason)
				}
			}
			req = exampleRequest(t, base, ex, keys) // the validator read the body
			resp, err := http.DefaultClient.Do(req)
			dbtest.Must(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			dbtest.Must(t, err)
			if resp.StatusCode != ex.status {
				t.Errorf("%s example %s answered %d %s, documented %d", id, ex.name, resp.StatusCode, body, ex.status)
				continue
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if ok, errs := v.ValidateHttpResponse(exampleRequest(t, base, ex, keys), resp); !ok {
				for _, e := range errs {
					t.Errorf("%s example %s: the answer %s does not validate: %s: %s", id, ex.name, body, e.Message, e.Reason)
				}
			}
			answers[id+"/"+ex.name] = body
			if *updateExamples {
				continue
			}
			documented, err := json.Marshal(ex.response)
			dbtest.Must(t, err)
			doc := &http.Response{StatusCode: ex.status, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(documented))}
			if ok, errs := v.ValidateHttpResponse(exampleRequest(t, base, ex, keys), doc); !ok {
				for _, e := range errs {
					t.Errorf("%s example %s: the documented answer does not validate: %s: %s", id, ex.name, e.Message, e.Reason)
				}
			}
		}
	}
	return answers
}

// exampleRequest builds the request of example ex at base, with the key of
// the principal its route admits.
func exampleRequest(t *testing.T, base string, ex documentedExample, keys map[string]string) *http.Request {
	t.Helper()
	path := ex.path
	q := url.Values{}
	header := http.Header{}
	for name, p := range ex.params {
		s := fmt.Sprint(p.value)
		switch p.in {
		case "path":
			path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(s))
		case "query":
			q.Set(name, s)
		case "header":
			header.Set(name, s)
		}
	}
	if strings.Contains(path, "{") {
		t.Fatalf("%s example %s leaves a path parameter unset: %s", ex.operation, ex.name, path)
	}
	target := base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var body io.Reader
	if ex.body != nil {
		b, err := json.Marshal(ex.body)
		dbtest.Must(t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(ex.method, target, body)
	dbtest.Must(t, err)
	req.Header = header
	if ex.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	key := keys["service:execution"]
	switch {
	case strings.HasPrefix(ex.path, "/site/"):
		key = keys["environment"]
	case ex.path == "/resource-provisioning/events/beto":
		key = keys["service:beto"]
	case strings.HasPrefix(ex.path, "/resource-provisioning/{site}"):
		key = keys["site"]
	case strings.HasPrefix(ex.path, "/resource-provisioning/"):
		key = keys["service:beto"] // any service principal reads
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}

// writeProvisioningExamples rewrites examples.json with answers as the
// responses (make generate then writes them into the document).
func writeProvisioningExamples(t *testing.T, answers map[string]json.RawMessage) {
	t.Helper()
	recs, err := rphttp.ExampleRecords()
	dbtest.Must(t, err)
	for i, r := range recs {
		if a, ok := answers[r.Operation+"/"+r.Name]; ok {
			var v any
			dbtest.Must(t, json.Unmarshal(a, &v))
			b, err := json.Marshal(v)
			dbtest.Must(t, err)
			recs[i].Response = b
		}
	}
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, r := range recs {
		b, err := json.MarshalIndent(r, "  ", "  ")
		dbtest.Must(t, err)
		out.WriteString("  ")
		out.Write(b)
		if i < len(recs)-1 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	out.WriteString("]\n")
	dbtest.Must(t, os.WriteFile(filepath.Join("..", "contexts", "resourceprovisioning", "adaptors", "httpapi", "examples", "examples.json"), out.Bytes(), 0o644))
}
