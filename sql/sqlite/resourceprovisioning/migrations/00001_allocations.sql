-- Resource Provisioning (resource_provisioning) on SQLite: the same tables as
-- on PostgreSQL. Times are INTEGER microseconds since the Unix epoch (UTC);
-- JSON is TEXT. See docs/resource-provisioning.md.

-- +goose Up
CREATE TABLE allocations (
    id                   TEXT    PRIMARY KEY,
    site                 TEXT    NOT NULL,
    provider_resource_id TEXT    NOT NULL,
    project_id           TEXT    NOT NULL,
    offering_id          TEXT    NOT NULL,
    provider_project_id  TEXT    NOT NULL,
    native_scope         TEXT    NOT NULL,
    lifecycle            TEXT    NOT NULL,
    reasons              TEXT    NOT NULL,
    configured_limits    TEXT    NOT NULL,
    applied_limits       TEXT,
    waldur_state         TEXT    NOT NULL,
    paused               BOOLEAN NOT NULL,
    revision             INTEGER NOT NULL CHECK (revision >= 1),
    content_digest       TEXT    NOT NULL,
    observed_at          INTEGER NOT NULL,
    last_seen_at         INTEGER NOT NULL,
    UNIQUE (site, provider_resource_id)
);
CREATE INDEX allocations_by_project ON allocations (project_id, site, id);

CREATE TABLE allocation_receipts (
    allocation_id  TEXT    NOT NULL REFERENCES allocations (id),
    revision       INTEGER NOT NULL,
    observed_at    INTEGER NOT NULL,
    received_at    INTEGER NOT NULL,
    content_digest TEXT    NOT NULL,
    report         TEXT    NOT NULL,
    PRIMARY KEY (allocation_id, revision)
);

-- SQLite serialises write transactions (BEGIN IMMEDIATE), so positions taken
-- from the head inside a transaction follow commit order.
CREATE TABLE allocation_changes_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    position INTEGER NOT NULL
);
INSERT INTO allocation_changes_head (id, position) VALUES (1, 0);

CREATE TABLE allocation_changes (
    position      INTEGER PRIMARY KEY,
    allocation_id TEXT    NOT NULL REFERENCES allocations (id),
    revision      INTEGER NOT NULL,
    payload       TEXT    NOT NULL,
    recorded_at   INTEGER NOT NULL,
    published_at  INTEGER,
    UNIQUE (allocation_id, revision)
);

CREATE TABLE beto_event_receipts (
    event_id       TEXT    PRIMARY KEY,
    event_type     TEXT    NOT NULL,
    content_digest TEXT    NOT NULL,
    outcome        TEXT    NOT NULL,
    occurred_at    INTEGER NOT NULL,
    received_at    INTEGER NOT NULL
);

CREATE TABLE projects (
    project_id TEXT    PRIMARY KEY,
    revision   INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE project_provider_bindings (
    project_id  TEXT NOT NULL REFERENCES projects (project_id),
    instance    TEXT NOT NULL,
    external_id TEXT NOT NULL,
    PRIMARY KEY (project_id, instance, external_id)
);
CREATE INDEX project_provider_bindings_by_external ON project_provider_bindings (instance, external_id, project_id);

CREATE TABLE party_bindings (
    binding_id  TEXT    PRIMARY KEY,
    party_id    TEXT    NOT NULL,
    revision    INTEGER NOT NULL,
    provider    TEXT    NOT NULL,
    instance    TEXT    NOT NULL,
    external_id TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- +goose Down
DROP TABLE party_bindings;
DROP TABLE project_provider_bindings;
DROP TABLE projects;
DROP TABLE beto_event_receipts;
DROP TABLE allocation_changes;
DROP TABLE allocation_changes_head;
DROP TABLE allocation_receipts;
DROP TABLE allocations;
