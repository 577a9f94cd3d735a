// Package runtimetest holds the Site Runtime's system tests: the Runtime
// binary (systemtest/testbin: the real runtime role plus an executor
// standing in for a native system) as a real subprocess against a real
// execution role subprocess on loopback, through a recording proxy. The
// kill test, the lost acknowledgement, every stop condition and journal
// damage are proved here; systemtest/harness holds the process plumbing
// and systemtest/benchruntime the benchmark.
package runtimetest
