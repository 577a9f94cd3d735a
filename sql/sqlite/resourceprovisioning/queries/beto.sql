-- name: ProviderProjectClaims :many
SELECT project_id FROM project_provider_bindings
WHERE instance = sqlc.arg(instance) AND external_id = sqlc.arg(external_id)
ORDER BY project_id LIMIT sqlc.arg(max_rows);

-- name: InsertEventReceipt :execrows
INSERT INTO beto_event_receipts (event_id, event_type, content_digest, outcome, occurred_at, received_at)
VALUES (sqlc.arg(event_id), sqlc.arg(event_type), sqlc.arg(content_digest), sqlc.arg(outcome),
        sqlc.arg(occurred_at), sqlc.arg(received_at))
ON CONFLICT (event_id) DO NOTHING;

-- name: EventReceipt :one
SELECT * FROM beto_event_receipts WHERE event_id = sqlc.arg(event_id);

-- name: SetEventOutcome :exec
UPDATE beto_event_receipts SET outcome = sqlc.arg(outcome) WHERE event_id = sqlc.arg(event_id);

-- name: UpsertProject :execrows
INSERT INTO projects (project_id, revision, state, updated_at)
VALUES (sqlc.arg(project_id), sqlc.arg(revision), sqlc.arg(state), sqlc.arg(updated_at))
ON CONFLICT (project_id) DO UPDATE
SET revision = excluded.revision, state = excluded.state, updated_at = excluded.updated_at
WHERE projects.revision < excluded.revision;

-- name: DeleteProjectBindings :exec
DELETE FROM project_provider_bindings WHERE project_id = sqlc.arg(project_id);

-- name: InsertProjectBinding :exec
INSERT INTO project_provider_bindings (project_id, instance, external_id)
VALUES (sqlc.arg(project_id), sqlc.arg(instance), sqlc.arg(external_id));

-- name: BindingConflicts :many
SELECT b.instance, b.external_id, b.project_id FROM project_provider_bindings b
WHERE EXISTS (
    SELECT 1 FROM project_provider_bindings o
    WHERE o.instance = b.instance AND o.external_id = b.external_id AND o.project_id <> b.project_id
)
ORDER BY b.instance, b.external_id, b.project_id;

-- name: UpsertPartyBinding :execrows
INSERT INTO party_bindings (binding_id, party_id, revision, provider, instance, external_id, state, generation, updated_at, occurred_at)
VALUES (sqlc.arg(binding_id), sqlc.arg(party_id), sqlc.arg(revision), sqlc.arg(provider), sqlc.arg(instance),
        sqlc.arg(external_id), sqlc.arg(state), sqlc.arg(generation), sqlc.arg(updated_at), sqlc.arg(occurred_at))
ON CONFLICT (binding_id) DO UPDATE
SET party_id = excluded.party_id, revision = excluded.revision, provider = excluded.provider,
    instance = excluded.instance, external_id = excluded.external_id, state = excluded.state,
    generation = excluded.generation, updated_at = excluded.updated_at, occurred_at = excluded.occurred_at
WHERE party_bindings.revision < excluded.revision;

-- name: PartyBinding :one
SELECT * FROM party_bindings WHERE binding_id = sqlc.arg(binding_id);
