package journal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/deliverydb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/journal/recordsdb"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Row digests, one function per table.

func metaDigest(file string, version int64, installationID string) string {
	return rowDigest("journal_meta").S(file).I(version).S(installationID).Sum()
}

func bindingDigest(b domain.Binding) string {
	return rowDigest("binding").S(b.Environment).S(b.Authority).S(b.InstallationID).Sum()
}

func checkpointDigest(acknowledged int64) string {
	return rowDigest("checkpoint").I(acknowledged).Sum()
}

func pendingDigest(seq int64, command []byte, commandDigest string, result []byte, resultDigest sql.NullString, startedAt string) string {
	d := rowDigest("pending").I(seq).B(command).S(commandDigest).B(result)
	if resultDigest.Valid {
		d = d.S(resultDigest.String)
	} else {
		d = d.B(nil)
	}
	// started_at (schema version 4) joins the digest only when set, so a
	// row written before it keeps its digest through the upgrade.
	if startedAt != "" {
		d = d.S(startedAt)
	}
	return d.Sum()
}

func memberDigest(m deliverydb.MemberBinding) string {
	d := rowDigest("member_bindings").S(m.BindingID).I(m.Generation).I(m.Revision).S(m.PartyID).S(m.ProjectID).
		S(m.Namespace).S(m.Account).I(m.Retired).S(m.AppliedBy)
	// account_uid (schema version 3) joins the digest only when set, so a
	// row written before it keeps its digest through the upgrade.
	if m.AccountUid != "" {
		d = d.S(m.AccountUid)
	}
	return d.Sum()
}

func recordDigest(r recordsdb.NativeRecord) string {
	return rowDigest("native_records").S(r.AttemptID).S(r.Kind).S(r.Name).S(r.Namespace).S(r.Uid).S(r.ServiceKind).
		S(r.Phase).S(r.CommandID).I(r.Sequence).B(r.Spec).S(r.SpecDigest).Sum()
}

// metaRow is a journal_meta row (the same in every file).
type metaRow struct {
	File           string
	SchemaVersion  int64
	InstallationID string
	Digest         string
}

// checkMeta verifies the journal_meta row of file, as read by get: the
// file name and schema version first (an unknown version is reported as
// such, before any digest), then its digest. Every version from 1 to
// SchemaVersion is known (a file of an earlier one awaits its upgrade:
// upgrade.go); the caller decides which it accepts.
func checkMeta(file string, get func() (metaRow, error)) (metaRow, error) {
	m, err := get()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return m, integrity(file, "journal_meta", "missing")
	case err != nil:
		return m, integrity(file, "journal_meta", "cannot be read: %v", err)
	case m.SchemaVersion < 1 || m.SchemaVersion > SchemaVersion:
		return m, integrity(file, "journal_meta", "unknown schema version %d; this Runtime knows versions 1 to %d and never converts a journal to an unknown version", m.SchemaVersion, SchemaVersion)
	case m.File != file:
		return m, integrity(file, "journal_meta", "the file says it is %s", m.File)
	case m.Digest != metaDigest(m.File, m.SchemaVersion, m.InstallationID):
		return m, integrity(file, "journal_meta", "digest mismatch")
	}
	return m, nil
}

func deliveryMeta(ctx context.Context, q *deliverydb.Queries) func() (metaRow, error) {
	return func() (metaRow, error) {
		m, err := q.GetMeta(ctx)
		return metaRow(m), err
	}
}

func recordsMeta(ctx context.Context, q *recordsdb.Queries) func() (metaRow, error) {
	return func() (metaRow, error) {
		m, err := q.GetMeta(ctx)
		return metaRow(m), err
	}
}

// readDelivery reads and verifies every row of delivery.sqlite and returns
// the checkpoint it holds.
func readDelivery(ctx context.Context, q *deliverydb.Queries, version int64) (domain.Checkpoint, error) {
	const file = domain.DeliveryFile
	var cp domain.Checkpoint
	m, err := checkMeta(file, deliveryMeta(ctx, q))
	if err != nil {
		return cp, err
	}
	b, err := q.GetBinding(ctx)
	if err != nil {
		return cp, integrity(file, "binding", "cannot be read: %v", err)
	}
	cp.Binding = domain.Binding{Environment: b.Environment, Authority: b.Authority, InstallationID: b.InstallationID}
	if b.Digest != bindingDigest(cp.Binding) {
		return cp, integrity(file, "binding", "digest mismatch")
	}
	if b.InstallationID != m.InstallationID {
		return cp, integrity(file, "binding", "installation %s differs from the file's installation %s", b.InstallationID, m.InstallationID)
	}
	c, err := q.GetCheckpoint(ctx)
	if err != nil {
		return cp, integrity(file, "checkpoint", "cannot be read: %v", err)
	}
	if c.Digest != checkpointDigest(c.AcknowledgedSequence) {
		return cp, integrity(file, "checkpoint", "digest mismatch")
	}
	cp.Acknowledged = c.AcknowledgedSequence
	rows, err := listPending(ctx, q, version)
	if err != nil {
		return cp, integrity(file, "pending", "cannot be read: %v", err)
	}
	if len(rows) > 1 {
		return cp, integrity(file, "pending", "%d pending commands; at most one may be pending", len(rows))
	}
	if len(rows) == 1 {
		p, err := checkPending(rows[0], cp.Acknowledged)
		if err != nil {
			return cp, err
		}
		cp.Pending = p
	}
	members, err := listMembers(ctx, q, version)
	if err != nil {
		return cp, integrity(file, "member_bindings", "cannot be read: %v", err)
	}
	for _, mb := range members {
		if mb.Digest != memberDigest(mb) {
			return cp, integrity(file, fmt.Sprintf("member_bindings (binding %s, generation %d)", mb.BindingID, mb.Generation), "digest mismatch")
		}
	}
	return cp, nil
}

// checkPending verifies a pending row: its digest, the saved command
// against its protocol digest and sequence, the saved result (if any)
// against its digest and the command it answers, and its place right after
// the checkpoint.
func checkPending(r deliverydb.ListPendingRow, acknowledged int64) (*domain.Pending, error) {
	const file = domain.DeliveryFile
	row := fmt.Sprintf("pending (sequence %d)", r.Sequence)
	cmd, err := siteprotocol.ParsePulled(r.Command)
	if err != nil {
		return nil, integrity(file, row, "saved command: %v", err)
	}
	if cmd.Digest != r.CommandDigest || cmd.Sequence != r.Sequence {
		return nil, integrity(file, row, "saved command is %d with digest %s", cmd.Sequence, cmd.Digest)
	}
	if r.Sequence != acknowledged+1 {
		return nil, integrity(file, row, "pending sequence does not follow the checkpoint %d", acknowledged)
	}
	p := &domain.Pending{Sequence: r.Sequence, Raw: r.Command, Command: cmd}
	if r.StartedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, r.StartedAt)
		if err != nil || t.Location() != time.UTC {
			return nil, integrity(file, row, "started_at %q is not an RFC 3339 time in UTC", r.StartedAt)
		}
		p.StartedAt = t
	}
	if r.Result == nil {
		if r.ResultDigest.Valid {
			return nil, integrity(file, row, "result digest without a result")
		}
		return p, checkPendingRow(r)
	}
	res, err := siteprotocol.ParseResult(r.Result)
	if err != nil {
		return nil, integrity(file, row, "saved result: %v", err)
	}
	if !r.ResultDigest.Valid || res.Digest != r.ResultDigest.String {
		return nil, integrity(file, row, "saved result digest %s differs from the recorded %s", res.Digest, r.ResultDigest.String)
	}
	if res.Sequence != cmd.Sequence || res.CommandID != cmd.ID || res.CommandDigest != cmd.Digest {
		return nil, integrity(file, row, "saved result answers command %s (%d), not the pending command", res.CommandID, res.Sequence)
	}
	p.Result, p.ResultDigest = r.Result, res.Digest
	return p, checkPendingRow(r)
}

// checkPendingRow verifies the pending row's own digest (after its
// command and result, so that a damaged command or result is named as
// such).
func checkPendingRow(r deliverydb.ListPendingRow) error {
	if r.Digest != pendingDigest(r.Sequence, r.Command, r.CommandDigest, r.Result, r.ResultDigest, r.StartedAt) {
		return integrity(domain.DeliveryFile, fmt.Sprintf("pending (sequence %d)", r.Sequence), "digest mismatch")
	}
	return nil
}

// checkRecords verifies every native record of jobs.sqlite or
// services.sqlite.
func checkRecords(ctx context.Context, q *recordsdb.Queries, file string) error {
	rows, err := q.ListAllNativeRecords(ctx)
	if err != nil {
		return integrity(file, "native_records", "cannot be read: %v", err)
	}
	for _, r := range rows {
		row := fmt.Sprintf("native_records (attempt %s, %s %s)", r.AttemptID, r.Kind, r.Name)
		if r.Digest != recordDigest(r) {
			return integrity(file, row, "digest mismatch")
		}
		if r.SpecDigest != sha256Hex(r.Spec) {
			return integrity(file, row, "specification digest mismatch")
		}
	}
	return nil
}

// quickCheck runs SQLite's structural check (it reads every page, so a
// truncated or garbled file fails here).
func quickCheck(ctx context.Context, db *sql.DB, file string) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return integrity(file, "", "cannot be read: %v", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return integrity(file, "", "cannot be read: %v", err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return integrity(file, "", "cannot be read: %v", err)
	}
	if len(problems) > 0 {
		if len(problems) > 3 {
			problems = append(problems[:3], "…")
		}
		return integrity(file, "", "damaged: %s", strings.Join(problems, "; "))
	}
	return nil
}

// checkFile verifies one open journal file, at whichever known schema
// version it is, and returns its journal_meta row (installation ID and
// version) and, for delivery.sqlite, its checkpoint.
func checkFile(ctx context.Context, db *sql.DB, file string) (metaRow, domain.Checkpoint, error) {
	if err := quickCheck(ctx, db, file); err != nil {
		return metaRow{}, domain.Checkpoint{}, err
	}
	if file == domain.DeliveryFile {
		q := deliverydb.New(db)
		m, err := checkMeta(file, deliveryMeta(ctx, q))
		if err != nil {
			return m, domain.Checkpoint{}, err
		}
		cp, err := readDelivery(ctx, q, m.SchemaVersion)
		return m, cp, err
	}
	q := recordsdb.New(db)
	m, err := checkMeta(file, recordsMeta(ctx, q))
	if err != nil {
		return m, domain.Checkpoint{}, err
	}
	if err := checkRecords(ctx, q, file); err != nil {
		return m, domain.Checkpoint{}, err
	}
	if m.SchemaVersion >= 2 {
		return m, domain.Checkpoint{}, checkTerminalStates(ctx, q, file)
	}
	return m, domain.Checkpoint{}, nil
}

// ErrNotInstalled is returned when the directory holds no journal at all.
var ErrNotInstalled = errors.New("no journals: run `metallo runtime install` first")

// verifySetVersions checks the complete journal set in dir read-only, each
// file at whichever known schema version it is, and returns
// delivery.sqlite's checkpoint and each file's version. Opening neither
// creates nor modifies any file of the directory, -wal and -shm included.
func verifySetVersions(ctx context.Context, dir string) (domain.Checkpoint, map[string]int64, error) {
	set, err := presentFiles(dir)
	if err != nil {
		return domain.Checkpoint{}, nil, err
	}
	if set.Empty() {
		return domain.Checkpoint{}, nil, fmt.Errorf("journal directory %s: %w", dir, ErrNotInstalled)
	}
	if missing := set.Missing(); len(missing) > 0 {
		return domain.Checkpoint{}, nil, integrity(missing[0], "", "missing from %s (present: %s); the journal set must be restored together, never recreated",
			dir, strings.Join(set.Present, ", "))
	}
	var cp domain.Checkpoint
	ids, versions := map[string]string{}, map[string]int64{}
	for _, f := range domain.JournalFiles() {
		m, fcp, err := verifyFileReadOnly(ctx, filepath.Join(dir, f), f)
		if err != nil {
			return domain.Checkpoint{}, nil, err
		}
		ids[f], versions[f] = m.InstallationID, m.SchemaVersion
		if f == domain.DeliveryFile {
			cp = fcp
		}
	}
	for _, f := range domain.JournalFiles() {
		if ids[f] != ids[domain.DeliveryFile] {
			return domain.Checkpoint{}, nil, integrity(f, "journal_meta", "belongs to installation %s; %s belongs to %s", ids[f], domain.DeliveryFile, ids[domain.DeliveryFile])
		}
	}
	return cp, versions, nil
}

// verifyFileReadOnly opens path read-only so that nothing in the
// directory changes:
//   - without a -wal file the content is all in the main file: it is opened
//     immutable (SQLite touches no -wal/-shm and takes no locks);
//   - with -wal and -shm: mode=ro with readonly_shm=1, so SQLite reads the
//     WAL through a private copy of its index and writes nothing;
//   - with a -wal but no -shm, SQLite cannot read the WAL without creating
//     the index: the file and its WAL are copied to a private temporary
//     directory and checked there.
func verifyFileReadOnly(ctx context.Context, path, file string) (metaRow, domain.Checkpoint, error) {
	wal, err := exists(path + "-wal")
	if err != nil {
		return metaRow{}, domain.Checkpoint{}, err
	}
	shm, err := exists(path + "-shm")
	if err != nil {
		return metaRow{}, domain.Checkpoint{}, err
	}
	if wal {
		if _, err := checkWAL(path+"-wal", path+"-shm", file); err != nil {
			return metaRow{}, domain.Checkpoint{}, err
		}
	} else if shm {
		if err := missingWAL(path+"-shm", file); err != nil {
			return metaRow{}, domain.Checkpoint{}, err
		}
	}
	var dsn string
	switch {
	case !wal:
		dsn = "file:" + path + "?mode=ro&immutable=1&_pragma=query_only(1)"
	case shm:
		dsn = "file:" + path + "?mode=ro&readonly_shm=1&_pragma=query_only(1)&_pragma=busy_timeout(10000)"
	default:
		tmp, err := os.MkdirTemp("", "metallo-journal-check-")
		if err != nil {
			return metaRow{}, domain.Checkpoint{}, fmt.Errorf("check %s: %w", file, err)
		}
		defer os.RemoveAll(tmp)
		for _, suffix := range []string{"", "-wal"} {
			if err := copyFile(path+suffix, filepath.Join(tmp, file+suffix)); err != nil {
				return metaRow{}, domain.Checkpoint{}, fmt.Errorf("check %s: %w", file, err)
			}
		}
		dsn = "file:" + filepath.Join(tmp, file) + "?mode=rw&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return metaRow{}, domain.Checkpoint{}, integrity(file, "", "cannot be opened: %v", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return checkFile(ctx, db, file)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// listPending reads the pending row of a delivery.sqlite at version
// (before version 4 there is no started_at column; it reads as empty).
func listPending(ctx context.Context, q *deliverydb.Queries, version int64) ([]deliverydb.ListPendingRow, error) {
	if version >= 4 {
		return q.ListPending(ctx)
	}
	rows, err := q.ListPendingV3(ctx)
	out := make([]deliverydb.ListPendingRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, deliverydb.ListPendingRow{Sequence: r.Sequence, Command: r.Command, CommandDigest: r.CommandDigest,
			Result: r.Result, ResultDigest: r.ResultDigest, Digest: r.Digest})
	}
	return out, err
}

// listMembers reads every member binding of a delivery.sqlite at version
// (before version 3 there is no account_uid column; it reads as empty).
func listMembers(ctx context.Context, q *deliverydb.Queries, version int64) ([]deliverydb.MemberBinding, error) {
	if version >= 3 {
		return q.ListMemberBindings(ctx)
	}
	rows, err := q.ListMemberBindingsV2(ctx)
	out := make([]deliverydb.MemberBinding, 0, len(rows))
	for _, r := range rows {
		out = append(out, deliverydb.MemberBinding{BindingID: r.BindingID, Generation: r.Generation, Revision: r.Revision,
			PartyID: r.PartyID, ProjectID: r.ProjectID, Namespace: r.Namespace, Account: r.Account, Retired: r.Retired,
			AppliedBy: r.AppliedBy, Digest: r.Digest})
	}
	return out, err
}
