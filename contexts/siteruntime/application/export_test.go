package application

// Backoff exposes backoff to tests.
var Backoff = backoff

// BeginWait exposes beginWait to tests: a bounded wait of the command ctx
// carries.
var BeginWait = beginWait
