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
}

// OpenSet creates dir if missing (the hook prepares a fresh volume) and
// takes its lock; it fails with ErrLocked when a Runtime holds it.
func OpenSet(dir string) (*Set, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return &Set{dir: dir, lock: lock}, nil
}

// Close releases the lock.
func (s *Set) Close() error { return s.lock.Unlock() }

// Present lists which journal files exist.
func (s *Set) Present(context.Context) (domain.JournalSet, error) { return presentFiles(s.dir) }

// Binding verifies the complete set read-only and returns its binding.
func (s *Set) Binding(ctx context.Context) (domain.Binding, error) {
	cp, err := verifySet(ctx, s.dir)
	return cp.Binding, err
}

// Initialise creates the three journal files at schema version 1, bound to
// b, with checkpoint 0 and nothing pending. Each file is built under a
// temporary name, closed (its WAL checkpointed away), synced and then
// linked into place without replacing anything, jobs.sqlite and
// services.sqlite first and delivery.sqlite last. It fails when any journal
// file exists.
func (s *Set) Initialise(ctx context.Context, b domain.Binding) error {
	set, err := presentFiles(s.dir)
	if err != nil {
		return err
	}
	if !set.Empty() {
		return fmt.Errorf("initialise journals in %s: %s already present", s.dir, strings.Join(set.Present, ", "))
	}
	for _, f := range []string{domain.JobsFile, domain.ServicesFile, domain.DeliveryFile} {
		if err := s.create(ctx, f, b); err != nil {
			return fmt.Errorf("initialise %s: %w", f, err)
		}
	}
	return syncDir(s.dir)
}

func (s *Set) create(ctx context.Context, file string, b domain.Binding) error {
	final := filepath.Join(s.dir, file)
	tmp := filepath.Join(s.dir, "."+file+".install")
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(tmp + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	db, err := sql.Open("sqlite", database.SQLiteDSN(tmp, 10*time.Second, "synchronous(FULL)")+"&_txlock=immediate")
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
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Link(tmp, final); err != nil {
		return err
	}
	return os.Remove(tmp)
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
