package journal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	// Registers the "sqlite" database/sql driver (modernc.org/sqlite).
	_ "modernc.org/sqlite"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/deliverydb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/recordsdb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Journal is an open journal set: it holds the directory lock until Close
// and implements application.RuntimeJournal and application.MemberBindings
// on delivery.sqlite; Batch and Services return the native record stores.
type Journal struct {
	dir  string
	lock *flock.Flock
	cp   domain.Checkpoint
	// discarded is what SQLite discarded of the logs when j was opened.
	discarded []WALDiscard

	mu      sync.Mutex
	files   map[string]*file
	closed  bool
	commits atomic.Int64
}

// file is one journal file: its database handle (one connection) and that
// connection, held for the journal's lifetime with its statements prepared
// once. turn serializes the connection's users: a transaction holds it from
// BEGIN to COMMIT and a read for its statement, so a read never runs
// inside another caller's open transaction; a caller waiting for its turn
// gives up when its context is done.
//
// Transactions are BEGIN IMMEDIATE … COMMIT statements on the held
// connection rather than database/sql transactions, and every statement
// runs under a context without cancellation: database/sql starts a
// goroutine for each transaction and for each query inside one, and
// modernc's driver one for each statement whose context can be cancelled,
// which on the delivery path cost the Runtime a fifth to a quarter of its CPU
// per command (BENCHMARKS.md, "Runtime delivery"). A journal statement is
// a short local write; a caller cancelled once its turn has come waits for
// it (at most SQLite's busy timeout), and a transaction is never cut off
// between its statements.
type file struct {
	name string
	db   *sql.DB

	// turn holds a token while a caller uses the file; the fields below
	// are read and written only by its holder.
	turn   chan struct{}
	closed bool
	conn   *sql.Conn // nil after a connection was discarded, until the next use
	// delivery (delivery.sqlite) or records (jobs.sqlite, services.sqlite)
	// hold the statements prepared on conn.
	delivery *deliverydb.Queries
	records  *recordsdb.Queries
}

// Options tune Open.
type Options struct {
	// BusyTimeout is SQLite's busy timeout (default 10 s).
	BusyTimeout time.Duration
	// Expect, when set, is the binding the configuration names (and, when
	// its InstallationID is set, the installation the record names): the
	// set's binding must match it (authority up to a trailing slash), or
	// Open refuses, naming delivery.sqlite's binding row and wrapping
	// ErrBindingMismatch, before anything is opened for writing.
	Expect *domain.Binding
}

// ErrBindingMismatch is returned by Open when the journal set's binding
// differs from Options.Expect.
var ErrBindingMismatch = errors.New("binding mismatch")

// Open locks dir, finishes or undoes a journal upgrade a kill interrupted
// (recoverUpgrade: it touches only the upgrade's own copies, its commit
// marker and, rolling forward, the files the marker names), verifies the
// complete journal set read-only and opens it for writing. It never
// creates a journal. It fails with ErrLocked when
// another Runtime holds the directory, ErrNotInstalled when no journal
// exists, and an *IntegrityError naming the file and row when a check
// fails; the directory is unchanged in every failure. A damaged last
// commit SQLite discards is not a failure: Discarded reports it
// (docs/site-runtime.md#a-discarded-last-commit).
func Open(ctx context.Context, dir string, opts Options) (*Journal, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	// An upgrade a kill interrupted is finished or undone first, so the set
	// read is the old one or the new one, never a mix.
	if err := recoverUpgrade(dir); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	cp, err := verifySet(ctx, dir)
	if err == nil && opts.Expect != nil {
		err = expectBinding(cp.Binding, *opts.Expect)
	}
	var discarded []WALDiscard
	if err == nil {
		discarded, err = walDiscards(dir, cp)
	}
	if err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	j := &Journal{dir: dir, lock: lock, cp: cp, discarded: discarded, files: map[string]*file{}}
	busy := opts.BusyTimeout
	if busy == 0 {
		busy = 10 * time.Second
	}
	for _, f := range domain.JournalFiles() {
		// mode=rw: never create a missing file.
		dsn := database.SQLiteDSN(filepath.Join(dir, f), busy, "synchronous(FULL)") + "&mode=rw"
		db, err := sql.Open("sqlite", dsn)
		if err == nil {
			db.SetMaxOpenConns(1)
			db.SetConnMaxIdleTime(0)
			db.SetConnMaxLifetime(0)
			fl := &file{name: f, db: db, turn: make(chan struct{}, 1)}
			j.files[f] = fl
			err = fl.connect(ctx)
		}
		if err != nil {
			_ = j.Close()
			return nil, integrity(f, "", "cannot be opened for writing: %v", err)
		}
	}
	return j, nil
}

func expectBinding(have, want domain.Binding) error {
	if have.Environment != want.Environment || strings.TrimRight(have.Authority, "/") != strings.TrimRight(want.Authority, "/") {
		return fmt.Errorf("journal %s, row binding: %w: the journals are bound to environment %q at %s; configured is environment %q at %s (--environment, --authority)",
			domain.DeliveryFile, ErrBindingMismatch, have.Environment, have.Authority, want.Environment, want.Authority)
	}
	if want.InstallationID != "" && have.InstallationID != want.InstallationID {
		return fmt.Errorf("journal %s, row binding: %w: the journals belong to installation %s; the installation record names installation %s",
			domain.DeliveryFile, ErrBindingMismatch, have.InstallationID, want.InstallationID)
	}
	return nil
}

// connect takes the file's connection and prepares its statements on it,
// without cancellation: sqlc's Prepare drops the statements it prepared
// before a failure, and a statement never finalized keeps SQLite from
// closing the file (and removing its -wal and -shm). The caller holds the
// file's turn (or, in Open, is its only user).
func (fl *file) connect(ctx context.Context) error {
	if fl.conn != nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	conn, err := fl.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if fl.name == domain.DeliveryFile {
		fl.delivery, err = deliverydb.Prepare(ctx, conn)
	} else {
		fl.records, err = recordsdb.Prepare(ctx, conn)
	}
	if err != nil {
		fl.discard(conn)
		return fmt.Errorf("prepare statements: %w", err)
	}
	fl.conn = conn
	return nil
}

// discard closes the file's statements and drops conn from the pool for
// good (database/sql closes a connection returned as driver.ErrBadConn),
// so the next use opens a fresh one; the caller holds the file's turn. It is used when a
// transaction could not be rolled back: the connection may still hold it
// open.
func (fl *file) discard(conn *sql.Conn) {
	_ = fl.closeStatements()
	fl.conn = nil
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// closeStatements closes the statements prepared on the connection; the
// caller holds the file's turn.
func (fl *file) closeStatements() error {
	var errs []error
	if fl.delivery != nil {
		errs = append(errs, fl.delivery.Close())
	}
	if fl.records != nil {
		errs = append(errs, fl.records.Close())
	}
	fl.delivery, fl.records = nil, nil
	return errors.Join(errs...)
}

// close waits for the file's turn (a transaction in progress ends first)
// and closes the statements, the connection and the database handle.
func (fl *file) close() error {
	fl.turn <- struct{}{}
	defer func() { <-fl.turn }()
	fl.closed = true
	errs := []error{fl.closeStatements()}
	if fl.conn != nil {
		errs = append(errs, fl.conn.Close())
		fl.conn = nil
	}
	return errors.Join(append(errs, fl.db.Close())...)
}

// Binding returns the binding verified at Open.
func (j *Journal) Binding() domain.Binding { return j.cp.Binding }

// Discarded returns what SQLite discarded of the journals' write-ahead
// logs when Open read them: for each log, the frames of a damaged last
// commit (torn or flipped, the two cannot be told apart) that the journal
// is read without. The caller logs each as a warning naming the file
// (docs/site-runtime.md#a-discarded-last-commit). Empty when nothing was
// discarded.
func (j *Journal) Discarded() []WALDiscard { return slices.Clone(j.discarded) }

// Dir returns the journal directory.
func (j *Journal) Dir() string { return j.dir }

// Commits returns the number of durable commits made through j, on all
// three files.
func (j *Journal) Commits() int64 { return j.commits.Load() }

// CloseFiles closes the three files (SQLite checkpoints and removes the
// WAL) but keeps the directory lock, so a stopped Runtime writes nothing
// more and no second Runtime can start. Later writes fail.
func (j *Journal) CloseFiles() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	var errs []error
	for _, f := range domain.JournalFiles() {
		if fl := j.files[f]; fl != nil {
			errs = append(errs, fl.close())
		}
	}
	return errors.Join(errs...)
}

// Seal is CloseFiles: the stopped worker writes nothing more.
func (j *Journal) Seal() error { return j.CloseFiles() }

// Close closes the files and releases the directory lock.
func (j *Journal) Close() error {
	err := j.CloseFiles()
	return errors.Join(err, j.lock.Unlock())
}

// ErrClosed is returned by every operation after CloseFiles.
var ErrClosed = errors.New("journal closed")

// use runs f with name's file under the file's lock, connected, and with
// ctx stripped of its cancellation (see file). It fails with ErrClosed
// after CloseFiles, and with ctx's error when ctx is done before f starts.
func (j *Journal) use(ctx context.Context, name string, f func(ctx context.Context, fl *file) error) error {
	j.mu.Lock()
	closed, fl := j.closed, j.files[name]
	j.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case fl.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-fl.turn }()
	if fl.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil { // the select picks either when both are ready
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if err := fl.connect(ctx); err != nil {
		return fmt.Errorf("journal %s: %w", name, err)
	}
	return f(ctx, fl)
}

// tx runs f in one write transaction of name's file (BEGIN IMMEDIATE: the
// file's write lock) and commits it durably. When f fails, panics, or the
// commit fails, the transaction is rolled back; when that ROLLBACK fails
// (SQLite may already have rolled back, as after a full disk, or not), the
// connection is replaced so no transaction can stay open on it, and the
// error says so after the failure's own.
func (j *Journal) tx(ctx context.Context, name string, f func(ctx context.Context, fl *file) error) error {
	return j.use(ctx, name, func(ctx context.Context, fl *file) (err error) {
		if _, err := fl.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return fmt.Errorf("journal %s: begin: %w", name, err)
		}
		ended := false
		defer func() {
			if ended {
				return
			}
			if _, rerr := fl.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				fl.discard(fl.conn)
				err = errors.Join(err, fmt.Errorf("journal %s: connection replaced, as its ROLLBACK failed: %w", name, rerr))
			}
		}()
		if err := f(ctx, fl); err != nil {
			return err
		}
		if _, err := fl.conn.ExecContext(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("journal %s: commit: %w", name, err)
		}
		ended = true
		j.commits.Add(1)
		return nil
	})
}

// txDelivery runs f in one write transaction of delivery.sqlite.
func (j *Journal) txDelivery(ctx context.Context, f func(ctx context.Context, q *deliverydb.Queries) error) error {
	return j.tx(ctx, domain.DeliveryFile, func(ctx context.Context, fl *file) error { return f(ctx, fl.delivery) })
}

// readDelivery runs f with delivery.sqlite's statements outside a
// transaction.
func (j *Journal) readDelivery(ctx context.Context, f func(ctx context.Context, q *deliverydb.Queries) error) error {
	return j.use(ctx, domain.DeliveryFile, func(ctx context.Context, fl *file) error { return f(ctx, fl.delivery) })
}

// Restore reads delivery.sqlite again, verifying every row.
func (j *Journal) Restore(ctx context.Context) (domain.Checkpoint, error) {
	var cp domain.Checkpoint
	err := j.readDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		var err error
		cp, err = readDelivery(ctx, q, SchemaVersion)
		return err
	})
	return cp, err
}

// pendingState is the pending row as a write transaction checks it.
type pendingState struct {
	sequence      int64
	commandDigest string
	resultDigest  string
	hasResult     bool
	command       []byte
	startedAt     string
}

// pendingRow reads the checkpoint and the pending row inside a write
// transaction and verifies their row digests and order. The row digest
// covers the saved command and result bytes, so any change to them since
// they were written fails here; their protocol digests were verified when
// they were saved and are verified again on every start (readDelivery).
func pendingRow(ctx context.Context, q *deliverydb.Queries) (*pendingState, int64, error) {
	c, err := q.GetCheckpoint(ctx)
	if err != nil {
		return nil, 0, integrity(domain.DeliveryFile, "checkpoint", "cannot be read: %v", err)
	}
	if c.Digest != checkpointDigest(c.AcknowledgedSequence) {
		return nil, 0, integrity(domain.DeliveryFile, "checkpoint", "digest mismatch")
	}
	rows, err := q.ListPending(ctx)
	if err != nil {
		return nil, 0, integrity(domain.DeliveryFile, "pending", "cannot be read: %v", err)
	}
	switch len(rows) {
	case 0:
		return nil, c.AcknowledgedSequence, nil
	case 1:
	default:
		return nil, 0, integrity(domain.DeliveryFile, "pending", "%d pending commands", len(rows))
	}
	r := rows[0]
	if err := checkPendingRow(r); err != nil {
		return nil, 0, err
	}
	if r.Sequence != c.AcknowledgedSequence+1 {
		return nil, 0, integrity(domain.DeliveryFile, fmt.Sprintf("pending (sequence %d)", r.Sequence), "pending sequence does not follow the checkpoint %d", c.AcknowledgedSequence)
	}
	return &pendingState{sequence: r.Sequence, commandDigest: r.CommandDigest, resultDigest: r.ResultDigest.String,
		hasResult: r.Result != nil, command: r.Command, startedAt: r.StartedAt}, c.AcknowledgedSequence, nil
}

// SavePending persists p as the pending command (commit #1), first
// clearing the folded acknowledgement prior when given. Repeating a save
// that committed succeeds.
func (j *Journal) SavePending(ctx context.Context, p domain.Pending, prior *domain.Acknowledgement) error {
	return j.txDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		cur, acked, err := pendingRow(ctx, q)
		if err != nil {
			return err
		}
		if cur != nil && cur.sequence == p.Sequence && cur.commandDigest == p.Command.Digest {
			return nil // already saved
		}
		if prior != nil && cur != nil {
			if err := clearPending(ctx, q, cur, *prior); err != nil {
				return err
			}
			cur, acked = nil, prior.Sequence
		}
		row := fmt.Sprintf("pending (sequence %d)", p.Sequence)
		if p.Command.Digest == "" || p.Command.Sequence != p.Sequence {
			return integrity(domain.DeliveryFile, row, "the command to save is not a verified pulled command")
		}
		if cur != nil {
			return integrity(domain.DeliveryFile, row, "command %d is still pending", cur.sequence)
		}
		if p.Sequence != acked+1 {
			return integrity(domain.DeliveryFile, row, "does not follow the checkpoint %d", acked)
		}
		startedAt := ""
		if !p.StartedAt.IsZero() {
			startedAt = p.StartedAt.UTC().Format(time.RFC3339Nano)
		}
		return q.InsertPending(ctx, deliverydb.InsertPendingParams{
			Sequence: p.Sequence, Command: p.Raw, CommandDigest: p.Command.Digest, StartedAt: startedAt,
			Digest: pendingDigest(p.Sequence, p.Raw, p.Command.Digest, nil, sql.NullString{}, startedAt),
		})
	})
}

func clearPending(ctx context.Context, q *deliverydb.Queries, cur *pendingState, ack domain.Acknowledgement) error {
	row := fmt.Sprintf("pending (sequence %d)", cur.sequence)
	if cur.sequence != ack.Sequence || !cur.hasResult || cur.resultDigest != ack.ResultDigest {
		return integrity(domain.DeliveryFile, row, "the acknowledged result is %d/%s; the saved one is %d/%s", ack.Sequence, ack.ResultDigest, cur.sequence, cur.resultDigest)
	}
	n, err := q.DeletePending(ctx, ack.Sequence)
	if err != nil {
		return fmt.Errorf("journal %s: clear %s: %w", domain.DeliveryFile, row, err)
	}
	if n != 1 {
		return integrity(domain.DeliveryFile, row, "vanished while clearing")
	}
	if err := q.SetCheckpoint(ctx, deliverydb.SetCheckpointParams{AcknowledgedSequence: ack.Sequence, Digest: checkpointDigest(ack.Sequence)}); err != nil {
		return fmt.Errorf("journal %s: advance checkpoint: %w", domain.DeliveryFile, err)
	}
	return nil
}

// SaveResult persists the exact result of the pending command (commit #2)
// with its protocol digest (verified against the bytes on every start, and
// by the server on receipt).
// Saving the same bytes again succeeds; other bytes for a command whose
// result is saved are an integrity failure.
func (j *Journal) SaveResult(ctx context.Context, sequence int64, result []byte, resultDigest string) error {
	return j.txDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		cur, _, err := pendingRow(ctx, q)
		if err != nil {
			return err
		}
		row := fmt.Sprintf("pending (sequence %d)", sequence)
		switch {
		case cur == nil || cur.sequence != sequence:
			return integrity(domain.DeliveryFile, row, "no such pending command")
		case cur.hasResult && cur.resultDigest == resultDigest:
			return nil
		case cur.hasResult:
			return integrity(domain.DeliveryFile, row, "another result (%s) is saved", cur.resultDigest)
		}
		rd := sql.NullString{String: resultDigest, Valid: true}
		n, err := q.SetPendingResult(ctx, deliverydb.SetPendingResultParams{
			Result: result, ResultDigest: rd, Sequence: sequence,
			Digest: pendingDigest(sequence, cur.command, cur.commandDigest, result, rd, cur.startedAt),
		})
		if err != nil {
			return fmt.Errorf("journal %s: save result of %s: %w", domain.DeliveryFile, row, err)
		}
		if n != 1 {
			return integrity(domain.DeliveryFile, row, "changed while saving the result")
		}
		return nil
	})
}

// Acknowledge clears the acknowledged pending command and advances the
// checkpoint (commit #3). Repeating it after it committed succeeds.
func (j *Journal) Acknowledge(ctx context.Context, ack domain.Acknowledgement) error {
	return j.txDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		cur, acked, err := pendingRow(ctx, q)
		if err != nil {
			return err
		}
		if cur == nil {
			if acked >= ack.Sequence {
				return nil
			}
			return integrity(domain.DeliveryFile, fmt.Sprintf("pending (sequence %d)", ack.Sequence), "no such pending command")
		}
		return clearPending(ctx, q, cur, ack)
	})
}

// Resolve returns the member binding for ref.
func (j *Journal) Resolve(ctx context.Context, ref siteprotocol.AccountRef) (domain.MemberBinding, bool, error) {
	var rows []deliverydb.MemberBinding
	err := j.readDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		var err error
		if rows, err = q.GetMemberBinding(ctx, deliverydb.GetMemberBindingParams{BindingID: ref.BindingID, Generation: ref.Generation}); err != nil {
			return fmt.Errorf("journal %s: read member binding: %w", domain.DeliveryFile, err)
		}
		return nil
	})
	if err != nil {
		return domain.MemberBinding{}, false, err
	}
	if len(rows) == 0 {
		return domain.MemberBinding{}, false, nil
	}
	b, err := memberFromRow(rows[0])
	return b, err == nil, err
}

// Generations returns every stored generation of bindingID.
func (j *Journal) Generations(ctx context.Context, bindingID string) ([]domain.MemberBinding, error) {
	var rows []deliverydb.MemberBinding
	err := j.readDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		var err error
		if rows, err = q.ListBindingGenerations(ctx, bindingID); err != nil {
			return fmt.Errorf("journal %s: read member bindings: %w", domain.DeliveryFile, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return membersFromRows(rows)
}

// membersFromRows converts the journal's rows of member bindings, in their order.
func membersFromRows(rows []deliverydb.MemberBinding) ([]domain.MemberBinding, error) {
	out := make([]domain.MemberBinding, 0, len(rows))
	for _, r := range rows {
		b, err := memberFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// LiveOfAccount returns every live (not retired) binding naming account,
// in (binding, generation) order.
func (j *Journal) LiveOfAccount(ctx context.Context, account string) ([]domain.MemberBinding, error) {
	var rows []deliverydb.MemberBinding
	err := j.readDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		var err error
		if rows, err = q.ListLiveBindingsOfAccount(ctx, account); err != nil {
			return fmt.Errorf("journal %s: read member bindings of account %s: %w", domain.DeliveryFile, account, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return membersFromRows(rows)
}

// Save writes member bindings in one durable commit.
func (j *Journal) Save(ctx context.Context, rows []domain.MemberBinding) error {
	return j.txDelivery(ctx, func(ctx context.Context, q *deliverydb.Queries) error {
		for _, b := range rows {
			r := deliverydb.MemberBinding{
				BindingID: b.BindingID, Generation: b.Generation, Revision: b.Revision, PartyID: b.PartyID,
				ProjectID: b.ProjectID, Namespace: b.Namespace, Account: b.Account, AppliedBy: b.AppliedBy,
				AccountUid: b.AccountUID,
			}
			if b.Retired {
				r.Retired = 1
			}
			r.Digest = memberDigest(r)
			if err := q.UpsertMemberBinding(ctx, deliverydb.UpsertMemberBindingParams(r)); err != nil {
				return fmt.Errorf("journal %s: save member binding %s/%d: %w", domain.DeliveryFile, b.BindingID, b.Generation, err)
			}
		}
		return nil
	})
}

func memberFromRow(r deliverydb.MemberBinding) (domain.MemberBinding, error) {
	if r.Digest != memberDigest(r) {
		return domain.MemberBinding{}, integrity(domain.DeliveryFile, fmt.Sprintf("member_bindings (binding %s, generation %d)", r.BindingID, r.Generation), "digest mismatch")
	}
	return domain.MemberBinding{
		BindingID: r.BindingID, Generation: r.Generation, Revision: r.Revision, PartyID: r.PartyID,
		ProjectID: r.ProjectID, Namespace: r.Namespace, Account: r.Account, Retired: r.Retired == 1, AppliedBy: r.AppliedBy,
		AccountUID: r.AccountUid,
	}, nil
}

// Records is the native record store of jobs.sqlite or services.sqlite
// (application.BatchRecords, application.ServiceRecords).
type Records struct {
	j    *Journal
	file string
}

// Batch returns jobs.sqlite's records.
func (j *Journal) Batch() *Records { return &Records{j: j, file: domain.JobsFile} }

// Services returns services.sqlite's records.
func (j *Journal) Services() *Records { return &Records{j: j, file: domain.ServicesFile} }

// SaveRecord inserts or replaces r in one durable commit. The spec digest
// is computed from r.Spec; a given SpecDigest must match it.
func (s *Records) SaveRecord(ctx context.Context, r domain.NativeRecord) error {
	digest := sha256Hex(r.Spec)
	if r.SpecDigest != "" && r.SpecDigest != digest {
		return fmt.Errorf("journal %s: record %s %s: spec digest %s does not match the specification (%s)", s.file, r.Kind, r.Name, r.SpecDigest, digest)
	}
	spec := r.Spec
	if spec == nil {
		spec = []byte{}
	}
	row := recordsdb.NativeRecord{
		AttemptID: r.AttemptID, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, Uid: r.UID,
		ServiceKind: r.ServiceKind, Phase: r.Phase, CommandID: r.CommandID, Sequence: r.Sequence,
		Spec: spec, SpecDigest: digest,
	}
	row.Digest = recordDigest(row)
	return s.j.tx(ctx, s.file, func(ctx context.Context, fl *file) error {
		if err := fl.records.UpsertNativeRecord(ctx, recordsdb.UpsertNativeRecordParams(row)); err != nil {
			return fmt.Errorf("journal %s: save record %s %s: %w", s.file, r.Kind, r.Name, err)
		}
		return nil
	})
}

// Records returns the Attempt's records, verifying each.
func (s *Records) Records(ctx context.Context, attemptID string) ([]domain.NativeRecord, error) {
	var rows []recordsdb.NativeRecord
	err := s.j.use(ctx, s.file, func(ctx context.Context, fl *file) error {
		var err error
		if rows, err = fl.records.ListNativeRecords(ctx, attemptID); err != nil {
			return fmt.Errorf("journal %s: read records: %w", s.file, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]domain.NativeRecord, 0, len(rows))
	for _, r := range rows {
		nr := r
		if nr.Digest != recordDigest(nr) || nr.SpecDigest != sha256Hex(nr.Spec) {
			return nil, integrity(s.file, fmt.Sprintf("native_records (attempt %s, %s %s)", r.AttemptID, r.Kind, r.Name), "digest mismatch")
		}
		out = append(out, domain.NativeRecord{
			AttemptID: r.AttemptID, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, UID: r.Uid,
			ServiceKind: r.ServiceKind, Phase: r.Phase, CommandID: r.CommandID, Sequence: r.Sequence,
			Spec: r.Spec, SpecDigest: r.SpecDigest,
		})
	}
	return out, nil
}

// Interface checks.
var (
	_ application.RuntimeJournal = (*Journal)(nil)
	_ application.MemberBindings = (*Journal)(nil)
	_ application.BatchRecords   = (*Records)(nil)
	_ application.ServiceRecords = (*Records)(nil)
)
