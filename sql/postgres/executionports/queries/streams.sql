-- name: EnsureStream :exec
INSERT INTO streams (environment, created_at) VALUES ($1, $2)
ON CONFLICT (environment) DO NOTHING;

-- name: CommandByID :one
SELECT environment, sequence, digest FROM commands WHERE command_id = $1;

-- name: StreamState :one
SELECT environment, head_sequence, acknowledged_sequence, installation_id, bound_at
FROM streams WHERE environment = $1;

-- name: LockStream :one
SELECT environment, head_sequence, acknowledged_sequence, installation_id, bound_at
FROM streams WHERE environment = $1
FOR UPDATE;

-- name: CommandsAfter :many
-- At most sqlc.arg(max_count) commands after sqlc.arg(after), oldest first,
-- while the sum of their canonical sizes stays within sqlc.arg(max_bytes);
-- the first is always returned (a prefix: the running sum only grows).
-- octet_length reads the stored size without detoasting the value.
SELECT sequence, digest, canonical FROM (
    SELECT c.sequence, c.digest, c.canonical,
           sum(octet_length(c.canonical)) OVER (ORDER BY c.sequence) - octet_length(c.canonical) AS before_bytes,
           sum(octet_length(c.canonical)) OVER (ORDER BY c.sequence) AS through_bytes
    FROM commands c
    WHERE c.environment = sqlc.arg(environment) AND c.sequence > sqlc.arg(after)
    ORDER BY c.sequence
    LIMIT sqlc.arg(max_count)
) AS page
WHERE page.before_bytes = 0 OR page.through_bytes <= sqlc.arg(max_bytes)::bigint
ORDER BY page.sequence;

-- name: CommandAt :one
SELECT command_id, digest, result_digest FROM commands
WHERE environment = $1 AND sequence = $2;

-- name: CommandRecord :one
SELECT sequence, digest, canonical, result, result_digest, appended_at, acknowledged_at, result_expired_at
FROM commands WHERE environment = $1 AND command_id = $2;

-- name: RecordResult :execrows
UPDATE commands SET result = $3, result_digest = $4, acknowledged_at = $5
WHERE environment = $1 AND sequence = $2 AND result_digest IS NULL;

-- name: AdvanceAcknowledged :execrows
UPDATE streams SET acknowledged_sequence = sqlc.arg(sequence)
WHERE environment = sqlc.arg(environment) AND acknowledged_sequence = sqlc.arg(sequence)::bigint - 1;

-- name: SetInstallation :exec
UPDATE streams SET installation_id = $2, bound_at = $3 WHERE environment = $1;

-- name: InsertBinding :exec
INSERT INTO stream_bindings (environment, action, installation_id, previous_installation_id, principal, reason, recorded_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: Bindings :many
SELECT action, installation_id, previous_installation_id, principal, reason, recorded_at
FROM stream_bindings WHERE environment = $1 ORDER BY id;

-- name: AppendCommand :one
-- One statement, so one transaction: the counter row's UPDATE … RETURNING
-- takes the stream's row lock, the INSERT stores the command at the new
-- head, and pg_notify wakes the listeners of every server process at
-- commit. A command ID stored meanwhile makes the INSERT fail (unique
-- violation), which rolls the counter back: sequences stay gapless.
WITH head AS (
    UPDATE streams SET head_sequence = head_sequence + 1
    WHERE environment = sqlc.arg(environment)
    RETURNING head_sequence
), inserted AS (
    INSERT INTO commands (environment, sequence, command_id, operation, digest, canonical, appended_at)
    SELECT sqlc.arg(environment), head.head_sequence, sqlc.arg(command_id), sqlc.arg(operation), sqlc.arg(digest), sqlc.arg(canonical), sqlc.arg(appended_at)
    FROM head
    RETURNING sequence
)
SELECT inserted.sequence FROM inserted, LATERAL (SELECT pg_notify(sqlc.arg(channel)::text, sqlc.arg(environment)::text)) AS notified;

-- name: ExpireResults :execrows
-- Drops the content of at most sqlc.arg(max_count) held results of the
-- commands of operation sqlc.arg(operation) acknowledged at or before
-- sqlc.arg(acknowledged_before), oldest first, keeping their digests and
-- recording sqlc.arg(expired_at) (docs/execution-ports.md#read-results-retention).
-- Concurrent sweeps skip each other's rows.
UPDATE commands SET result = NULL, result_expired_at = sqlc.arg(expired_at)
WHERE result IS NOT NULL AND (environment, sequence) IN (
    SELECT c.environment, c.sequence FROM commands c
    WHERE c.operation = sqlc.arg(operation) AND c.result IS NOT NULL
      AND c.acknowledged_at <= sqlc.arg(acknowledged_before)
    ORDER BY c.acknowledged_at
    LIMIT sqlc.arg(max_count)
    FOR UPDATE SKIP LOCKED
);

-- name: RecordRuntimeVersion :exec
-- Keeps the later pull: a row pulled after sqlc.arg(pulled_at) stays
-- (docs/execution-ports.md#runtime-versions).
INSERT INTO runtime_versions (environment, installation_id, version, pulled_at)
VALUES (sqlc.arg(environment), sqlc.arg(installation_id), sqlc.arg(version), sqlc.arg(pulled_at))
ON CONFLICT (environment) DO UPDATE SET
    installation_id = excluded.installation_id, version = excluded.version, pulled_at = excluded.pulled_at
WHERE runtime_versions.pulled_at <= excluded.pulled_at;

-- name: RuntimeVersion :one
SELECT installation_id, version, pulled_at FROM runtime_versions WHERE environment = $1;

-- name: RecordRuntimeStop :exec
-- The stop a Runtime reported replaces any earlier one of its stream
-- (docs/execution-ports.md#runtime-stops).
INSERT INTO runtime_stops (environment, installation_id, reason, sequence, version, message, stopped_at)
VALUES (sqlc.arg(environment), sqlc.arg(installation_id), sqlc.arg(reason), sqlc.arg(sequence), sqlc.arg(version), sqlc.arg(message), sqlc.arg(stopped_at))
ON CONFLICT (environment) DO UPDATE SET
    installation_id = excluded.installation_id, reason = excluded.reason, sequence = excluded.sequence,
    version = excluded.version, message = excluded.message, stopped_at = excluded.stopped_at;

-- name: ClearRuntimeStop :execrows
DELETE FROM runtime_stops WHERE environment = $1;

-- name: RuntimeStop :one
SELECT installation_id, reason, sequence, version, message, stopped_at FROM runtime_stops WHERE environment = $1;

-- name: CommandsPageAfter :many
-- The operator's page of a stream's commands after sqlc.arg(after), oldest
-- first, of operation sqlc.arg(operation) ('' for any), at most
-- sqlc.arg(max_count) (docs/operations.md#operator-reads).
SELECT sequence, command_id, operation, digest, canonical, appended_at, result, result_digest, acknowledged_at, result_expired_at
FROM commands
WHERE environment = sqlc.arg(environment) AND sequence > sqlc.arg(after)
  AND (sqlc.arg(operation)::text = '' OR operation = sqlc.arg(operation)::text)
ORDER BY sequence
LIMIT sqlc.arg(max_count);

-- name: CommandsPageBefore :many
-- The operator's page of a stream's commands before sqlc.arg(before),
-- newest first, of operation sqlc.arg(operation) ('' for any), at most
-- sqlc.arg(max_count).
SELECT sequence, command_id, operation, digest, canonical, appended_at, result, result_digest, acknowledged_at, result_expired_at
FROM commands
WHERE environment = sqlc.arg(environment) AND sequence < sqlc.arg(before)
  AND (sqlc.arg(operation)::text = '' OR operation = sqlc.arg(operation)::text)
ORDER BY sequence DESC
LIMIT sqlc.arg(max_count);
