-- Resource Provisioning: native member accounts and Runtime member bindings.
-- The change feed's outbox becomes one for every change type
-- (AllocationChanged, MemberBindingChanged), with one position order.
-- See docs/resource-provisioning.md#native-member-accounts.

-- +goose Up
-- The outbox of the change feed: one row per material change of a subject
-- (an allocation or a member binding) at a revision. Rows are written
-- without a position and positioned by the sequencer after commit
-- (docs/resource-provisioning.md#the-change-feeds-ordering).
ALTER TABLE allocation_changes RENAME TO changes;
ALTER TABLE changes DROP CONSTRAINT allocation_changes_allocation_id_fkey;
ALTER TABLE changes DROP CONSTRAINT allocation_changes_allocation_id_revision_key;
ALTER TABLE changes RENAME COLUMN allocation_id TO subject_id;
ALTER TABLE changes ADD COLUMN event_type text NOT NULL DEFAULT 'AllocationChanged';
ALTER TABLE changes ALTER COLUMN event_type DROP DEFAULT;
ALTER TABLE changes ADD CONSTRAINT changes_subject_revision_key UNIQUE (event_type, subject_id, revision);
ALTER INDEX allocation_changes_unpositioned RENAME TO changes_unpositioned;
ALTER TABLE allocation_changes_head RENAME TO changes_head;

-- The Party binding view keeps the Beto time of the change it holds, to
-- order bindings of one Party or one username (the newest wins).
ALTER TABLE party_bindings ADD COLUMN occurred_at timestamptz;
UPDATE party_bindings SET occurred_at = updated_at;
ALTER TABLE party_bindings ALTER COLUMN occurred_at SET NOT NULL;
CREATE INDEX party_bindings_by_party ON party_bindings (party_id, provider, instance);
CREATE INDEX party_bindings_by_external ON party_bindings (provider, instance, external_id);

-- The Project view's memberships, from project.ProjectChanged (replaced
-- with each applied revision).
CREATE TABLE project_memberships (
    project_id text NOT NULL REFERENCES projects (project_id),
    party_id   text NOT NULL,
    role       text NOT NULL,
    PRIMARY KEY (project_id, party_id)
);
CREATE INDEX project_memberships_by_party ON project_memberships (party_id, project_id);

-- One Runtime member binding per (Party, Project, environment); binding_id
-- is the UUIDv5 of "<party>/<project>/<environment>". generation starts at
-- 1 and grows when the member comes back or the site binding is replaced;
-- retired keeps it. revision counts material changes. The account columns
-- are the binding's ready account ('' while none); reasons say why a live
-- binding has none or why it was retired.
CREATE TABLE member_bindings (
    binding_id              text        PRIMARY KEY,
    party_id                text        NOT NULL,
    project_id              text        NOT NULL,
    environment             text        NOT NULL,
    generation              bigint      NOT NULL CHECK (generation >= 1),
    state                   text        NOT NULL,
    reasons                 jsonb       NOT NULL,
    site_binding_id         text        NOT NULL,
    site_username           text        NOT NULL,
    site_binding_generation bigint      NOT NULL,
    account_uid             text        NOT NULL,
    allocation_id           text        NOT NULL,
    namespace               text        NOT NULL,
    revision                bigint      NOT NULL CHECK (revision >= 1),
    changed_at              timestamptz NOT NULL,
    UNIQUE (party_id, project_id, environment)
);
CREATE INDEX member_bindings_by_environment ON member_bindings (environment, project_id, party_id);
CREATE INDEX member_bindings_by_project ON member_bindings (project_id, party_id, environment);

-- The newest accepted account report of each allocation: orders reports
-- (observed_at, the agent's clock) and dates them (last_seen_at, the
-- server's). revision counts reports that changed an account.
CREATE TABLE account_sets (
    allocation_id  text        PRIMARY KEY REFERENCES allocations (id),
    revision       bigint      NOT NULL CHECK (revision >= 1),
    content_digest text        NOT NULL,
    observed_at    timestamptz NOT NULL,
    last_seen_at   timestamptz NOT NULL
);

-- Every native account an agent reported in an allocation's scope, keyed by
-- what the agent wrote on it: the Party (its name is member-<party>), the
-- Site's immutable UID, the member binding and the generation. state is
-- ready, incomplete or absent (no longer listed); since is the observed_at
-- of the report that set it. Rows are never deleted: older generations and
-- absent accounts stay as evidence.
CREATE TABLE native_accounts (
    allocation_id text        NOT NULL REFERENCES allocations (id),
    party_id      text        NOT NULL,
    uid           text        NOT NULL,
    binding_id    text        NOT NULL,
    generation    bigint      NOT NULL,
    account_name  text        NOT NULL,
    state         text        NOT NULL,
    since         timestamptz NOT NULL,
    changed_at    timestamptz NOT NULL,
    PRIMARY KEY (allocation_id, party_id, uid, binding_id, generation)
);
CREATE INDEX native_accounts_present_by_binding ON native_accounts (binding_id) WHERE state <> 'absent';

-- +goose Down
DROP TABLE native_accounts;
DROP TABLE account_sets;
DROP TABLE member_bindings;
DROP TABLE project_memberships;
DROP INDEX party_bindings_by_external;
DROP INDEX party_bindings_by_party;
ALTER TABLE party_bindings DROP COLUMN occurred_at;
DELETE FROM changes WHERE event_type <> 'AllocationChanged';
ALTER TABLE changes_head RENAME TO allocation_changes_head;
ALTER INDEX changes_unpositioned RENAME TO allocation_changes_unpositioned;
ALTER TABLE changes DROP CONSTRAINT changes_subject_revision_key;
ALTER TABLE changes DROP COLUMN event_type;
ALTER TABLE changes RENAME COLUMN subject_id TO allocation_id;
ALTER TABLE changes ADD CONSTRAINT allocation_changes_allocation_id_revision_key UNIQUE (allocation_id, revision);
ALTER TABLE changes ADD CONSTRAINT allocation_changes_allocation_id_fkey FOREIGN KEY (allocation_id) REFERENCES allocations (id);
ALTER TABLE changes RENAME TO allocation_changes;
