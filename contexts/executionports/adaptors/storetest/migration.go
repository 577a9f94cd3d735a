package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pharos-metallo/metallo/contexts/executionports/application"
	"github.com/pharos-metallo/metallo/platform/database"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
	sqlfiles "github.com/pharos-metallo/metallo/sql"
)

// retentionVersion is the migration that adds the operation and expiry of
// results (sql/<engine>/executionports/migrations/00004_read_result_retention.sql).
const retentionVersion int64 = 4

// ExerciseRetentionMigration checks the migration to where read results
// live on h, an empty database of h's engine: commands stored before it
// get their operation from their canonical form (so a read's result stored
// before the upgrade expires like a new one), results are kept, and
// migrating down is refused while a result has expired (its content cannot
// come back). newStore opens the store on h.
func ExerciseRetentionMigration(t *testing.T, h *database.Handle, newStore func(*database.Handle) application.StreamStore) {
	ctx := context.Background()
	migrations, err := sqlfiles.Migrations(string(h.Target.Engine), "executionports")
	if err != nil {
		t.Fatal(err)
	}
	migrateTo := func(version int64) (int64, error) {
		return h.MigrateTo(ctx, migrations, "execution_ports", version)
	}
	if _, err := migrateTo(retentionVersion - 1); err != nil {
		t.Fatalf("migrate to %d: %v", retentionVersion-1, err)
	}

	// Rows as the version before wrote them: a read-logs and an observe
	// command, both acknowledged, and an unacknowledged read-file.
	logs := ReadCommand(t, 43, 1, siteprotocol.OpReadLogs)
	obs, _ := Command(t, 43, 2)
	file := ReadCommand(t, 43, 3, siteprotocol.OpReadFile)
	rLogs, rObs := ReadResult(t, logs, 1, "old log"), Result(t, obs, 2, "observed")
	acked := "2026-11-29T10:00:00Z"
	if _, err := h.DB.ExecContext(ctx, `INSERT INTO streams (environment, head_sequence, acknowledged_sequence, installation_id, bound_at, created_at)
		VALUES ($1, 3, 2, $2, $3, $3)`, "alpha-k8s", inst, acked); err != nil {
		t.Fatalf("insert stream: %v", err)
	}
	for i, c := range []struct {
		cmd application.NewCommand
		r   *application.ReceivedResult
	}{{logs, &rLogs}, {obs, &rObs}, {file, nil}} {
		var result []byte
		var digest, at any
		if c.r != nil {
			result, digest, at = c.r.Bytes, c.r.Digest, acked
		}
		if _, err := h.DB.ExecContext(ctx, `INSERT INTO commands (environment, sequence, command_id, digest, canonical, appended_at, result, result_digest, acknowledged_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, "alpha-k8s", i+1, c.cmd.ID, c.cmd.Digest, c.cmd.Canonical, acked, result, digest, at); err != nil {
			t.Fatalf("insert command %d: %v", i+1, err)
		}
	}

	if _, err := migrateTo(retentionVersion); err != nil {
		t.Fatalf("migrate to %d: %v", retentionVersion, err)
	}
	s := newStore(h)
	held(t, s, logs.ID, rLogs)
	held(t, s, obs.ID, rObs)
	ackedAt := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := ackedAt.Add(time.Hour)
	if n, err := application.ExpireReadResults(ctx, s, at, time.Hour); err != nil || n != 1 {
		t.Fatalf("expire after the upgrade: %d, %v; want the read-logs result", n, err)
	}
	expired(t, s, "alpha-k8s", logs.ID, rLogs, ackedAt, at)
	held(t, s, obs.ID, rObs)
	rFile := ReadResult(t, file, 3, "a file")
	mustApplyAt(t, s, "alpha-k8s", 3, rFile, at)
	held(t, s, file.ID, rFile)

	v, err := migrateTo(retentionVersion - 1)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "check") {
		t.Fatalf("migrating down with an expired result: %v; want it refused by the CHECK constraint", err)
	}
	t.Logf("migrating down refused: %v", err)
	if v != retentionVersion {
		t.Fatalf("version after the refused down: %d; want %d", v, retentionVersion)
	}
	expired(t, s, "alpha-k8s", logs.ID, rLogs, ackedAt, at)
}
