package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
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
		"`metallo runtime install`, which upgrades the journal set in place and keeps every row (docs/operations.md#upgrades)",
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
// (application.JournalSet): it verifies the complete set read-only first
// (each file at its own known version; a damaged set is refused before
// anything is written), then upgrades jobs.sqlite, services.sqlite and
// delivery.sqlite in that order, each file in one durable transaction per
// step (its SQL, then its journal_meta row at the new version with that
// row's digest), checking inside the transaction that the file is still at
// the step's previous version. No other row is written, so every row and
// row digest is kept. A crash between two commits leaves files at
// different versions; the next Upgrade continues from there. It returns
// the upgrades made ("jobs.sqlite 1→2"), none when the set was current.
// The failpoint application.FailUpgradeAfterFile is hit after each file's
// commit.
func (s *Set) Upgrade(ctx context.Context) ([]string, error) {
	_, versions, err := verifySetVersions(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	var done []string
	// delivery.sqlite last, as in Initialise.
	for _, f := range []string{domain.JobsFile, domain.ServicesFile, domain.DeliveryFile} {
		from := versions[f]
		if from == SchemaVersion {
			continue
		}
		if err := upgradeFile(ctx, filepath.Join(s.dir, f), f, from); err != nil {
			return done, err
		}
		done = append(done, fmt.Sprintf("%s %d→%d", f, from, SchemaVersion))
		s.hit(application.FailUpgradeAfterFile)
	}
	return done, nil
}

// upgradeFile runs every step after version from on one file, one durable
// transaction per step, and closes it (SQLite checkpoints its WAL away).
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
