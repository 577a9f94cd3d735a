package journal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

var bound = domain.Binding{Environment: "alpha-k8s", Authority: "https://site.example", InstallationID: "11111111-1111-4111-8111-111111111111"}

func install(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "journals")
	s, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Initialise(context.Background(), bound); err != nil {
		t.Fatal(err)
	}
	return dir
}

func open(t testing.TB, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(context.Background(), dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func pulled(t testing.TB, seq int64, n int) domain.Pending {
	t.Helper()
	raw := fmt.Sprintf(`{"id":"%08x-0000-4000-8000-000000000001","operation":"observe","issued_at":"2026-11-29T10:00:00Z",
		"run_id":"5b0e2f9c-3a51-4f0e-9d7a-2f7c8e1b6a10","attempt_id":"7d1f0c2a-6c4e-4b8f-a2d1-0e9f3b5c7a24",
		"member_id":"9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80","project_id":"0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9","family":"batch"}`, n)
	c, canonical, err := siteprotocol.ParseAppend([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	served, _ := siteprotocol.EncodeStored(canonical, seq, c.Digest)
	cmd, err := siteprotocol.ParsePulled(served)
	if err != nil {
		t.Fatal(err)
	}
	return domain.Pending{Sequence: seq, Raw: served, Command: cmd}
}

func result(t testing.TB, p domain.Pending, message string) ([]byte, string) {
	t.Helper()
	r, b, err := siteprotocol.NewResult(p.Command, siteprotocol.OutcomeSucceeded, siteprotocol.ReasonObserved, message, siteprotocol.ObserveDetail{State: siteprotocol.StateRunning}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, r.Digest
}

// deliver runs one command through commits #1..#3.
func deliver(t *testing.T, j *journal.Journal, seq int64) {
	t.Helper()
	ctx := context.Background()
	p := pulled(t, seq, int(seq))
	if err := j.SavePending(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	b, d := result(t, p, fmt.Sprintf("result message %d", seq))
	if err := j.SaveResult(ctx, seq, b, d); err != nil {
		t.Fatal(err)
	}
	if err := j.Acknowledge(ctx, domain.Acknowledgement{Sequence: seq, ResultDigest: d}); err != nil {
		t.Fatal(err)
	}
}

// snapshot maps every file of dir (-wal and -shm included) to its SHA-256.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return out
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	var diff []string
	for k, v := range before {
		if after[k] != v {
			diff = append(diff, k+" changed")
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diff = append(diff, k+" appeared")
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Fatalf("journal directory bytes changed: %s", strings.Join(diff, ", "))
	}
}

func TestInstallCreatesTheThreeJournalsBoundToTheInstallationAtCheckpointZero(t *testing.T) {
	dir := install(t)
	for _, f := range domain.JournalFiles() {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("directory holds %d entries; want the three journals only", len(entries))
	}
	j := open(t, dir)
	cp, err := j.Restore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cp.Binding != bound || cp.Acknowledged != 0 || cp.Pending != nil {
		t.Fatalf("restored %+v", cp)
	}
	for _, f := range domain.JournalFiles() {
		db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, f)+"?mode=ro")
		var mode, sync string
		_ = db.QueryRow("PRAGMA journal_mode").Scan(&mode)
		_ = sync
		var version int
		if err := db.QueryRow("SELECT schema_version FROM journal_meta").Scan(&version); err != nil || version != journal.SchemaVersion || mode != "wal" {
			t.Fatalf("%s: version %d mode %s err %v", f, version, mode, err)
		}
		_ = db.Close()
	}
}

func TestInstallRefusesADirectoryThatHoldsAJournal(t *testing.T) {
	dir := install(t)
	s, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := snapshot(t, dir)
	if err := s.Initialise(context.Background(), bound); err == nil {
		t.Fatal("initialised over existing journals")
	}
	sameSnapshot(t, before, snapshot(t, dir))
}

func TestOpenNeverCreatesAMissingJournal(t *testing.T) {
	dir := t.TempDir()
	if _, err := journal.Open(context.Background(), dir, journal.Options{}); !errors.Is(err, journal.ErrNotInstalled) {
		t.Fatalf("want ErrNotInstalled, got %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("open created %d files", len(entries))
	}
	if _, err := journal.Open(context.Background(), filepath.Join(dir, "absent"), journal.Options{}); err == nil {
		t.Fatal("opened a missing directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("open created the missing directory")
	}
}

func TestPendingCommandAndExactResultSurviveAReopenAndWritesAreIdempotent(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	deliver(t, j, 1)
	p := pulled(t, 2, 2)
	if err := j.SavePending(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.SavePending(ctx, p, nil); err != nil {
		t.Fatalf("repeating a committed save: %v", err)
	}
	b, d := result(t, p, "exact bytes")
	if err := j.SaveResult(ctx, 2, b, d); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveResult(ctx, 2, b, d); err != nil {
		t.Fatalf("repeating a committed result: %v", err)
	}
	other, od := result(t, p, "other bytes")
	if err := j.SaveResult(ctx, 2, other, od); !errors.Is(err, application.ErrJournalIntegrity) {
		t.Fatalf("a second, different result: %v", err)
	}
	if err := j.SavePending(ctx, pulled(t, 3, 3), nil); !errors.Is(err, application.ErrJournalIntegrity) {
		t.Fatalf("a second pending command: %v", err)
	}
	_ = j.Close()

	j = open(t, dir)
	cp, err := j.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Acknowledged != 1 || cp.Pending == nil || cp.Pending.Sequence != 2 || !bytes.Equal(cp.Pending.Result, b) || !bytes.Equal(cp.Pending.Raw, p.Raw) {
		t.Fatalf("restored %+v", cp)
	}
	ack := domain.Acknowledgement{Sequence: 2, ResultDigest: d}
	if err := j.Acknowledge(ctx, domain.Acknowledgement{Sequence: 2, ResultDigest: od}); !errors.Is(err, application.ErrJournalIntegrity) {
		t.Fatalf("an inexact acknowledgement cleared the pending command: %v", err)
	}
	if err := j.Acknowledge(ctx, ack); err != nil {
		t.Fatal(err)
	}
	if err := j.Acknowledge(ctx, ack); err != nil {
		t.Fatalf("repeating a committed acknowledgement: %v", err)
	}
	if cp, _ := j.Restore(ctx); cp.Acknowledged != 2 || cp.Pending != nil {
		t.Fatalf("after acknowledgement %+v", cp)
	}
}

func TestFoldedAcknowledgementClearsAndSavesTheNextCommandInOneCommit(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	p1 := pulled(t, 1, 1)
	if err := j.SavePending(ctx, p1, nil); err != nil {
		t.Fatal(err)
	}
	b, d := result(t, p1, "one")
	if err := j.SaveResult(ctx, 1, b, d); err != nil {
		t.Fatal(err)
	}
	before := j.Commits()
	if err := j.SavePending(ctx, pulled(t, 2, 2), &domain.Acknowledgement{Sequence: 1, ResultDigest: d}); err != nil {
		t.Fatal(err)
	}
	if j.Commits() != before+1 {
		t.Fatalf("folded save took %d commits", j.Commits()-before)
	}
	cp, _ := j.Restore(ctx)
	if cp.Acknowledged != 1 || cp.Pending.Sequence != 2 {
		t.Fatalf("restored %+v", cp)
	}
}

func TestMemberBindingsAndNativeRecordsAreStoredWithDigests(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	b := domain.MemberBinding{BindingID: "e41f0000-0000-4000-8000-000000000001", Generation: 2, Revision: 3, PartyID: "p", ProjectID: "q", Namespace: "project-q", Account: "member-p", AppliedBy: "c"}
	if err := j.Save(ctx, []domain.MemberBinding{b}); err != nil {
		t.Fatal(err)
	}
	got, found, err := j.Resolve(ctx, siteprotocol.AccountRef{BindingID: b.BindingID, Generation: 2})
	if err != nil || !found || got != b {
		t.Fatalf("resolved %+v %v %v", got, found, err)
	}
	if _, found, _ := j.Resolve(ctx, siteprotocol.AccountRef{BindingID: b.BindingID, Generation: 1}); found {
		t.Fatal("resolved a generation never stored")
	}
	rec := domain.NativeRecord{AttemptID: "a", Kind: "Job", Namespace: "project-q", Name: "attempt-a", UID: "u", Phase: "submitted", CommandID: "c", Sequence: 4, Spec: []byte(`{"x":1}`)}
	if err := j.Batch().SaveRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := j.Services().SaveRecord(ctx, domain.NativeRecord{AttemptID: "a", Kind: "Deployment", Name: "attempt-a", Spec: []byte("{}"), SpecDigest: strings.Repeat("0", 64)}); err == nil {
		t.Fatal("saved a record whose spec digest does not match")
	}
	recs, err := j.Batch().Records(ctx, "a")
	if err != nil || len(recs) != 1 || recs[0].UID != "u" || recs[0].SpecDigest == "" {
		t.Fatalf("records %+v %v", recs, err)
	}
	if recs, _ := j.Services().Records(ctx, "a"); len(recs) != 0 {
		t.Fatal("a batch record appeared in services.sqlite")
	}
	_ = j.Close()
	open(t, dir) // every digest verifies on the next start
}

func discard(t *testing.T, dir string, want domain.Binding) ([]string, error) {
	t.Helper()
	s, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.DiscardUnfinished(context.Background(), want)
}

// An interrupted initialisation's fresh files are discarded (and
// Initialise then succeeds); a partial set that has had a command, or is
// bound to another environment, is refused and left byte for byte.
func TestDiscardUnfinishedRemovesOnlyFreshFilesOfTheConfiguredBinding(t *testing.T) {
	dir := install(t)
	if err := os.Remove(filepath.Join(dir, domain.DeliveryFile)); err != nil {
		t.Fatal(err)
	}
	other := bound
	other.Environment = "beta-k8s"
	if _, err := discard(t, dir, other); err != nil {
		t.Fatalf("fresh jobs+services (no binding in them) refused: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("%d files left", len(entries))
	}

	dir = install(t)
	if err := os.Remove(filepath.Join(dir, domain.JobsFile)); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	if _, err := discard(t, dir, other); !errors.Is(err, application.ErrInstallationMismatch) {
		t.Fatalf("delivery.sqlite of another binding: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, dir))
	gone, err := discard(t, dir, bound)
	if err != nil || len(gone) != 2 {
		t.Fatalf("fresh delivery+services: %v %v", gone, err)
	}
	s, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Initialise(context.Background(), bound); err != nil {
		t.Fatalf("initialise after discard: %v", err)
	}
	_ = s.Close()

	j := open(t, dir)
	deliver(t, j, 1)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, domain.JobsFile)); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, dir)
	if _, err := discard(t, dir, bound); err == nil || !strings.Contains(err.Error(), "has had commands") {
		t.Fatalf("a partial set with a delivered command: %v", err)
	}
	sameSnapshot(t, before, snapshot(t, dir))
}

// TestLiveBindingsOfAnAccountAreReadAsDelivered: the journal keeps a
// binding as delivered (a Slurm account and its Unix uid verbatim) and
// answers the live bindings naming an account, never a retired one
// (docs/site-protocol.md#member-identity-by-backend).
func TestLiveBindingsOfAnAccountAreReadAsDelivered(t *testing.T) {
	dir := install(t)
	ctx := context.Background()
	j := open(t, dir)
	live := domain.MemberBinding{BindingID: "e41f0000-0000-4000-8000-000000000001", Generation: 1, Revision: 2, PartyID: "p", ProjectID: "q", Namespace: "proj-a", Account: "jdoe", AccountUID: "1001", AppliedBy: "c1"}
	old := domain.MemberBinding{BindingID: "e41f0000-0000-4000-8000-000000000002", Generation: 1, Revision: 1, PartyID: "r", ProjectID: "q", Namespace: "proj-a", Account: "jdoe", AccountUID: "1000", Retired: true, AppliedBy: "c0"}
	other := domain.MemberBinding{BindingID: "e41f0000-0000-4000-8000-000000000003", Generation: 1, Revision: 1, PartyID: "s", ProjectID: "q", Namespace: "proj-a", Account: "csmith", AccountUID: "1002", AppliedBy: "c2"}
	if err := j.Save(ctx, []domain.MemberBinding{live, old, other}); err != nil {
		t.Fatal(err)
	}
	got, err := j.LiveOfAccount(ctx, "jdoe")
	if err != nil || len(got) != 1 || got[0] != live {
		t.Fatalf("live bindings of jdoe %+v %v, want only %+v", got, err, live)
	}
	if got, err := j.LiveOfAccount(ctx, "nobody"); err != nil || len(got) != 0 {
		t.Fatalf("live bindings of an account never bound %+v %v", got, err)
	}
}
