-- name: EnsureStream :exec
INSERT INTO streams (environment, created_at) VALUES (?, ?)
ON CONFLICT (environment) DO NOTHING;

-- name: CommandByID :one
SELECT environment, sequence, digest FROM commands WHERE command_id = ?;

-- name: AdvanceHead :one
UPDATE streams SET head_sequence = head_sequence + 1
WHERE environment = ?
RETURNING head_sequence;

-- name: InsertCommand :execrows
INSERT INTO commands (environment, sequence, command_id, digest, canonical, appended_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (command_id) DO NOTHING;

-- name: StreamState :one
SELECT environment, head_sequence, acknowledged_sequence, installation_id, bound_at
FROM streams WHERE environment = ?;

-- name: CommandsAfter :many
SELECT sequence, digest, canonical FROM commands
WHERE environment = ? AND sequence > ?
ORDER BY sequence
LIMIT ?;

-- name: CommandAt :one
SELECT command_id, digest, result_digest FROM commands
WHERE environment = ? AND sequence = ?;

-- name: CommandRecord :one
SELECT sequence, digest, canonical, result, result_digest, appended_at, acknowledged_at
FROM commands WHERE environment = ? AND command_id = ?;

-- name: RecordResult :execrows
UPDATE commands SET result = sqlc.arg(result), result_digest = sqlc.arg(result_digest), acknowledged_at = sqlc.arg(acknowledged_at)
WHERE environment = sqlc.arg(environment) AND sequence = sqlc.arg(sequence) AND result IS NULL;

-- name: AdvanceAcknowledged :execrows
UPDATE streams SET acknowledged_sequence = sqlc.arg(sequence)
WHERE environment = sqlc.arg(environment) AND acknowledged_sequence = sqlc.arg(sequence) - 1;

-- name: SetInstallation :exec
UPDATE streams SET installation_id = sqlc.arg(installation_id), bound_at = sqlc.arg(bound_at)
WHERE environment = sqlc.arg(environment);

-- name: InsertBinding :exec
INSERT INTO stream_bindings (environment, action, installation_id, previous_installation_id, principal, reason, recorded_at)
VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: Bindings :many
SELECT action, installation_id, previous_installation_id, principal, reason, recorded_at
FROM stream_bindings WHERE environment = ? ORDER BY id;
