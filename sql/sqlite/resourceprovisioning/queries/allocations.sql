-- name: LockAllocation :one
-- Write transactions on SQLite are BEGIN IMMEDIATE: the database write lock
-- is held from the start, so a plain read is already exclusive.
SELECT * FROM allocations WHERE id = sqlc.arg(id);

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

-- name: AdvanceChangesHead :one
UPDATE changes_head SET position = position + sqlc.arg(count) WHERE id = 1
RETURNING position;

-- name: InsertChange :exec
INSERT INTO changes (position, event_type, subject_id, revision, payload, recorded_at)
VALUES (sqlc.arg(position), sqlc.arg(event_type), sqlc.arg(subject_id), sqlc.arg(revision), sqlc.arg(payload), sqlc.arg(recorded_at));

-- name: ChangesHead :one
SELECT position FROM changes_head WHERE id = 1;

-- name: ChangesAfter :many
SELECT position, event_type, payload FROM changes
WHERE position > sqlc.arg(after) ORDER BY position LIMIT sqlc.arg(max_rows);

-- name: AllocationsAfter :many
SELECT * FROM allocations WHERE id > sqlc.arg(after) ORDER BY id LIMIT sqlc.arg(max_rows);

-- name: ProjectAllocations :many
SELECT * FROM allocations
WHERE project_id = sqlc.arg(project_id) AND (CAST(sqlc.arg(site) AS TEXT) = '' OR site = CAST(sqlc.arg(site) AS TEXT))
ORDER BY site, id;

-- name: CountReceipts :one
SELECT count(*) FROM allocation_receipts WHERE allocation_id = sqlc.arg(allocation_id);
