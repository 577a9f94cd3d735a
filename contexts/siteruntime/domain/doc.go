// Package domain holds the Site Runtime's values and rules: the delivery
// checkpoint and its pending command, the stop reasons of the ordered
// worker, member bindings and their generation rules, native records, and
// the one-time installation decision. It imports only the standard library
// and platform/siteprotocol (whose wire values are the domain's values).
//
// Rule sources: ../shared/design/site-runtime.md ("The ordered worker",
// "Journals") and seed 000 ("Application ports and flows", "Persistence and
// compatibility").
package domain
