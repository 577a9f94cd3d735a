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
