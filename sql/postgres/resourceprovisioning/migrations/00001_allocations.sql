-- Resource Provisioning (resource_provisioning): allocations, their receipts,
-- the AllocationChanged outbox (the change feed), and the Beto views.
-- See docs/resource-provisioning.md.

-- +goose Up
-- One row per provider resource at a Site. id = UUIDv5 of "<site>/<provider
-- resource ID>". Limits are JSON objects in canonical units (cpu millicores,
-- memory and storage bytes, gpu.<vendor> devices); applied_limits is NULL
-- until the Site confirms enforcement. project_id is '' while unbound.
CREATE TABLE allocations (
    id                   text        PRIMARY KEY,
    site                 text        NOT NULL,
    provider_resource_id text        NOT NULL,
    project_id           text        NOT NULL,
    offering_id          text        NOT NULL,
    provider_project_id  text        NOT NULL,
    native_scope         text        NOT NULL,
    lifecycle            text        NOT NULL,
    reasons              jsonb       NOT NULL,
    configured_limits    jsonb       NOT NULL,
    applied_limits       jsonb,
    waldur_state         text        NOT NULL,
    paused               boolean     NOT NULL,
    revision             bigint      NOT NULL CHECK (revision >= 1),
    content_digest       text        NOT NULL,
    observed_at          timestamptz NOT NULL,
    last_seen_at         timestamptz NOT NULL,
    UNIQUE (site, provider_resource_id)
);
CREATE INDEX allocations_by_project ON allocations (project_id, site, id);

-- The receipt of each material change (revision): the report that made it.
CREATE TABLE allocation_receipts (
    allocation_id  text        NOT NULL REFERENCES allocations (id),
    revision       bigint      NOT NULL,
    observed_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL,
    content_digest text        NOT NULL,
    report         jsonb       NOT NULL,
    PRIMARY KEY (allocation_id, revision)
);

-- The feed head: the position of the newest positioned change.
CREATE TABLE allocation_changes_head (
    id       integer PRIMARY KEY CHECK (id = 1),
    position bigint  NOT NULL
);
INSERT INTO allocation_changes_head (id, position) VALUES (1, 0);

-- The AllocationChanged outbox. A row is written in the transaction of its
-- material change without a position; the sequencer then gives committed
-- rows their feed positions, in seq order, one sequencer at a time (under a
-- transaction advisory lock), so positions follow the commit order of the
-- sequencer's transactions and a reader of "position > cursor" never skips a
-- change that commits late: it gets a position greater than any readable one.
CREATE TABLE allocation_changes (
    seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    position      bigint      UNIQUE,
    allocation_id text        NOT NULL REFERENCES allocations (id),
    revision      bigint      NOT NULL,
    payload       jsonb       NOT NULL,
    recorded_at   timestamptz NOT NULL,
    published_at  timestamptz,
    UNIQUE (allocation_id, revision)
);
CREATE INDEX allocation_changes_unpositioned ON allocation_changes (seq) WHERE position IS NULL;

-- A receipt per Beto event_id (outcome applied or ignored).
CREATE TABLE beto_event_receipts (
    event_id       text        PRIMARY KEY,
    event_type     text        NOT NULL,
    content_digest text        NOT NULL,
    outcome        text        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL
);

-- The Project view, from project.ProjectChanged, ordered by revision.
CREATE TABLE projects (
    project_id text        PRIMARY KEY,
    revision   bigint      NOT NULL,
    state      text        NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Each Project's Waldur bindings (every instance; resolution filters by the
-- configured one).
CREATE TABLE project_provider_bindings (
    project_id  text NOT NULL REFERENCES projects (project_id),
    instance    text NOT NULL,
    external_id text NOT NULL,
    PRIMARY KEY (project_id, instance, external_id)
);
CREATE INDEX project_provider_bindings_by_external ON project_provider_bindings (instance, external_id, project_id);

-- The Party binding view, from party.PartyProviderBindingChanged.
CREATE TABLE party_bindings (
    binding_id  text        PRIMARY KEY,
    party_id    text        NOT NULL,
    revision    bigint      NOT NULL,
    provider    text        NOT NULL,
    instance    text        NOT NULL,
    external_id text        NOT NULL,
    state       text        NOT NULL,
    generation  bigint      NOT NULL,
    updated_at  timestamptz NOT NULL
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
