package journal

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
)

// DiscardConnection leaves a transaction open on name's connection and
// then drops the connection as a failed rollback does, so tests can show
// the next use opens a fresh one (a reused connection would refuse the
// next BEGIN: a transaction is still open on it).
func DiscardConnection(ctx context.Context, j *Journal, name string) error {
	fl := j.files[name]
	fl.turn <- struct{}{}
	defer func() { <-fl.turn }()
	if err := fl.connect(ctx); err != nil {
		return err
	}
	if _, err := fl.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	fl.discard(fl.conn)
	return nil
}

// ExecInTx runs stmt inside a transaction of name's file and then fails
// the transaction with fail, as a failing write does.
func ExecInTx(ctx context.Context, j *Journal, name, stmt string, fail error) error {
	release := make(chan struct{})
	close(release)
	return HoldTx(ctx, j, name, stmt, make(chan struct{}), release, fail)
}

// HoldTx runs stmt inside a transaction of name's file, closes started,
// waits for release and then fails the transaction with fail.
func HoldTx(ctx context.Context, j *Journal, name, stmt string, started chan<- struct{}, release <-chan struct{}, fail error) error {
	return j.tx(ctx, name, func(ctx context.Context, fl *file) error {
		if _, err := fl.conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
		close(started)
		<-release
		return fail
	})
}

// DowngradeToVersion1 rewrites every journal file of the closed set in dir
// as schema version 1 has it (DowngradeTo).
func DowngradeToVersion1(ctx context.Context, dir string) error { return DowngradeTo(ctx, dir, 1) }

// DowngradeTo rewrites every journal file of the closed set in dir as
// schema version (1, 2 or 3) has it — before version 4 delivery.sqlite's
// pending without started_at (its digest written again without it), before
// version 3 its member_bindings without account_uid, before version 2 jobs.sqlite and
// services.sqlite without terminal_states, every journal_meta row at
// version with its digest — so tests can upgrade an earlier set holding
// rows of every kind.
func DowngradeTo(ctx context.Context, dir string, version int64) error {
	for _, f := range domain.JournalFiles() {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, f)+"?mode=rw")
		if err != nil {
			return err
		}
		var id string
		err = db.QueryRowContext(ctx, "SELECT installation_id FROM journal_meta").Scan(&id)
		if err == nil && f != domain.DeliveryFile && version < 2 {
			_, err = db.ExecContext(ctx, "DROP TABLE terminal_states")
		}
		if err == nil && f == domain.DeliveryFile && version < 4 {
			err = dropStartedAt(ctx, db)
		}
		if err == nil && f == domain.DeliveryFile && version < 3 {
			_, err = db.ExecContext(ctx, "ALTER TABLE member_bindings DROP COLUMN account_uid")
		}
		if err == nil {
			_, err = db.ExecContext(ctx, "UPDATE journal_meta SET schema_version = ?, digest = ?", version, metaDigest(f, version, id))
		}
		if err = errors.Join(err, db.Close()); err != nil {
			return err
		}
	}
	return nil
}

// DowngradeToCrashImage downgrades the closed set in dir to version as
// DowngradeTo does, but with every file's log left un-checkpointed
// (wal_autocheckpoint off): while the connections are still open it copies
// the directory, -wal and -shm included, to image, as a crash of a Runtime
// of that version leaves it.
func DowngradeToCrashImage(ctx context.Context, dir, image string, version int64) error {
	var dbs []*sql.DB
	defer func() {
		for _, db := range dbs {
			_ = db.Close()
		}
	}()
	for _, f := range domain.JournalFiles() {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, f)+"?mode=rw&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)")
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		dbs = append(dbs, db)
		var id string
		err = db.QueryRowContext(ctx, "SELECT installation_id FROM journal_meta").Scan(&id)
		if err == nil && f != domain.DeliveryFile && version < 2 {
			_, err = db.ExecContext(ctx, "DROP TABLE terminal_states")
		}
		if err == nil && f == domain.DeliveryFile && version < 4 {
			err = dropStartedAt(ctx, db)
		}
		if err == nil && f == domain.DeliveryFile && version < 3 {
			_, err = db.ExecContext(ctx, "ALTER TABLE member_bindings DROP COLUMN account_uid")
		}
		if err == nil {
			_, err = db.ExecContext(ctx, "UPDATE journal_meta SET schema_version = ?, digest = ?", version, metaDigest(f, version, id))
		}
		if err != nil {
			return err
		}
	}
	if err := os.Mkdir(image, 0o750); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(image, e.Name()), b, 0o640); err != nil {
			return err
		}
	}
	return nil
}

// dropStartedAt removes started_at from delivery.sqlite's pending, as
// schema versions before 4 have it: a pending row's digest is written
// again without it, as a Runtime of that version wrote it.
func dropStartedAt(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "SELECT sequence, command, command_digest, result, result_digest FROM pending")
	if err != nil {
		return err
	}
	type row struct {
		seq           int64
		command       []byte
		commandDigest string
		result        []byte
		resultDigest  sql.NullString
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.command, &r.commandDigest, &r.result, &r.resultDigest); err != nil {
			_ = rows.Close()
			return err
		}
		all = append(all, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, r := range all {
		if _, err := db.ExecContext(ctx, "UPDATE pending SET digest = ? WHERE sequence = ?",
			pendingDigest(r.seq, r.command, r.commandDigest, r.result, r.resultDigest, ""), r.seq); err != nil {
			return err
		}
	}
	_, err = db.ExecContext(ctx, "ALTER TABLE pending DROP COLUMN started_at")
	return err
}
