-- Native member accounts and Runtime member bindings
-- (docs/resource-provisioning.md#native-member-accounts).

-- name: ProjectMembers :many
SELECT party_id, role FROM project_memberships WHERE project_id = sqlc.arg(project_id) ORDER BY party_id;

-- name: DeleteProjectMembership :exec
DELETE FROM project_memberships WHERE project_id = sqlc.arg(project_id) AND party_id = sqlc.arg(party_id);

-- name: UpsertProjectMembership :exec
INSERT INTO project_memberships (project_id, party_id, role)
VALUES (sqlc.arg(project_id), sqlc.arg(party_id), sqlc.arg(role))
ON CONFLICT (project_id, party_id) DO UPDATE SET role = excluded.role;

-- name: IsProjectMember :one
SELECT EXISTS (
    SELECT 1 FROM project_memberships WHERE project_id = sqlc.arg(project_id) AND party_id = sqlc.arg(party_id)
);

-- name: PartyProjects :many
SELECT project_id FROM project_memberships WHERE party_id = sqlc.arg(party_id) ORDER BY project_id;

-- name: PartySiteEnvironments :many
SELECT DISTINCT instance FROM party_bindings
WHERE party_id = sqlc.arg(party_id) AND provider = sqlc.arg(provider) ORDER BY instance;

-- name: PartyMemberBindingKeys :many
SELECT project_id, environment FROM member_bindings WHERE party_id = sqlc.arg(party_id)
ORDER BY project_id, environment;

-- name: CurrentSiteBinding :one
-- The Party's verified binding at the environment, the newest by Beto's
-- time when several are verified (a replacement whose predecessor's
-- retirement has not arrived yet).
SELECT * FROM party_bindings
WHERE party_id = sqlc.arg(party_id) AND provider = sqlc.arg(provider) AND instance = sqlc.arg(instance)
  AND state = sqlc.arg(state)
ORDER BY occurred_at DESC, binding_id DESC LIMIT 1;

-- name: NewestBindingOfUsername :one
SELECT * FROM party_bindings
WHERE provider = sqlc.arg(provider) AND instance = sqlc.arg(instance) AND external_id = sqlc.arg(external_id)
ORDER BY occurred_at DESC, binding_id DESC LIMIT 1;

-- name: LockMemberBinding :one
SELECT * FROM member_bindings WHERE binding_id = sqlc.arg(binding_id) FOR UPDATE;

-- name: MemberBindingByKey :one
SELECT * FROM member_bindings
WHERE party_id = sqlc.arg(party_id) AND project_id = sqlc.arg(project_id) AND environment = sqlc.arg(environment);

-- name: InsertMemberBinding :execrows
-- No conflict target: binding_id is the UUIDv5 of (party, project,
-- environment), so a conflict on either unique key is the same binding
-- inserted concurrently (see InsertAllocation).
INSERT INTO member_bindings (
    binding_id, party_id, project_id, environment, generation, state, reasons, site_binding_id, site_username,
    site_binding_generation, account_uid, allocation_id, namespace, revision, changed_at, account
) VALUES (
    sqlc.arg(binding_id), sqlc.arg(party_id), sqlc.arg(project_id), sqlc.arg(environment), sqlc.arg(generation),
    sqlc.arg(state), sqlc.arg(reasons), sqlc.arg(site_binding_id), sqlc.arg(site_username),
    sqlc.arg(site_binding_generation), sqlc.arg(account_uid), sqlc.arg(allocation_id), sqlc.arg(namespace),
    sqlc.arg(revision), sqlc.arg(changed_at), sqlc.arg(account)
) ON CONFLICT DO NOTHING;

-- name: UpdateMemberBinding :exec
UPDATE member_bindings SET
    generation = sqlc.arg(generation), state = sqlc.arg(state), reasons = sqlc.arg(reasons),
    site_binding_id = sqlc.arg(site_binding_id), site_username = sqlc.arg(site_username),
    site_binding_generation = sqlc.arg(site_binding_generation), account_uid = sqlc.arg(account_uid),
    allocation_id = sqlc.arg(allocation_id), namespace = sqlc.arg(namespace), revision = sqlc.arg(revision),
    changed_at = sqlc.arg(changed_at), account = sqlc.arg(account)
WHERE binding_id = sqlc.arg(binding_id);

-- name: BindingAccounts :many
-- The accounts reported for a binding that are not absent, with the facts
-- of the allocation they were reported in.
SELECT n.allocation_id, n.uid, n.generation, n.state, a.project_id, a.native_scope, a.lifecycle
FROM native_accounts n JOIN allocations a ON a.id = n.allocation_id
WHERE n.binding_id = sqlc.arg(binding_id) AND n.state <> 'absent'
ORDER BY n.allocation_id, n.uid, n.generation;

-- name: LockAccountSet :one
SELECT * FROM account_sets WHERE allocation_id = sqlc.arg(allocation_id) FOR UPDATE;

-- name: InsertAccountSet :execrows
INSERT INTO account_sets (allocation_id, revision, content_digest, observed_at, last_seen_at)
VALUES (sqlc.arg(allocation_id), sqlc.arg(revision), sqlc.arg(content_digest), sqlc.arg(observed_at), sqlc.arg(last_seen_at))
ON CONFLICT (allocation_id) DO NOTHING;

-- name: UpdateAccountSet :exec
UPDATE account_sets SET revision = sqlc.arg(revision), content_digest = sqlc.arg(content_digest),
    observed_at = sqlc.arg(observed_at), last_seen_at = sqlc.arg(last_seen_at)
WHERE allocation_id = sqlc.arg(allocation_id);

-- name: AllocationAccounts :many
SELECT * FROM native_accounts WHERE allocation_id = sqlc.arg(allocation_id)
ORDER BY party_id, uid, binding_id, generation;

-- name: UpsertNativeAccount :exec
INSERT INTO native_accounts (allocation_id, party_id, uid, binding_id, generation, account_name, state, since, changed_at)
VALUES (sqlc.arg(allocation_id), sqlc.arg(party_id), sqlc.arg(uid), sqlc.arg(binding_id), sqlc.arg(generation),
        sqlc.arg(account_name), sqlc.arg(state), sqlc.arg(since), sqlc.arg(changed_at))
ON CONFLICT (allocation_id, party_id, uid, binding_id, generation) DO UPDATE
SET state = excluded.state, since = excluded.since, changed_at = excluded.changed_at;

-- name: AllocationAccountBindings :many
SELECT DISTINCT binding_id FROM native_accounts
WHERE allocation_id = sqlc.arg(allocation_id) AND state <> 'absent' ORDER BY binding_id;

-- name: SiteHasProjectAllocation :one
SELECT EXISTS (
    SELECT 1 FROM allocations
    WHERE project_id = sqlc.arg(project_id) AND site = sqlc.arg(site) AND lifecycle <> 'retired'
);

-- name: EnvironmentBindingsAfter :many
SELECT * FROM member_bindings
WHERE environment = sqlc.arg(environment)
  AND (project_id > sqlc.arg(after_project)::text
       OR (project_id = sqlc.arg(after_project)::text AND party_id > sqlc.arg(after_party)::text))
ORDER BY project_id, party_id LIMIT sqlc.arg(max_rows);

-- name: EnvironmentMembersWithoutBinding :many
-- Members of the Projects with an allocation at the environment's Site that
-- have no binding at the environment (no verified site binding there).
SELECT m.project_id, m.party_id FROM project_memberships m
LEFT JOIN member_bindings b
       ON b.environment = sqlc.arg(environment) AND b.project_id = m.project_id AND b.party_id = m.party_id
WHERE b.binding_id IS NULL
  AND m.project_id IN (
        SELECT a.project_id FROM allocations a
        WHERE a.site = sqlc.arg(site) AND a.project_id <> '' AND a.lifecycle <> 'retired')
  AND (m.project_id > sqlc.arg(after_project)::text
       OR (m.project_id = sqlc.arg(after_project)::text AND m.party_id > sqlc.arg(after_party)::text))
ORDER BY m.project_id, m.party_id LIMIT sqlc.arg(max_rows);

-- name: ProjectMemberBindings :many
SELECT b.*, s.observed_at AS account_observed_at, s.last_seen_at AS account_last_seen_at
FROM member_bindings b LEFT JOIN account_sets s ON s.allocation_id = b.allocation_id
WHERE b.project_id = sqlc.arg(project_id) AND (sqlc.arg(party_id)::text = '' OR b.party_id = sqlc.arg(party_id)::text)
ORDER BY b.party_id, b.environment;

-- name: CountNativeAccounts :one
SELECT count(*) FROM native_accounts WHERE allocation_id = sqlc.arg(allocation_id);

-- name: BindingsHoldingAccount :many
-- The bindings at an environment other than the retired that name an
-- account, or whose ready account has a UID (one Party per account:
-- docs/resource-provisioning.md#one-party-per-account).
SELECT * FROM member_bindings
WHERE environment = sqlc.arg(environment) AND state <> 'retired'
  AND (account = sqlc.arg(account) OR (state = 'ready' AND account_uid = sqlc.arg(account_uid)))
ORDER BY binding_id;

-- name: TakenBindingsAfter :many
-- The bindings held pending because another Party holds their account, in
-- ID order (the inconsistencies read).
SELECT * FROM member_bindings
WHERE state = 'pending' AND reasons::text LIKE '%"account_taken"%' AND binding_id > sqlc.arg(after_id)
ORDER BY binding_id LIMIT sqlc.arg(max_rows);
