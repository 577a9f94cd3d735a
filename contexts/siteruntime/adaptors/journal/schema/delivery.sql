-- delivery.sqlite, schema version 1: the (environment, authority)
-- binding, the acknowledged sequence, the pending command and its exact
-- result, and the member bindings. Every row carries a digest.
CREATE TABLE binding (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    environment     TEXT    NOT NULL,
    authority       TEXT    NOT NULL,
    installation_id TEXT    NOT NULL,
    digest          TEXT    NOT NULL
);

CREATE TABLE checkpoint (
    id                    INTEGER PRIMARY KEY CHECK (id = 1),
    acknowledged_sequence INTEGER NOT NULL CHECK (acknowledged_sequence >= 0),
    digest                TEXT    NOT NULL
);

-- At most one pending command: exact pulled bytes, and once executed the
-- exact result bytes with their protocol digests.
CREATE TABLE pending (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    sequence       INTEGER NOT NULL CHECK (sequence >= 1),
    command        BLOB    NOT NULL,
    command_digest TEXT    NOT NULL,
    result         BLOB,
    result_digest  TEXT,
    digest         TEXT    NOT NULL
);

CREATE TABLE member_bindings (
    binding_id TEXT    NOT NULL,
    generation INTEGER NOT NULL CHECK (generation >= 1),
    revision   INTEGER NOT NULL CHECK (revision >= 0),
    party_id   TEXT    NOT NULL,
    project_id TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    account    TEXT    NOT NULL,
    retired    INTEGER NOT NULL CHECK (retired IN (0, 1)),
    applied_by TEXT    NOT NULL,
    digest     TEXT    NOT NULL,
    PRIMARY KEY (binding_id, generation)
);
