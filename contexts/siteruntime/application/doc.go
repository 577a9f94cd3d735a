// Package application is the Site Runtime's application layer: the ports it
// needs (SiteControl, RuntimeJournal, CommandExecutor, MemberBindings,
// BatchRecords, ServiceRecords, InstallationRecord, Clock, Heartbeat,
// Failpoints, Events), the ordered Worker that delivers the stream's
// commands exactly once, the executor Registry routed by operation and
// family, the bind-member and retire-member executors, the one-time
// Installer and the read-only Checker behind `metallo runtime check`, and
// the family framework (Family, its capability interfaces and the one
// Executor every workload family runs on; the families themselves are in
// application/families: docs/architecture.md#executor-families).
//
// It imports only the standard library, its own domain and
// platform/siteprotocol. Rule sources: docs/site-runtime.md#ports and
// docs/site-protocol.md.
package application
