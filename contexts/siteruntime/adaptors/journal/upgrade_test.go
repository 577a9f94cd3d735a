package journal_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/failpoint"
)

// version1 returns a closed version-1 journal set holding rows of every
// kind: two delivered commands, a third pending with its saved result, a
// member binding and a native record.
func version1(t *testing.T) string {
	t.Helper()
	return setAt(t, 1)
}

// setAt returns a closed journal set at schema version (1 to 3) holding
// the rows version1 describes.
func setAt(t *testing.T, version int64) string {
	t.Helper()
	dir := populated(t, true)
	j := open(t, dir)
	if err := j.Save(context.Background(), []domain.MemberBinding{{BindingID: "b1", Generation: 1, Revision: 2, PartyID: "p", ProjectID: "q",
		Namespace: "project-a", Account: "member-p", AppliedBy: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := journal.DowngradeTo(context.Background(), dir, version); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rows dumps every row of every table but journal_meta in every journal
// file of the closed set dir, digests included, in a stable order.
func rows(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range domain.JournalFiles() {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, f)+"?mode=ro&immutable=1")
		if err != nil {
			t.Fatal(err)
		}
		tables := query(t, db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'journal_meta' ORDER BY name")
		for _, tb := range tables {
			cols := query(t, db, "SELECT name FROM pragma_table_info('"+tb[0]+"') ORDER BY cid")
			for _, r := range query(t, db, "SELECT * FROM "+tb[0]+" ORDER BY 1, 2") {
				var kept []string
				for i, v := range r {
					// A column an upgrade added reads as its default in
					// every row the upgrade kept (version 3's account_uid,
					// version 4's started_at).
					if (cols[i][0] == "account_uid" || cols[i][0] == "started_at") && v == "" {
						continue
					}
					kept = append(kept, v)
				}
				out[f+"/"+tb[0]] = append(out[f+"/"+tb[0]], strings.Join(kept, "|"))
			}
		}
		_ = db.Close()
	}
	return out
}

func query(t *testing.T, db *sql.DB, q string) [][]string {
	t.Helper()
	rs, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	var out [][]string
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := make([]string, len(cols))
		for i, v := range vals {
			r[i] = fmt.Sprintf("%v", v)
		}
		out = append(out, r)
	}
	return out
}

func versions(t *testing.T, dir string) []int {
	t.Helper()
	var out []int
	for _, f := range domain.JournalFiles() {
		db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, f)+"?mode=ro&immutable=1")
		var v int
		if err := db.QueryRow("SELECT schema_version FROM journal_meta").Scan(&v); err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		out = append(out, v)
	}
	return out
}

func sameRows(t *testing.T, before, after map[string][]string) {
	t.Helper()
	for k, v := range before {
		if !slices.Equal(v, after[k]) {
			t.Fatalf("%s changed in the upgrade:\nbefore %q\nafter  %q", k, v, after[k])
		}
	}
}

// A version-1 journal set: Open (serve) refuses it naming the upgrade and
// changes no byte; the installation hook's Upgrade brings every file to
// the current version in place, keeping every row and its digest, and the
// upgraded set opens with the same checkpoint and saved result; a second
// Upgrade does nothing (docs/site-runtime.md#schema-versions-and-upgrades).
func TestAVersion1SetIsRefusedNamingTheUpgradeAndTheUpgradeKeepsEveryRow(t *testing.T) {
	ctx := context.Background()
	dir := version1(t)
	before, files := rows(t, dir), snapshot(t, dir)
	_, err := journal.Open(ctx, dir, journal.Options{})
	var up *journal.UpgradeRequiredError
	if !errors.As(err, &up) || !errors.Is(err, journal.ErrUpgradeRequired) || up.Version != 1 ||
		!strings.Contains(err.Error(), "metallo runtime install") || !strings.Contains(err.Error(), domain.DeliveryFile) {
		t.Fatalf("Open of a version-1 set: %v; want the upgrade named", err)
	}
	sameSnapshot(t, files, snapshot(t, dir))

	set, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := set.Binding(ctx); err != nil || b != bound {
		t.Fatalf("the installer reads the binding of a version-1 set: %+v, %v", b, err)
	}
	done, err := set.Upgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := journal.SchemaVersion
	want := []string{fmt.Sprintf("delivery.sqlite 1→%d", v), fmt.Sprintf("jobs.sqlite 1→%d", v), fmt.Sprintf("services.sqlite 1→%d", v)}
	slices.Sort(done)
	if !slices.Equal(done, want) {
		t.Fatalf("upgraded %q, want %q", done, want)
	}
	if again, err := set.Upgrade(ctx); err != nil || len(again) != 0 {
		t.Fatalf("a second upgrade: %q, %v", again, err)
	}
	_ = set.Close()
	if v := versions(t, dir); !slices.Equal(v, []int{int(journal.SchemaVersion), int(journal.SchemaVersion), int(journal.SchemaVersion)}) {
		t.Fatalf("versions after the upgrade: %v", v)
	}
	after := rows(t, dir)
	sameRows(t, before, after)
	if len(after[domain.JobsFile+"/terminal_states"]) != 0 {
		t.Fatal("the upgrade wrote terminal states")
	}
	j := open(t, dir)
	cp, err := j.Restore(ctx)
	if err != nil || cp.Acknowledged != 2 || cp.Pending == nil || !strings.Contains(string(cp.Pending.Result), "saved result bytes 3") {
		t.Fatalf("restored after the upgrade: %+v, %v", cp, err)
	}
	// The new table is in use.
	if saved, err := j.Batch().SaveTerminal(ctx, domain.TerminalState{AttemptID: "a", Kind: "Job", Name: "attempt-a", UID: "u", State: "succeeded"}); err != nil || !saved {
		t.Fatalf("save a terminal state after the upgrade: %v, %v", saved, err)
	}
}

// A fresh installation and an upgraded version-1 set have the same schema.
func TestAFreshSetAndAnUpgradedOneHaveTheSameSchema(t *testing.T) {
	fresh, upgraded := install(t), version1(t)
	set, err := journal.OpenSet(upgraded)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Upgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = set.Close()
	for _, f := range domain.JournalFiles() {
		schema := func(dir string) [][]string {
			db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, f)+"?mode=ro&immutable=1")
			defer db.Close()
			return query(t, db, "SELECT type, name, sql FROM sqlite_master ORDER BY name")
		}
		if a, b := fmt.Sprint(schema(fresh)), fmt.Sprint(schema(upgraded)); a != b {
			t.Fatalf("%s: fresh schema %s\nupgraded %s", f, a, b)
		}
	}
}

const upgradeHelperEnv = "METALLO_JOURNAL_UPGRADE_HELPER"

// TestMain runs the package's tests, or — in the kill test's child process
// (upgradeHelperEnv names the journal directory) — only the upgrade, which
// its failpoint kills; the child is no test of its own, so a normal run
// neither runs nor skips one for it.
func TestMain(m *testing.M) {
	if dir := os.Getenv(upgradeHelperEnv); dir != "" {
		if err := upgradeChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func upgradeChild(dir string) error {
	fp, err := failpoint.Parse(os.Getenv(failpoint.EnvVar), application.InstallFailpointNames(), os.Stderr)
	if err != nil {
		return err
	}
	set, err := journal.OpenSet(dir)
	if err != nil {
		return err
	}
	set.SetFailpoints(fp)
	_, err = set.Upgrade(context.Background())
	return err
}

// upgradeLeftovers lists the upgrade's own files left in dir: upgraded
// copies and the commit marker.
func upgradeLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".upgrade") || strings.Contains(e.Name(), ".sqlite.upgrade") {
			out = append(out, e.Name())
		}
	}
	return out
}

// An upgrade SIGKILLed at every step of its sequence — before the copies,
// after each upgraded copy, after the commit marker, after each rename and
// before the marker's removal — from version 1 and from version 3 (the
// previous release): the recovery every open runs (serve's Open for one,
// the installation hook's OpenSet for the other) leaves every file at the
// old version (killed before the marker) or every file at the new one
// (after it), never a mix, with no copy or marker left and every row and
// digest kept; serve refuses the old set naming the upgrade and opens the
// new one, and the next install completes (upgrading the old set, nothing
// to do for the new one) (docs/site-runtime.md#schema-versions-and-upgrades).
func TestAnUpgradeKilledAtEveryStepLeavesTheOldSetOrTheNewOneNeverAMix(t *testing.T) {
	type point struct {
		name      string
		n         int
		committed bool
	}
	points := []point{{application.FailUpgradeBeforeCopies, 1, false}}
	for n := 1; n <= 3; n++ {
		points = append(points, point{application.FailUpgradeAfterCopy, n, false})
	}
	points = append(points, point{application.FailUpgradeAfterMarker, 1, true})
	for n := 1; n <= 3; n++ {
		points = append(points, point{application.FailUpgradeAfterRename, n, true})
	}
	points = append(points, point{application.FailUpgradeBeforeMarkerRemoval, 1, true})
	for _, from := range []int64{1, 3} {
		for _, p := range points {
			t.Run(fmt.Sprintf("from version %d/%s@%d", from, p.name, p.n), func(t *testing.T) {
				ctx := context.Background()
				dir := setAt(t, from)
				before := rows(t, dir)
				cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
				cmd.Env = append(os.Environ(), upgradeHelperEnv+"="+dir, fmt.Sprintf("%s=%s@%d", failpoint.EnvVar, p.name, p.n))
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the upgrade was not killed at %s@%d: %v\n%s", p.name, p.n, err, out)
				}
				want := from
				if p.committed {
					want = journal.SchemaVersion
				}
				// Recovery: serve's Open for version 1, the hook's OpenSet
				// for version 2.
				if from == 1 {
					j, err := journal.Open(ctx, dir, journal.Options{})
					switch {
					case p.committed && err != nil:
						t.Fatalf("Open of a set whose upgrade was committed: %v", err)
					case p.committed:
						_ = j.Close()
					case !errors.Is(err, journal.ErrUpgradeRequired):
						t.Fatalf("Open of a set whose upgrade was not committed: %v; want the upgrade named", err)
					}
				} else {
					set, err := journal.OpenSet(dir)
					if err != nil {
						t.Fatal(err)
					}
					_ = set.Close()
				}
				if left := upgradeLeftovers(t, dir); len(left) != 0 {
					t.Fatalf("left after the recovery: %q", left)
				}
				for i, v := range versions(t, dir) {
					if int64(v) != want {
						t.Fatalf("killed at %s@%d: %s at version %d, want every file at %d: %v", p.name, p.n,
							domain.JournalFiles()[i], v, want, versions(t, dir))
					}
				}
				sameRows(t, before, rows(t, dir))

				set, err := journal.OpenSet(dir)
				if err != nil {
					t.Fatal(err)
				}
				done, err := set.Upgrade(ctx)
				_ = set.Close()
				if wantDone := map[bool]int{false: 3, true: 0}[p.committed]; err != nil || len(done) != wantDone {
					t.Fatalf("the next install's upgrade: %q, %v; want %d files upgraded", done, err, wantDone)
				}
				if v := versions(t, dir); !slices.Equal(v, []int{journal.SchemaVersion, journal.SchemaVersion, journal.SchemaVersion}) {
					t.Fatalf("versions after the next install: %v", v)
				}
				sameRows(t, before, rows(t, dir))
				j := open(t, dir)
				if cp, err := j.Restore(ctx); err != nil || cp.Acknowledged != 2 || cp.Pending == nil || cp.Pending.Result == nil {
					t.Fatalf("restored: %+v, %v", cp, err)
				}
			})
		}
	}
}

// A version-2 crash image — the previous release's Runtime killed with
// committed transactions still in each file's write-ahead log and its
// index (-shm) — upgrades with every row its log holds: the originals'
// logs are checkpointed before they are copied, and no stale -wal or -shm
// is left to meet a renamed copy, so the upgraded set opens.
func TestAnUpgradeOfACrashImageKeepsWhatTheLogsHoldAndLeavesNoStaleLog(t *testing.T) {
	ctx := context.Background()
	image := filepath.Join(t.TempDir(), "image")
	if err := journal.DowngradeToCrashImage(ctx, populated(t, true), image, 2); err != nil {
		t.Fatal(err)
	}
	for _, f := range domain.JournalFiles() {
		if _, err := os.Stat(filepath.Join(image, f+"-wal")); err != nil {
			t.Fatalf("the crash image has no log for %s: %v", f, err)
		}
	}
	set, err := journal.OpenSet(image)
	if err != nil {
		t.Fatal(err)
	}
	before := rowsThroughLog(t, image)
	done, err := set.Upgrade(ctx)
	_ = set.Close()
	if err != nil || len(done) != 3 || done[0] != fmt.Sprintf("jobs.sqlite 2→%d", journal.SchemaVersion) {
		t.Fatalf("upgrade of the crash image: %q, %v", done, err)
	}
	for _, f := range domain.JournalFiles() {
		for _, suffix := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(filepath.Join(image, f+suffix)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s%s is left beside the upgraded file: %v", f, suffix, err)
			}
		}
	}
	sameRows(t, before, rows(t, image))
	j := open(t, image)
	if cp, err := j.Restore(ctx); err != nil || cp.Acknowledged != 2 || cp.Pending == nil || cp.Pending.Result == nil {
		t.Fatalf("restored: %+v, %v", cp, err)
	}
}

// rowsThroughLog is rows of a copy of dir that SQLite has read through
// its logs (the copy opened read-write once, which checkpoints them).
func rowsThroughLog(t *testing.T, dir string) map[string][]string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "read")
	if err := os.Mkdir(cp, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range domain.JournalFiles() {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(cp, f)+"?mode=rw")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
	}
	return rows(t, cp)
}

// A set with one file of an unknown schema version: the upgrade refuses it
// naming the file and the version, and writes nothing (no copy, no
// marker, every byte as it was).
func TestAnUpgradeRefusesAFileOfAnUnknownVersionAndWritesNothing(t *testing.T) {
	dir := setAt(t, 2)
	setVersion(t, filepath.Join(dir, domain.ServicesFile), 99)
	files := snapshot(t, dir)
	set, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	done, err := set.Upgrade(context.Background())
	_ = set.Close()
	if err == nil || !errors.Is(err, application.ErrJournalIntegrity) || !strings.Contains(err.Error(), "unknown schema version 99") ||
		!strings.Contains(err.Error(), domain.ServicesFile) || len(done) != 0 {
		t.Fatalf("upgrade of a set with a file at version 99: %q, %v", done, err)
	}
	sameSnapshot(t, files, snapshot(t, dir))
}

// A journal set of the previous release (schema version 2, before
// delivery.sqlite's account_uid): serve refuses it naming the upgrade and
// what version 3 adds; the installation hook adds the column,
// raising every file to version 3, keeping every row and digest; the upgraded set stores and reads back a
// binding's account UID (docs/site-runtime.md#schema-versions-and-upgrades).
func TestAVersion2SetUpgradesDeliveryKeepingEveryRowAndThenStoresTheAccountUID(t *testing.T) {
	ctx := context.Background()
	dir := populated(t, true)
	j := open(t, dir)
	if err := j.Save(ctx, []domain.MemberBinding{{BindingID: "b1", Generation: 1, Revision: 2, PartyID: "p", ProjectID: "q",
		Namespace: "project-a", Account: "member-p", AppliedBy: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := journal.DowngradeTo(ctx, dir, 2); err != nil {
		t.Fatal(err)
	}
	before := rows(t, dir)
	_, err := journal.Open(ctx, dir, journal.Options{})
	var up *journal.UpgradeRequiredError
	if !errors.As(err, &up) || up.Version != 2 || !strings.Contains(err.Error(), "account_uid") || !strings.Contains(err.Error(), "started_at") {
		t.Fatalf("Open of a version-2 set: %v; want the upgrades to versions 3 and 4 named", err)
	}
	set, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	done, err := set.Upgrade(ctx)
	_ = set.Close()
	if err != nil || !slices.Equal(done, []string{"jobs.sqlite 2→4", "services.sqlite 2→4", "delivery.sqlite 2→4"}) {
		t.Fatalf("upgrade of a version-2 set: %q, %v", done, err)
	}
	sameRows(t, before, rows(t, dir))
	j = open(t, dir)
	got, err := j.Generations(ctx, "b1")
	if err != nil || len(got) != 1 || got[0].AccountUID != "" || got[0].Revision != 2 {
		t.Fatalf("the kept binding: %+v, %v", got, err)
	}
	uid := "b3c1a2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
	if err := j.Save(ctx, []domain.MemberBinding{{BindingID: "b1", Generation: 1, Revision: 3, PartyID: "p", ProjectID: "q",
		Namespace: "project-a", Account: "member-p", AccountUID: uid, AppliedBy: "d"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Generations(ctx, "b1"); err != nil || len(got) != 1 || got[0].AccountUID != uid {
		t.Fatalf("the binding with its account UID: %+v, %v", got, err)
	}
}

// A journal set of the previous release (schema version 3, before
// delivery.sqlite's pending kept its command's start) holding a pending
// command with its saved result: serve refuses it naming the upgrade and
// what version 4 adds; the installation hook adds started_at, keeping
// every row and digest (the pending row's digest covers started_at only
// when it is set); the kept command restores without a start (its waits
// count from its recovery), and the upgraded set saves the next command's
// start and reads it back, verified on every open
// (docs/site-runtime.md#schema-versions-and-upgrades,
// docs/site-runtime.md#command-bounds).
func TestAVersion3SetUpgradesThePendingCommandAndThenKeepsEachCommandsStart(t *testing.T) {
	ctx := context.Background()
	dir := setAt(t, 3)
	before := rows(t, dir)
	_, err := journal.Open(ctx, dir, journal.Options{})
	var up *journal.UpgradeRequiredError
	if !errors.As(err, &up) || up.Version != 3 || !strings.Contains(err.Error(), "started_at") {
		t.Fatalf("Open of a version-3 set: %v; want the upgrade to version 4 named", err)
	}
	set, err := journal.OpenSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	done, err := set.Upgrade(ctx)
	_ = set.Close()
	if err != nil || !slices.Equal(done, []string{"jobs.sqlite 3→4", "services.sqlite 3→4", "delivery.sqlite 3→4"}) {
		t.Fatalf("upgrade of a version-3 set: %q, %v", done, err)
	}
	sameRows(t, before, rows(t, dir))
	j := open(t, dir)
	cp, err := j.Restore(ctx)
	if err != nil || cp.Pending == nil || cp.Pending.Sequence != 3 || !cp.Pending.StartedAt.IsZero() || !cp.Pending.HasResult() {
		t.Fatalf("the kept pending command: %+v, %v", cp.Pending, err)
	}
	if err := j.Acknowledge(ctx, domain.Acknowledgement{Sequence: 3, ResultDigest: cp.Pending.ResultDigest}); err != nil {
		t.Fatal(err)
	}
	p := pulled(t, 4, 4)
	p.StartedAt = time.Date(2026, 12, 4, 9, 30, 1, 123456789, time.UTC)
	if err := j.SavePending(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	b, d := result(t, p, "result 4")
	if err := j.SaveResult(ctx, 4, b, d); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir) // every row verified again, the pending row's digest with its start
	cp, err = j.Restore(ctx)
	if err != nil || cp.Pending == nil || !cp.Pending.StartedAt.Equal(p.StartedAt) || !cp.Pending.HasResult() {
		t.Fatalf("the saved command's start: %+v, %v; want %v", cp.Pending, err, p.StartedAt)
	}
}
