-- Resource Provisioning on SQLite: native member accounts and Runtime
-- member bindings; the change feed's outbox for every change type. The same
-- tables as on PostgreSQL (times INTEGER microseconds since the Unix epoch,
-- JSON as TEXT). See docs/resource-provisioning.md#native-member-accounts.

-- +goose Up
-- SQLite cannot drop a foreign key or rename its columns' constraints, so
-- the outbox is rebuilt as changes (positions kept).
CREATE TABLE changes (
    position     INTEGER PRIMARY KEY,
    event_type   TEXT    NOT NULL,
    subject_id   TEXT    NOT NULL,
    revision     INTEGER NOT NULL,
    payload      TEXT    NOT NULL,
    recorded_at  INTEGER NOT NULL,
    published_at INTEGER,
    UNIQUE (event_type, subject_id, revision)
);
INSERT INTO changes (position, event_type, subject_id, revision, payload, recorded_at, published_at)
SELECT position, 'AllocationChanged', allocation_id, revision, payload, recorded_at, published_at FROM allocation_changes;
DROP TABLE allocation_changes;
ALTER TABLE allocation_changes_head RENAME TO changes_head;

ALTER TABLE party_bindings ADD COLUMN occurred_at INTEGER NOT NULL DEFAULT 0;
UPDATE party_bindings SET occurred_at = updated_at;
CREATE INDEX party_bindings_by_party ON party_bindings (party_id, provider, instance);
CREATE INDEX party_bindings_by_external ON party_bindings (provider, instance, external_id);

CREATE TABLE project_memberships (
    project_id TEXT NOT NULL REFERENCES projects (project_id),
    party_id   TEXT NOT NULL,
    role       TEXT NOT NULL,
    PRIMARY KEY (project_id, party_id)
);
CREATE INDEX project_memberships_by_party ON project_memberships (party_id, project_id);

CREATE TABLE member_bindings (
    binding_id              TEXT    PRIMARY KEY,
    party_id                TEXT    NOT NULL,
    project_id              TEXT    NOT NULL,
    environment             TEXT    NOT NULL,
    generation              INTEGER NOT NULL CHECK (generation >= 1),
    state                   TEXT    NOT NULL,
    reasons                 TEXT    NOT NULL,
    site_binding_id         TEXT    NOT NULL,
    site_username           TEXT    NOT NULL,
    site_binding_generation INTEGER NOT NULL,
    account_uid             TEXT    NOT NULL,
    allocation_id           TEXT    NOT NULL,
    namespace               TEXT    NOT NULL,
    revision                INTEGER NOT NULL CHECK (revision >= 1),
    changed_at              INTEGER NOT NULL,
    UNIQUE (party_id, project_id, environment)
);
CREATE INDEX member_bindings_by_environment ON member_bindings (environment, project_id, party_id);
CREATE INDEX member_bindings_by_project ON member_bindings (project_id, party_id, environment);

CREATE TABLE account_sets (
    allocation_id  TEXT    PRIMARY KEY REFERENCES allocations (id),
    revision       INTEGER NOT NULL CHECK (revision >= 1),
    content_digest TEXT    NOT NULL,
    observed_at    INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL
);

CREATE TABLE native_accounts (
    allocation_id TEXT    NOT NULL REFERENCES allocations (id),
    party_id      TEXT    NOT NULL,
    uid           TEXT    NOT NULL,
    binding_id    TEXT    NOT NULL,
    generation    INTEGER NOT NULL,
    account_name  TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    since         INTEGER NOT NULL,
    changed_at    INTEGER NOT NULL,
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
ALTER TABLE changes_head RENAME TO allocation_changes_head;
CREATE TABLE allocation_changes (
    position      INTEGER PRIMARY KEY,
    allocation_id TEXT    NOT NULL REFERENCES allocations (id),
    revision      INTEGER NOT NULL,
    payload       TEXT    NOT NULL,
    recorded_at   INTEGER NOT NULL,
    published_at  INTEGER,
    UNIQUE (allocation_id, revision)
);
INSERT INTO allocation_changes (position, allocation_id, revision, payload, recorded_at, published_at)
SELECT position, subject_id, revision, payload, recorded_at, published_at FROM changes WHERE event_type = 'AllocationChanged';
DROP TABLE changes;
