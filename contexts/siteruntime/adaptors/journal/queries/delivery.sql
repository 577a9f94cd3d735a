-- name: GetBinding :one
SELECT environment, authority, installation_id, digest FROM binding WHERE id = 1;

-- name: InsertBinding :exec
INSERT INTO binding (id, environment, authority, installation_id, digest) VALUES (1, ?, ?, ?, ?);

-- name: GetCheckpoint :one
SELECT acknowledged_sequence, digest FROM checkpoint WHERE id = 1;

-- name: SetCheckpoint :exec
INSERT INTO checkpoint (id, acknowledged_sequence, digest) VALUES (1, ?, ?)
ON CONFLICT (id) DO UPDATE SET acknowledged_sequence = excluded.acknowledged_sequence, digest = excluded.digest;

-- name: ListPendingV3 :many
-- The pending command of a file at schema version 3 or earlier (no
-- started_at yet), read by the upgrade's read-only verification.
SELECT sequence, command, command_digest, result, result_digest, digest FROM pending;

-- name: ListPending :many
SELECT sequence, command, command_digest, result, result_digest, digest, started_at FROM pending;

-- name: InsertPending :exec
INSERT INTO pending (id, sequence, command, command_digest, digest, started_at) VALUES (1, ?, ?, ?, ?, ?);

-- name: SetPendingResult :execrows
UPDATE pending SET result = ?, result_digest = ?, digest = ? WHERE id = 1 AND sequence = ? AND result IS NULL;

-- name: DeletePending :execrows
DELETE FROM pending WHERE id = 1 AND sequence = ?;

-- name: ListMemberBindingsV2 :many
-- The member bindings of a file at schema version 2 (no account_uid yet),
-- read by the upgrade's read-only verification.
SELECT binding_id, generation, revision, party_id, project_id, namespace, account, retired, applied_by, digest
FROM member_bindings ORDER BY binding_id, generation;

-- name: ListMemberBindings :many
SELECT binding_id, generation, revision, party_id, project_id, namespace, account, retired, applied_by, digest, account_uid
FROM member_bindings ORDER BY binding_id, generation;

-- name: ListBindingGenerations :many
SELECT binding_id, generation, revision, party_id, project_id, namespace, account, retired, applied_by, digest, account_uid
FROM member_bindings WHERE binding_id = ? ORDER BY generation;

-- name: ListLiveBindingsOfAccount :many
-- The live (not retired) bindings naming an account: one Party per account
-- (docs/site-protocol.md#member-identity-by-backend).
SELECT binding_id, generation, revision, party_id, project_id, namespace, account, retired, applied_by, digest, account_uid
FROM member_bindings WHERE account = ? AND retired = 0 ORDER BY binding_id, generation;

-- name: GetMemberBinding :many
SELECT binding_id, generation, revision, party_id, project_id, namespace, account, retired, applied_by, digest, account_uid
FROM member_bindings WHERE binding_id = ? AND generation = ?;

-- name: UpsertMemberBinding :exec
INSERT INTO member_bindings (binding_id, generation, revision, party_id, project_id, namespace, account, retired, applied_by, digest, account_uid)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (binding_id, generation) DO UPDATE SET
    revision = excluded.revision, party_id = excluded.party_id, project_id = excluded.project_id,
    namespace = excluded.namespace, account = excluded.account, retired = excluded.retired,
    applied_by = excluded.applied_by, digest = excluded.digest, account_uid = excluded.account_uid;
