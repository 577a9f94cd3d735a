package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/database"
)

// The journal set's explicit, versioned upgrade
// (docs/site-runtime.md#schema-versions-and-upgrades). Every file carries
// the set's schema version in its journal_meta row. A change of the schema
// is one upgrade step from version To-1 to To: the embedded SQL it applies
// to each file it names (files it does not name only have their version
// raised), so every file of a set is at one version once it is upgraded.
// `metallo runtime install` (Set.Upgrade) runs the steps; serve (Open)
// refuses a set that is not at SchemaVersion, naming the upgrade. A later
// change appends a step (its SQL in schema/upgrade-<To>-<what>.sql) and
// raises SchemaVersion; a fresh installation applies every step too
// (fill), so a fresh and an upgraded file have the same schema.

// upgradeStep is one schema change of the journal set.
type upgradeStep struct {
	// To is the version the step produces; it applies to files at To-1.
	To int64
	// What says what the version adds, for logs and errors.
	What string
	// SQL names, per journal file, the embedded schema file the step runs
	// in that file's upgrade transaction.
	SQL map[string]string
}

// upgradeSteps returns every upgrade step, oldest first; the last one's To
// is SchemaVersion.
func upgradeSteps() []upgradeStep {
	return []upgradeStep{{
		To:   2,
		What: "terminal_states in jobs.sqlite and services.sqlite: the terminal state of a watched object, reported once it is gone",
		SQL:  map[string]string{domain.JobsFile: "schema/upgrade-2-records.sql", domain.ServicesFile: "schema/upgrade-2-records.sql"},
	}, {
		To:   3,
		What: "account_uid in delivery.sqlite's member_bindings: the UID of the member's account a binding was applied with",
		SQL:  map[string]string{domain.DeliveryFile: "schema/upgrade-3-delivery.sql"},
	}, {
		To:   4,
		What: "started_at in delivery.sqlite's pending: when the Runtime took the pending command on, from which its bounded waits count",
		SQL:  map[string]string{domain.DeliveryFile: "schema/upgrade-4-delivery.sql"},
	}}
}

// apply runs the step's SQL for file inside tx (nothing for a file it does
// not name).
func (s upgradeStep) apply(ctx context.Context, tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, file string) error {
	name, ok := s.SQL[file]
	if !ok {
		return nil
	}
	ddl, err := schemaFiles.ReadFile(name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(ddl)); err != nil {
		return fmt.Errorf("upgrade %s to version %d (%s): %w", file, s.To, name, err)
	}
	return nil
}

// ErrUpgradeRequired is returned (wrapped, by an *UpgradeRequiredError) by
// Open when a journal file is at an earlier schema version.
var ErrUpgradeRequired = errors.New("journal upgrade required")

// UpgradeRequiredError names the first journal file that is at an earlier
// schema version than this Runtime's, and the upgrade that brings it
// there. It wraps ErrUpgradeRequired.
type UpgradeRequiredError struct {
	// File is the journal file, Version its schema version.
	File    string
	Version int64
}

func (e *UpgradeRequiredError) Error() string {
	var adds []string
	for _, s := range upgradeSteps() {
		if s.To > e.Version {
			adds = append(adds, fmt.Sprintf("version %d: %s", s.To, s.What))
		}
	}
	return fmt.Sprintf("journal %s is at schema version %d; this Runtime needs version %d (%s): run the installation hook, "+
		"`metallo runtime install`, which upgrades the journal set atomically and keeps every row (docs/operations.md#upgrades)",
		e.File, e.Version, SchemaVersion, strings.Join(adds, "; "))
}

// Unwrap returns ErrUpgradeRequired.
func (e *UpgradeRequiredError) Unwrap() error { return ErrUpgradeRequired }

// verifySet checks the complete journal set in dir read-only (see
// verifySetVersions) and requires every file at SchemaVersion; a file at
// an earlier version fails with an *UpgradeRequiredError.
func verifySet(ctx context.Context, dir string) (domain.Checkpoint, error) {
	cp, versions, err := verifySetVersions(ctx, dir)
	if err != nil {
		return cp, err
	}
	for _, f := range domain.JournalFiles() {
		if versions[f] != SchemaVersion {
			return domain.Checkpoint{}, &UpgradeRequiredError{File: f, Version: versions[f]}
		}
	}
	return cp, nil
}

// Upgrade brings every journal file to SchemaVersion
// (application.JournalSet) atomically as a set: a kill at any point leaves
// either the old set or the new one, never a mix
// (docs/site-runtime.md#schema-versions-and-upgrades). It first finishes
// or undoes an interrupted upgrade (recoverUpgrade) and verifies the
// complete set read-only (each file at its own known version; a damaged
// set or a file of an unknown version is refused before anything is
// written). Then, for each file not at SchemaVersion (jobs.sqlite,
// services.sqlite, delivery.sqlite in that order), it checkpoints the
// original's write-ahead log into it (held by the directory lock, no
// Runtime writes it meanwhile), copies it with VACUUM INTO to .<file>.upgrade
// beside it, runs the upgrade steps on the copy (one durable transaction per
// step), closes and syncs it and verifies it read-only at the new version.
// With every copy complete and the directory synced it writes the commit
// marker .upgrade-commit (naming the installation, the version and the
// files; synced, then the directory), renames each copy over its original
// (the directory synced after each) and removes the marker. Only
// journal_meta rows are written, so every other row and its digest are
// kept. It returns the upgrades made ("jobs.sqlite 1→3"), none when the set
// was current. The failpoints application.FailUpgrade* are hit after each
// of those steps.
func (s *Set) Upgrade(ctx context.Context) ([]string, error) {
	if err := recoverUpgrade(s.dir); err != nil {
		return nil, err
	}
	cp, versions, err := verifySetVersions(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	var todo, done []string
	// delivery.sqlite last, as in Initialise.
	for _, f := range []string{domain.JobsFile, domain.ServicesFile, domain.DeliveryFile} {
		if versions[f] != SchemaVersion {
			todo = append(todo, f)
			done = append(done, fmt.Sprintf("%s %d→%d", f, versions[f], SchemaVersion))
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	s.hit(application.FailUpgradeBeforeCopies)
	for _, f := range todo {
		if err := upgradeCopy(ctx, s.dir, f, versions[f]); err != nil {
			// Nothing is decided yet: the originals are the set.
			return nil, errors.Join(err, rollBack(s.dir))
		}
		s.hit(application.FailUpgradeAfterCopy)
	}
	if err := syncDir(s.dir); err != nil {
		return nil, errors.Join(fmt.Errorf("upgrade: sync %s: %w", s.dir, err), rollBack(s.dir))
	}
	m := upgradeMarker{InstallationID: cp.Binding.InstallationID, To: SchemaVersion, Files: todo}
	if err := writeMarker(s.dir, m); err != nil {
		return nil, errors.Join(err, rollBack(s.dir))
	}
	s.hit(application.FailUpgradeAfterMarker)
	// From here on the upgrade is decided: a failure leaves the marker, and
	// the next open or install finishes the renames.
	if err := rollForward(s.dir, m, s.hit); err != nil {
		return nil, err
	}
	return done, nil
}

// The upgrade's files beside the journals: each file's upgraded copy and
// the commit marker (with its temporary name while it is written).
const (
	upgradeCopySuffix = ".upgrade"
	upgradeMarkerName = ".upgrade-commit"
	upgradeMarkerTemp = ".upgrade-commit.tmp"
)

func copyPath(dir, file string) string { return filepath.Join(dir, "."+file+upgradeCopySuffix) }

// upgradeMarker is the commit marker's content (JSON): the set's
// installation, the version its upgraded files are at and which files the
// upgrade replaces.
type upgradeMarker struct {
	InstallationID string   `json:"installation_id"`
	To             int64    `json:"schema_version"`
	Files          []string `json:"files"`
}

// upgradeCopy makes the upgraded copy of file: the original's log
// checkpointed into it and removed, VACUUM INTO the copy, every step after
// version from run on the copy, the copy closed, synced and verified
// read-only at SchemaVersion.
func upgradeCopy(ctx context.Context, dir, file string, from int64) error {
	path, cpath := filepath.Join(dir, file), copyPath(dir, file)
	db, err := sql.Open("sqlite", database.SQLiteDSN(path, 10*time.Second, "synchronous(FULL)")+"&mode=rw")
	if err != nil {
		return fmt.Errorf("upgrade %s: %w", file, err)
	}
	db.SetMaxOpenConns(1)
	var busy, logFrames, checkpointed int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &checkpointed)
	if err == nil && busy != 0 {
		err = errors.New("the checkpoint of its write-ahead log was blocked")
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "VACUUM INTO ?", cpath)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("upgrade %s: copy to %s: %w", file, filepath.Base(cpath), err)
	}
	// Closed by its last connection, the original has no log left: nothing
	// of it is outside the copy, and no stale log can meet the copy once it
	// is renamed.
	if wal, err := exists(path + "-wal"); err != nil || wal {
		return errors.Join(err, fmt.Errorf("upgrade %s: its write-ahead log is still there after the checkpoint", file))
	}
	if err := upgradeFile(ctx, cpath, file, from); err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if left, err := exists(cpath + suffix); err != nil || left {
			return errors.Join(err, fmt.Errorf("upgrade %s: the copy still has its %s after it was closed", file, suffix))
		}
	}
	m, _, err := verifyFileReadOnly(ctx, cpath, file)
	if err != nil {
		return fmt.Errorf("upgrade %s: the upgraded copy: %w", file, err)
	}
	if m.SchemaVersion != SchemaVersion {
		return integrity(file, "journal_meta", "the upgraded copy is at version %d, not %d", m.SchemaVersion, SchemaVersion)
	}
	return nil
}

// writeMarker makes the commit marker durable: written under a temporary
// name and synced, renamed into place, the directory synced; it appears
// whole or not at all.
func writeMarker(dir string, m upgradeMarker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, upgradeMarkerTemp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("upgrade: commit marker: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, filepath.Join(dir, upgradeMarkerName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("upgrade: commit marker: %w", err)
	}
	return nil
}

// recoverUpgrade finishes or undoes an upgrade a kill interrupted; Open and
// OpenSet run it under the directory lock before they read any journal.
// With the commit marker present every copy was complete before it was
// written: the renames are finished (rollForward). Without it nothing was
// decided: the copies and a partly written marker are removed (rollBack)
// and the originals are the set. Without either it changes nothing.
func recoverUpgrade(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, upgradeMarkerName))
	if errors.Is(err, os.ErrNotExist) {
		return rollBack(dir)
	}
	if err != nil {
		return fmt.Errorf("journal upgrade marker %s: %w", upgradeMarkerName, err)
	}
	var m upgradeMarker
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("journal upgrade marker %s cannot be read: %w", upgradeMarkerName, err)
	}
	for _, f := range m.Files {
		if !slices.Contains(domain.JournalFiles(), f) {
			return fmt.Errorf("journal upgrade marker %s names %q, not a journal file", upgradeMarkerName, f)
		}
	}
	return rollForward(dir, m, nil)
}

// rollBack removes every upgraded copy (with any -wal/-shm/-journal of its
// own) and a partly written marker; the directory is synced when anything
// was removed.
func rollBack(dir string) error {
	removed := false
	names := []string{filepath.Join(dir, upgradeMarkerTemp)}
	for _, f := range domain.JournalFiles() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			names = append(names, copyPath(dir, f)+suffix)
		}
	}
	for _, n := range names {
		err := os.Remove(n)
		switch {
		case err == nil:
			removed = true
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("undo the interrupted journal upgrade: %w", err)
		}
	}
	if !removed {
		return nil
	}
	return syncDir(dir)
}

// rollForward renames each of m's copies that is still there over its
// original, the directory synced after each, checks every file of m is
// then at m's version and installation, and removes the marker. Before a
// copy replaces its original, the original's -shm and -journal are
// removed and so is its -wal when empty: the original was checkpointed and
// closed before its copy was made, so they hold nothing (a -wal that holds
// frames is refused: something wrote the original after the copy). hit, when
// set, is the Upgrade's failpoints.
func rollForward(dir string, m upgradeMarker, hit func(string)) error {
	if hit == nil {
		hit = func(string) {}
	}
	for _, f := range m.Files {
		path, cpath := filepath.Join(dir, f), copyPath(dir, f)
		there, err := exists(cpath)
		if err != nil {
			return err
		}
		if !there {
			continue // renamed before the interruption
		}
		if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
			return integrity(f+"-wal", "", "written after its upgrade was committed (%s); the upgraded copy %s is kept, nothing replaced",
				upgradeMarkerName, filepath.Base(cpath))
		}
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("finish the journal upgrade: %w", err)
			}
		}
		if err := os.Rename(cpath, path); err != nil {
			return fmt.Errorf("finish the journal upgrade: %w", err)
		}
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("finish the journal upgrade: %w", err)
		}
		hit(application.FailUpgradeAfterRename)
	}
	for _, f := range m.Files {
		if err := upgradedTo(dir, f, m); err != nil {
			return err
		}
	}
	hit(application.FailUpgradeBeforeMarkerRemoval)
	if err := os.Remove(filepath.Join(dir, upgradeMarkerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("finish the journal upgrade: %w", err)
	}
	return syncDir(dir)
}

// upgradedTo checks, read-only, that file's journal_meta names m's version
// and installation.
func upgradedTo(dir, file string, m upgradeMarker) error {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, file)+"?mode=ro&immutable=1&_pragma=query_only(1)")
	if err != nil {
		return integrity(file, "", "cannot be opened: %v", err)
	}
	defer db.Close()
	var version int64
	var id string
	if err := db.QueryRow("SELECT schema_version, installation_id FROM journal_meta WHERE id = 1").Scan(&version, &id); err != nil {
		return integrity(file, "journal_meta", "cannot be read after the upgrade: %v", err)
	}
	if version != m.To || id != m.InstallationID {
		return integrity(file, "journal_meta", "at version %d of installation %s after the upgrade %s records (version %d of installation %s)",
			version, id, upgradeMarkerName, m.To, m.InstallationID)
	}
	return nil
}

// upgradeFile runs every step after version from on the file at path
// (named file in its journal_meta row: an upgraded copy), one durable
// transaction per step, closes it (SQLite checkpoints its WAL away) and
// syncs it.
func upgradeFile(ctx context.Context, path, file string, from int64) error {
	db, err := sql.Open("sqlite", database.SQLiteDSN(path, 10*time.Second, "synchronous(FULL)")+"&mode=rw&_txlock=immediate")
	if err != nil {
		return fmt.Errorf("upgrade %s: %w", file, err)
	}
	db.SetMaxOpenConns(1)
	for _, step := range upgradeSteps() {
		if step.To <= from {
			continue
		}
		if err = upgradeStepOf(ctx, db, file, step); err != nil {
			break
		}
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("upgrade %s: close: %w", file, cerr)
	}
	if err != nil {
		return err
	}
	return syncFile(path)
}

func upgradeStepOf(ctx context.Context, db *sql.DB, file string, step upgradeStep) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("upgrade %s to version %d: %w", file, step.To, err)
	}
	defer func() { _ = tx.Rollback() }()
	var m metaRow
	if err := tx.QueryRowContext(ctx, "SELECT file, schema_version, installation_id, digest FROM journal_meta WHERE id = 1").
		Scan(&m.File, &m.SchemaVersion, &m.InstallationID, &m.Digest); err != nil {
		return integrity(file, "journal_meta", "cannot be read: %v", err)
	}
	if m.SchemaVersion != step.To-1 || m.File != file || m.Digest != metaDigest(m.File, m.SchemaVersion, m.InstallationID) {
		return integrity(file, "journal_meta", "changed during the upgrade to version %d (now %s at version %d)", step.To, m.File, m.SchemaVersion)
	}
	if err := step.apply(ctx, tx, file); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, "UPDATE journal_meta SET schema_version = ?, digest = ? WHERE id = 1 AND schema_version = ?",
		step.To, metaDigest(file, step.To, m.InstallationID), step.To-1)
	if err != nil {
		return fmt.Errorf("upgrade %s to version %d: journal_meta: %w", file, step.To, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return integrity(file, "journal_meta", "not updated to version %d (%d rows, %v)", step.To, n, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("upgrade %s to version %d: commit: %w", file, step.To, err)
	}
	return nil
}
