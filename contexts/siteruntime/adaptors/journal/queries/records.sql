-- name: UpsertNativeRecord :exec
INSERT INTO native_records (attempt_id, kind, name, namespace, uid, service_kind, phase, command_id, sequence, spec, spec_digest, digest)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (attempt_id, kind, name) DO UPDATE SET
    namespace = excluded.namespace, uid = excluded.uid, service_kind = excluded.service_kind, phase = excluded.phase,
    command_id = excluded.command_id, sequence = excluded.sequence, spec = excluded.spec,
    spec_digest = excluded.spec_digest, digest = excluded.digest;

-- name: ListNativeRecords :many
SELECT attempt_id, kind, name, namespace, uid, service_kind, phase, command_id, sequence, spec, spec_digest, digest
FROM native_records WHERE attempt_id = ? ORDER BY kind, name;

-- name: ListAllNativeRecords :many
SELECT attempt_id, kind, name, namespace, uid, service_kind, phase, command_id, sequence, spec, spec_digest, digest
FROM native_records ORDER BY attempt_id, kind, name;

-- name: InsertTerminalState :execrows
INSERT INTO terminal_states (attempt_id, kind, name, namespace, uid, state, reason, message, started_at, finished_at, exit_code, observed_at, digest)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (attempt_id, kind, name, uid) DO NOTHING;

-- name: GetTerminalState :many
SELECT attempt_id, kind, name, namespace, uid, state, reason, message, started_at, finished_at, exit_code, observed_at, digest
FROM terminal_states WHERE attempt_id = ? AND kind = ? AND name = ? AND uid = ?;

-- name: ListAllTerminalStates :many
SELECT attempt_id, kind, name, namespace, uid, state, reason, message, started_at, finished_at, exit_code, observed_at, digest
FROM terminal_states ORDER BY attempt_id, kind, name, uid;
