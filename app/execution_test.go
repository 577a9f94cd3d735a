package app

import (
	"bytes"
	"os"
	"testing"
)

// TestExecutionOpenAPIDocumentIsCommitted proves openapi/execution.yaml is
// what `metallo openapi --role execution` prints (regenerate with `make
// generate-openapi`).
func TestExecutionOpenAPIDocumentIsCommitted(t *testing.T) {
	want, err := OpenAPIYAML([]Role{ExecutionRole()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../openapi/execution.yaml")
	if err != nil {
		t.Fatalf("read the committed document: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("openapi/execution.yaml differs from `metallo openapi --role execution`; run `make generate-openapi` and commit it")
	}
}
