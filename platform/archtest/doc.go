// Package archtest holds the architecture test: the import rules of
// docs/architecture.md#layer-rules, checked on every package of the module
// with `go list`; and the documentation test: every docs/<file>.md#<anchor>
// cited in the repository exists, and nothing cites a document outside it
// (docs/testing.md#documentation-checks).
package archtest
