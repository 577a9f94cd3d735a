-- name: InsertDelivery :exec
INSERT INTO binding_deliveries (environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING;

-- name: DeliveryAt :one
SELECT environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at,
       sequence, appended_at, applied_revision, outcome, reason, acknowledged_at
FROM binding_deliveries WHERE environment = ? AND binding_id = ? AND revision = ?;

-- name: DeliveryByCommand :one
SELECT environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at,
       sequence, appended_at, applied_revision, outcome, reason, acknowledged_at
FROM binding_deliveries WHERE command_id = ?;

-- name: LatestDeliveries :many
-- The newest delivery of every binding of the environment, by binding ID.
SELECT d.environment, d.binding_id, d.revision, d.generation, d.operation, d.command_id, d.digest, d.canonical, d.planned_at,
       d.sequence, d.appended_at, d.applied_revision, d.outcome, d.reason, d.acknowledged_at
FROM binding_deliveries d
WHERE d.environment = sqlc.arg(environment) AND d.revision = (
    SELECT max(e.revision) FROM binding_deliveries e
    WHERE e.environment = d.environment AND e.binding_id = d.binding_id)
ORDER BY d.binding_id;

-- name: MarkDeliveryAppended :exec
UPDATE binding_deliveries SET sequence = sqlc.arg(sequence), appended_at = sqlc.arg(appended_at)
WHERE environment = sqlc.arg(environment) AND binding_id = sqlc.arg(binding_id) AND revision = sqlc.arg(revision) AND sequence IS NULL;

-- name: MarkDeliveryAcknowledged :exec
UPDATE binding_deliveries SET outcome = sqlc.arg(outcome), reason = sqlc.arg(reason),
    applied_revision = sqlc.narg(applied_revision), acknowledged_at = sqlc.arg(acknowledged_at)
WHERE environment = sqlc.arg(environment) AND binding_id = sqlc.arg(binding_id) AND revision = sqlc.arg(revision) AND acknowledged_at IS NULL;
