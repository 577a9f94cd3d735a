// Package storetest is the conformance suite of application.StreamStore:
// every storage engine's adaptor (SQLite, PostgreSQL) runs Exercise, so both
// obey the same stream rules (docs/site-protocol.md;
// docs/architecture.md#one-port-two-engines). Binding, acknowledgement and rebind run through
// the application's flows (BindStream, ApplyResult, RebindStream) over
// the store's Locked transactions, as the service runs them.
//
// The suite is split by concern, one file each with its table of tests
// (the shape of River's driver conformance suite): append.go, reads.go,
// results.go, binding.go, retention.go and runtimeversion.go; this file
// holds Exercise and the shared fixtures.
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/contexts/executionports/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// NewStore returns a fresh, migrated, empty store for one subtest.
type NewStore func(t *testing.T) application.StreamStore

// testCase is one conformance test: its subtest name and body.
type testCase struct {
	name string
	fn   func(t *testing.T, s application.StreamStore)
}

// Exercise runs every conformance test against stores made by newStore.
func Exercise(t *testing.T, newStore NewStore) {
	var tests []testCase
	tests = append(tests, appendTests...)
	tests = append(tests, readTests...)
	tests = append(tests, resultTests...)
	tests = append(tests, bindingTests...)
	tests = append(tests, retentionTests...)
	tests = append(tests, runtimeVersionTests...)
	tests = append(tests, operatorTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC)

// uuidFor returns a deterministic lower-case UUID for n and a salt.
func uuidFor(salt, n int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", salt, n)
}

// Command builds an observe command with id n (salt separates suites) and
// returns it as application.NewCommand together with the decoded command.
func Command(t testing.TB, salt, n int) (application.NewCommand, siteprotocol.Command) {
	t.Helper()
	raw := fmt.Sprintf(`{"id":%q,"operation":"observe","issued_at":"2026-11-29T10:00:00.123Z","run_id":%q,"attempt_id":%q,"member_id":%q,"project_id":%q,"family":"batch"}`,
		uuidFor(salt, n), uuidFor(salt+1, n), uuidFor(salt+2, n), uuidFor(salt+3, n), uuidFor(salt+4, n))
	cmd, canonical, err := siteprotocol.ParseAppend([]byte(raw))
	if err != nil {
		t.Fatalf("build command: %v", err)
	}
	return application.NewCommand{ID: cmd.ID, Operation: string(cmd.Operation), Digest: cmd.Digest, Canonical: canonical}, cmd
}

// Result builds the encoded result of cmd at sequence with message msg.
func Result(t testing.TB, c application.NewCommand, sequence int64, msg string) application.ReceivedResult {
	t.Helper()
	cmd := siteprotocol.Command{ID: c.ID, Digest: c.Digest, Sequence: sequence}
	r, raw, err := siteprotocol.NewResult(cmd, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, msg, map[string]string{"state": "running"}, nil)
	if err != nil {
		t.Fatalf("build result: %v", err)
	}
	return application.ReceivedResult{
		ReceivedResult: domain.ReceivedResult{CommandID: r.CommandID, CommandDigest: r.CommandDigest, Sequence: r.Sequence, Digest: r.Digest},
		Bytes:          raw,
	}
}

func appendN(t *testing.T, s application.StreamStore, env string, salt, n int) []application.NewCommand {
	t.Helper()
	var out []application.NewCommand
	for i := 1; i <= n; i++ {
		c, _ := Command(t, salt, i)
		a, err := s.Append(context.Background(), env, c, t0)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if a.Sequence != int64(i) || !a.Created {
			t.Fatalf("append %d: got sequence %d created %v", i, a.Sequence, a.Created)
		}
		out = append(out, c)
	}
	return out
}

func mustState(t *testing.T, s application.StreamStore, env string) domain.StreamState {
	t.Helper()
	st, err := s.State(context.Background(), env)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	return st
}

// mustBind binds env's stream to installation as its first pull does
// (only a pull binds a stream; a result never does).
func mustBind(t *testing.T, s application.StreamStore, env, installation string) {
	t.Helper()
	if _, err := application.BindStream(context.Background(), s, env, installation, "environment:"+env, t0); err != nil {
		t.Fatalf("bind %s: %v", env, err)
	}
}

// boundStream appends n commands (salt 1) to alpha-k8s's stream and binds
// it to inst, the start of the result cases.
func boundStream(t *testing.T, s application.StreamStore, n int) []application.NewCommand {
	t.Helper()
	cs := appendN(t, s, "alpha-k8s", 1, n)
	mustBind(t, s, "alpha-k8s", inst)
	return cs
}

// mustApply records r at sequence on alpha-k8s's stream from inst at t0,
// failing the test if it is refused.
func mustApply(t *testing.T, s application.StreamStore, sequence int64, r application.ReceivedResult) application.Acknowledgement {
	t.Helper()
	ack, err := application.ApplyResult(context.Background(), s, "alpha-k8s", inst, sequence, r, t0)
	if err != nil {
		t.Fatalf("ack %d: %v", sequence, err)
	}
	return ack
}

const inst = "6a0f3c1e-0000-4000-8000-000000000001"
