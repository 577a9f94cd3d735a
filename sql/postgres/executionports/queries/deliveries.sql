-- name: InsertDelivery :exec
INSERT INTO binding_deliveries (environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT DO NOTHING;

-- name: DeliveryAt :one
SELECT environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at,
       sequence, appended_at, applied_revision, outcome, reason, acknowledged_at
FROM binding_deliveries WHERE environment = $1 AND binding_id = $2 AND revision = $3;

-- name: DeliveryByCommand :one
SELECT environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at,
       sequence, appended_at, applied_revision, outcome, reason, acknowledged_at
FROM binding_deliveries WHERE command_id = $1;

-- name: LatestDeliveries :many
-- The newest delivery of every binding of the environment, by binding ID.
SELECT DISTINCT ON (binding_id) environment, binding_id, revision, generation, operation, command_id, digest, canonical, planned_at,
       sequence, appended_at, applied_revision, outcome, reason, acknowledged_at
FROM binding_deliveries WHERE environment = $1
ORDER BY binding_id, revision DESC;

-- name: MarkDeliveryAppended :exec
UPDATE binding_deliveries SET sequence = sqlc.arg(sequence), appended_at = sqlc.arg(appended_at)
WHERE environment = sqlc.arg(environment) AND binding_id = sqlc.arg(binding_id) AND revision = sqlc.arg(revision) AND sequence IS NULL;

-- name: MarkDeliveryAcknowledged :exec
UPDATE binding_deliveries SET outcome = sqlc.arg(outcome), reason = sqlc.arg(reason),
    applied_revision = sqlc.narg(applied_revision), acknowledged_at = sqlc.arg(acknowledged_at)
WHERE environment = sqlc.arg(environment) AND binding_id = sqlc.arg(binding_id) AND revision = sqlc.arg(revision) AND acknowledged_at IS NULL;

-- name: TryDeliveryLock :one
SELECT pg_try_advisory_lock(hashtextextended('metallo.execution.delivery:' || sqlc.arg(environment)::text, 0));

-- name: DeliveryUnlock :one
SELECT pg_advisory_unlock(hashtextextended('metallo.execution.delivery:' || sqlc.arg(environment)::text, 0));
