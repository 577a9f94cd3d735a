-- name: LockAllocation :one
SELECT * FROM allocations WHERE id = sqlc.arg(id) FOR UPDATE;

-- name: InsertAllocation :execrows
-- No conflict target: a concurrent first report of the same resource may
-- meet the other's row on the primary key or on (site,
-- provider_resource_id); both are the same allocation (id is the UUIDv5 of
-- "<site>/<provider resource ID>" and a Site ID holds no '/'), and a
-- target naming only one would raise a unique violation on the other.
INSERT INTO allocations (
    id, site, provider_resource_id, project_id, offering_id, provider_project_id, native_scope,
    lifecycle, reasons, configured_limits, applied_limits, waldur_state, paused, revision,
    content_digest, observed_at, last_seen_at
) VALUES (
    sqlc.arg(id), sqlc.arg(site), sqlc.arg(provider_resource_id), sqlc.arg(project_id), sqlc.arg(offering_id),
    sqlc.arg(provider_project_id), sqlc.arg(native_scope), sqlc.arg(lifecycle), sqlc.arg(reasons),
    sqlc.arg(configured_limits), sqlc.narg(applied_limits), sqlc.arg(waldur_state), sqlc.arg(paused),
    sqlc.arg(revision), sqlc.arg(content_digest), sqlc.arg(observed_at), sqlc.arg(last_seen_at)
) ON CONFLICT DO NOTHING;

-- name: UpdateAllocation :exec
UPDATE allocations SET
    project_id = sqlc.arg(project_id), offering_id = sqlc.arg(offering_id),
    provider_project_id = sqlc.arg(provider_project_id), native_scope = sqlc.arg(native_scope),
    lifecycle = sqlc.arg(lifecycle), reasons = sqlc.arg(reasons), configured_limits = sqlc.arg(configured_limits),
    applied_limits = sqlc.narg(applied_limits), waldur_state = sqlc.arg(waldur_state), paused = sqlc.arg(paused),
    revision = sqlc.arg(revision), content_digest = sqlc.arg(content_digest), observed_at = sqlc.arg(observed_at),
    last_seen_at = sqlc.arg(last_seen_at)
WHERE id = sqlc.arg(id);

-- name: RenewAllocation :exec
UPDATE allocations SET observed_at = sqlc.arg(observed_at), last_seen_at = sqlc.arg(last_seen_at)
WHERE id = sqlc.arg(id);

-- name: InsertReceipt :exec
INSERT INTO allocation_receipts (allocation_id, revision, observed_at, received_at, content_digest, report)
VALUES (sqlc.arg(allocation_id), sqlc.arg(revision), sqlc.arg(observed_at), sqlc.arg(received_at),
        sqlc.arg(content_digest), sqlc.arg(report));

-- name: InsertChange :exec
INSERT INTO changes (event_type, subject_id, revision, payload, recorded_at)
VALUES (sqlc.arg(event_type), sqlc.arg(subject_id), sqlc.arg(revision), sqlc.arg(payload), sqlc.arg(recorded_at));

-- name: HasUnpositionedChanges :one
SELECT EXISTS (SELECT 1 FROM changes WHERE position IS NULL);

-- name: LockSequencer :exec
SELECT pg_advisory_xact_lock(sqlc.arg(lock_key)::bigint);

-- name: PositionChanges :execrows
-- Run under LockSequencer, in its own statement (a fresh snapshot): gives
-- every committed unpositioned change the next positions in seq order and
-- moves the head.
WITH head AS (
    SELECT position FROM changes_head WHERE id = 1
), pending AS (
    SELECT c.seq, head.position + row_number() OVER (ORDER BY c.seq) AS pos
    FROM changes c CROSS JOIN head
    WHERE c.position IS NULL
), positioned AS (
    UPDATE changes c SET position = pending.pos
    FROM pending WHERE c.seq = pending.seq
    RETURNING c.position
)
UPDATE changes_head SET position = (SELECT max(position) FROM positioned)
WHERE id = 1 AND EXISTS (SELECT 1 FROM positioned);

-- name: ChangesHead :one
SELECT position FROM changes_head WHERE id = 1;

-- name: ChangesAfter :many
SELECT coalesce(position, 0)::bigint AS position, event_type, payload FROM changes
WHERE position > sqlc.arg(after)::bigint ORDER BY position LIMIT sqlc.arg(max_rows);

-- name: AllocationsAfter :many
SELECT * FROM allocations WHERE id > sqlc.arg(after) ORDER BY id LIMIT sqlc.arg(max_rows);

-- name: ProjectAllocations :many
SELECT * FROM allocations
WHERE project_id = sqlc.arg(project_id) AND (sqlc.arg(site)::text = '' OR site = sqlc.arg(site)::text)
ORDER BY site, id;

-- name: CountReceipts :one
SELECT count(*) FROM allocation_receipts WHERE allocation_id = sqlc.arg(allocation_id);
