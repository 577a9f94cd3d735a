// Package domain holds the Site Runtime's values and rules: the delivery
// checkpoint and its pending command, the stop reasons of the ordered
// worker, member bindings and their generation rules, native records, and
// the one-time installation decision. It imports only the standard library
// and platform/siteprotocol (whose wire values are the domain's values).
//
// Rule sources: docs/site-runtime.md#the-ordered-worker,
// docs/site-runtime.md#journals and docs/site-runtime.md#installation.
package domain
