// Package archtest holds the architecture test: the import rules of
// ../shared/design/README.md ("Rules of the house"), checked on every
// package of the module with `go list`.
package archtest
