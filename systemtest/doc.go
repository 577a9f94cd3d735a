// Package systemtest is the root of the project's system tests: the
// metallo binary's roles as real processes, composed by app/ and its
// Runtime test binary (testbin), outside the contexts they exercise
// (docs/testing.md#process-and-kill-tests). Its packages are test
// support, never imported by production code or the demo (the
// architecture test, platform/archtest, checks it):
//
//   - harness: the process plumbing (build, start, stop, kill, a recording
//     proxy, metrics scrapes) and NewSetup, the one setup of the process
//     tests and the native benchmarks (a Site project namespace set up as
//     the Site agent would, the execution role, an installed Runtime);
//   - testbin: the runtime role with an executor standing in for a native
//     system (the one package here that imports app/);
//   - benchruntime: `make bench-runtime`;
//   - runtimetest: the Runtime's system tests with testbin;
//   - processtest: the real metallo binary against the local cluster (the
//     kill tests of every family, the Runtime Pod, the bounds).
package systemtest
