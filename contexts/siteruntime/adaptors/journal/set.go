package journal

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/deliverydb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/recordsdb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/database"
)

//go:embed schema/*.sql
var schemaFiles embed.FS

// Set is the journal directory as `metallo runtime install` sees it
// (application.JournalSet). It holds the directory lock until Close, so the
// hook never races a running Runtime.
type Set struct {
	dir  string
	lock *flock.Flock
	fp   application.Failpoints
}

// OpenSet creates dir if missing (the hook prepares a fresh volume), takes
// its lock and finishes or undoes a journal upgrade a kill interrupted
// (recoverUpgrade); it fails with ErrLocked when a Runtime holds the lock.
func OpenSet(dir string) (*Set, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if err := recoverUpgrade(dir); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	return &Set{dir: dir, lock: lock}, nil
}

// Close releases the lock.
func (s *Set) Close() error { return s.lock.Unlock() }

// Present lists which journal files exist.
func (s *Set) Present(context.Context) (domain.JournalSet, error) { return presentFiles(s.dir) }

// Binding verifies the complete set read-only, each file at whichever
// known schema version it is (an earlier one awaits Upgrade), and returns
// its binding.
func (s *Set) Binding(ctx context.Context) (domain.Binding, error) {
	cp, _, err := verifySetVersions(ctx, s.dir)
	return cp.Binding, err
}

// stagingDir is the subdirectory of the journal directory in which
// Initialise builds the journal set before moving it into place.
const stagingDir = ".install"

// SetFailpoints arms install's crash points (application.FailInstallAfterBuild
// after each file is built and synced, application.FailInstallAfterLink after
// each is linked into place); nil disarms them.
func (s *Set) SetFailpoints(fp application.Failpoints) { s.fp = fp }

func (s *Set) hit(name string) {
	if s.fp != nil {
		s.fp.Hit(name)
	}
}

// Initialise creates the three journal files at schema version 1, bound to
// b, with checkpoint 0 and nothing pending. All three are built in the
// staging subdirectory .install (each closed — its WAL checkpointed away —
// and synced, then the staging directory synced); only then is each linked
// into place without replacing anything, jobs.sqlite and services.sqlite
// first and delivery.sqlite last, the directory synced after each link, so
// delivery.sqlite is the marker of a complete set. A crash leaves either no
// journal, or a subset of fresh journals that DiscardUnfinished recognises.
// It fails when any journal file exists.
func (s *Set) Initialise(ctx context.Context, b domain.Binding) error {
	set, err := presentFiles(s.dir)
	if err != nil {
		return err
	}
	if !set.Empty() {
		return fmt.Errorf("initialise journals in %s: %s already present", s.dir, strings.Join(set.Present, ", "))
	}
	if err := s.RemoveLeftovers(); err != nil {
		return fmt.Errorf("initialise journals in %s: %w", s.dir, err)
	}
	stage := filepath.Join(s.dir, stagingDir)
	if err := os.Mkdir(stage, 0o750); err != nil {
		return fmt.Errorf("initialise journals in %s: %w", s.dir, err)
	}
	order := []string{domain.JobsFile, domain.ServicesFile, domain.DeliveryFile}
	for _, f := range order {
		if err := build(ctx, filepath.Join(stage, f), f, b); err != nil {
			return fmt.Errorf("initialise %s: %w", f, err)
		}
		s.hit(application.FailInstallAfterBuild)
	}
	if err := syncDir(stage); err != nil {
		return err
	}
	for _, f := range order {
		if err := os.Link(filepath.Join(stage, f), filepath.Join(s.dir, f)); err != nil {
			return fmt.Errorf("initialise %s: %w", f, err)
		}
		if err := syncDir(s.dir); err != nil {
			return err
		}
		s.hit(application.FailInstallAfterLink)
	}
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// RemoveLeftovers removes what an interrupted Initialise leaves besides
// journal files: the staging directory and the temporary files of earlier
// versions (.<file>.install and its -wal/-shm/-journal). A journal file is
// never removed.
func (s *Set) RemoveLeftovers() error {
	if err := os.RemoveAll(filepath.Join(s.dir, stagingDir)); err != nil {
		return err
	}
	for _, f := range domain.JournalFiles() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			if err := os.Remove(filepath.Join(s.dir, "."+f+".install"+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// DiscardUnfinished removes the journal files of an installation that was
// interrupted before it was recorded, so Initialise can redo it. It is
// called only when no installation record exists and the set is partial.
// Every present file must be exactly as Initialise creates it: it verifies
// (schema version, digests), has no -wal (no Runtime ever opened it), holds
// no command — checkpoint 0, nothing pending, no member binding, no native
// record — and all present files share one installation ID; a present
// delivery.sqlite must be bound to want's environment and authority.
// Otherwise nothing is removed and the error says why (wrapping
// application.ErrInstallationMismatch for another binding). It returns the
// files removed.
func (s *Set) DiscardUnfinished(ctx context.Context, want domain.Binding) ([]string, error) {
	set, err := presentFiles(s.dir)
	if err != nil {
		return nil, err
	}
	id := ""
	for _, f := range set.Present {
		fid, err := unfinished(ctx, filepath.Join(s.dir, f), f, want)
		if err != nil {
			return nil, err
		}
		if id != "" && fid != id {
			return nil, fmt.Errorf("%s belongs to installation %s, another present journal to %s: not one interrupted installation", f, fid, id)
		}
		id = fid
	}
	for _, f := range set.Present {
		for _, suffix := range []string{"", "-shm", "-journal"} {
			if err := os.Remove(filepath.Join(s.dir, f+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
	}
	if err := s.RemoveLeftovers(); err != nil {
		return nil, err
	}
	return set.Present, syncDir(s.dir)
}

// unfinished checks that path is a journal exactly as Initialise created
// it and returns its installation ID.
func unfinished(ctx context.Context, path, file string, want domain.Binding) (string, error) {
	wal, err := exists(path + "-wal")
	if err != nil {
		return "", err
	}
	if wal {
		return "", fmt.Errorf("%s has a write-ahead log: a Runtime has written it", file)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1&_pragma=query_only(1)")
	if err != nil {
		return "", integrity(file, "", "cannot be opened: %v", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	m, cp, err := checkFile(ctx, db, file)
	if err != nil {
		return "", err
	}
	id := m.InstallationID
	table := "native_records"
	if file == domain.DeliveryFile {
		table = "member_bindings"
		if cp.Acknowledged != 0 || cp.Pending != nil {
			return "", fmt.Errorf("%s has had commands (acknowledged sequence %d)", file, cp.Acknowledged)
		}
		if err := sameBinding(cp.Binding, want); err != nil {
			return "", err
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		return "", integrity(file, table, "cannot be read: %v", err)
	}
	if n != 0 {
		return "", fmt.Errorf("%s has had commands (%d %s rows)", file, n, table)
	}
	return id, nil
}

func sameBinding(have, want domain.Binding) error {
	if have.Environment != want.Environment || strings.TrimRight(have.Authority, "/") != strings.TrimRight(want.Authority, "/") {
		return fmt.Errorf("%w: %s is bound to environment %q at %s; configured is environment %q at %s", application.ErrInstallationMismatch,
			domain.DeliveryFile, have.Environment, have.Authority, want.Environment, want.Authority)
	}
	return nil
}

// build creates one journal file at path, closed (its WAL checkpointed
// away) and synced.
func build(ctx context.Context, path, file string, b domain.Binding) error {
	db, err := sql.Open("sqlite", database.SQLiteDSN(path, 10*time.Second, "synchronous(FULL)")+"&_txlock=immediate")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	err = fill(ctx, db, file, b)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return syncFile(path)
}

func fill(ctx context.Context, db *sql.DB, file string, b domain.Binding) error {
	schema := []string{"schema/meta.sql", "schema/records.sql"}
	if file == domain.DeliveryFile {
		schema[1] = "schema/delivery.sql"
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, name := range schema {
		ddl, err := schemaFiles.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(ddl)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	// A fresh file is version 1 with every upgrade applied, in the same
	// transaction: the same schema an upgraded file has.
	for _, step := range upgradeSteps() {
		if err := step.apply(ctx, tx, file); err != nil {
			return err
		}
	}
	digest := metaDigest(file, SchemaVersion, b.InstallationID)
	if file != domain.DeliveryFile {
		if err := recordsdb.New(tx).InsertMeta(ctx, recordsdb.InsertMetaParams{File: file, SchemaVersion: SchemaVersion,
			InstallationID: b.InstallationID, Digest: digest}); err != nil {
			return err
		}
		return tx.Commit()
	}
	q := deliverydb.New(tx)
	if err := q.InsertMeta(ctx, deliverydb.InsertMetaParams{File: file, SchemaVersion: SchemaVersion, InstallationID: b.InstallationID,
		Digest: digest}); err != nil {
		return err
	}
	if err := q.InsertBinding(ctx, deliverydb.InsertBindingParams{Environment: b.Environment, Authority: b.Authority,
		InstallationID: b.InstallationID, Digest: bindingDigest(b)}); err != nil {
		return err
	}
	if err := q.SetCheckpoint(ctx, deliverydb.SetCheckpointParams{AcknowledgedSequence: 0, Digest: checkpointDigest(0)}); err != nil {
		return err
	}
	return tx.Commit()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

var _ application.JournalSet = (*Set)(nil)
