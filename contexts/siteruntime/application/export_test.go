package application

// Backoff exposes backoff to tests.
var Backoff = backoff
