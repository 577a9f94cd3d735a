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
INSERT INTO commands (environment, sequence, command_id, operation, digest, canonical, appended_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (command_id) DO NOTHING;

-- name: StreamState :one
SELECT environment, head_sequence, acknowledged_sequence, installation_id, bound_at
FROM streams WHERE environment = ?;

-- name: CommandsAfter :many
-- The commands after sqlc.arg(after), oldest first, at most
-- sqlc.arg(max_count) of them (sequences are gapless, so the range bounds
-- the scan), while the sum of their canonical sizes stays within
-- sqlc.arg(max_bytes); the first is always returned. length() of a BLOB
-- reads its size from the record header, not the value.
SELECT c.sequence, c.digest, c.canonical FROM commands c
WHERE c.environment = sqlc.arg(environment)
  AND c.sequence > sqlc.arg(after) AND c.sequence <= sqlc.arg(after) + CAST(sqlc.arg(max_count) AS INTEGER)
  AND (c.sequence = sqlc.arg(after) + 1 OR (
      SELECT sum(length(d.canonical)) FROM commands d
      WHERE d.environment = c.environment AND d.sequence > sqlc.arg(after) AND d.sequence <= c.sequence
  ) <= CAST(sqlc.arg(max_bytes) AS INTEGER))
ORDER BY c.sequence;

-- name: CommandAt :one
SELECT command_id, digest, result_digest FROM commands
WHERE environment = ? AND sequence = ?;

-- name: CommandRecord :one
SELECT sequence, digest, canonical, result, result_digest, appended_at, acknowledged_at, result_expired_at
FROM commands WHERE environment = ? AND command_id = ?;

-- name: RecordResult :execrows
UPDATE commands SET result = sqlc.arg(result), result_digest = sqlc.arg(result_digest), acknowledged_at = sqlc.arg(acknowledged_at)
WHERE environment = sqlc.arg(environment) AND sequence = sqlc.arg(sequence) AND result_digest IS NULL;

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

-- name: ExpireResults :execrows
-- Drops the content of at most sqlc.arg(max_count) held results of the
-- commands of operation sqlc.arg(operation) acknowledged at or before
-- sqlc.arg(acknowledged_before), oldest first, keeping their digests and
-- recording sqlc.arg(expired_at) (docs/execution-ports.md#read-results-retention).
-- Times are compared by julianday(): RFC 3339 text with trimmed fractions
-- does not sort as text.
UPDATE commands SET result = NULL, result_expired_at = sqlc.arg(expired_at)
WHERE result IS NOT NULL AND (environment, sequence) IN (
    SELECT c.environment, c.sequence FROM commands c
    WHERE c.operation = sqlc.arg(operation) AND c.result IS NOT NULL
      AND julianday(c.acknowledged_at) <= julianday(CAST(sqlc.arg(acknowledged_before) AS TEXT))
    ORDER BY julianday(c.acknowledged_at)
    LIMIT CAST(sqlc.arg(max_count) AS INTEGER)
);

-- name: RecordRuntimeVersion :exec
-- Keeps the later pull: a row pulled after sqlc.arg(pulled_at) stays
-- (docs/execution-ports.md#runtime-versions). Times are compared by
-- julianday(): RFC 3339 text with trimmed fractions does not sort as text.
INSERT INTO runtime_versions (environment, installation_id, version, pulled_at)
VALUES (sqlc.arg(environment), sqlc.arg(installation_id), sqlc.arg(version), sqlc.arg(pulled_at))
ON CONFLICT (environment) DO UPDATE SET
    installation_id = excluded.installation_id, version = excluded.version, pulled_at = excluded.pulled_at
WHERE julianday(runtime_versions.pulled_at) <= julianday(excluded.pulled_at);

-- name: RuntimeVersion :one
SELECT installation_id, version, pulled_at FROM runtime_versions WHERE environment = ?;

-- name: RecordRuntimeStop :exec
-- The stop a Runtime reported replaces any earlier one of its stream
-- (docs/execution-ports.md#runtime-stops).
INSERT INTO runtime_stops (environment, installation_id, reason, sequence, version, message, stopped_at)
VALUES (sqlc.arg(environment), sqlc.arg(installation_id), sqlc.arg(reason), sqlc.arg(sequence), sqlc.arg(version), sqlc.arg(message), sqlc.arg(stopped_at))
ON CONFLICT (environment) DO UPDATE SET
    installation_id = excluded.installation_id, reason = excluded.reason, sequence = excluded.sequence,
    version = excluded.version, message = excluded.message, stopped_at = excluded.stopped_at;

-- name: ClearRuntimeStop :execrows
DELETE FROM runtime_stops WHERE environment = ?;

-- name: RuntimeStop :one
SELECT installation_id, reason, sequence, version, message, stopped_at FROM runtime_stops WHERE environment = ?;

-- name: CommandsPageAfter :many
-- The operator's page of a stream's commands after sqlc.arg(after), oldest
-- first, of operation sqlc.arg(operation) ('' for any), at most
-- sqlc.arg(max_count) (docs/operations.md#operator-reads).
SELECT sequence, command_id, operation, digest, canonical, appended_at, result, result_digest, acknowledged_at, result_expired_at
FROM commands
WHERE environment = sqlc.arg(environment) AND sequence > sqlc.arg(after)
  AND (CAST(sqlc.arg(operation) AS TEXT) = '' OR operation = CAST(sqlc.arg(operation) AS TEXT))
ORDER BY sequence
LIMIT sqlc.arg(max_count);

-- name: CommandsPageBefore :many
-- The operator's page of a stream's commands before sqlc.arg(before),
-- newest first, of operation sqlc.arg(operation) ('' for any), at most
-- sqlc.arg(max_count).
SELECT sequence, command_id, operation, digest, canonical, appended_at, result, result_digest, acknowledged_at, result_expired_at
FROM commands
WHERE environment = sqlc.arg(environment) AND sequence < sqlc.arg(before)
  AND (CAST(sqlc.arg(operation) AS TEXT) = '' OR operation = CAST(sqlc.arg(operation) AS TEXT))
ORDER BY sequence DESC
LIMIT sqlc.arg(max_count);
