-- jobs.sqlite and services.sqlite, schema version 1: durable records of
-- native objects (identity, progress, rendered specification and its
-- digest), written before the delivery result that reports them.
CREATE TABLE native_records (
    attempt_id   TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    namespace    TEXT    NOT NULL,
    uid          TEXT    NOT NULL,
    service_kind TEXT    NOT NULL,
    phase        TEXT    NOT NULL,
    command_id   TEXT    NOT NULL,
    sequence     INTEGER NOT NULL,
    spec         BLOB    NOT NULL,
    spec_digest  TEXT    NOT NULL,
    digest       TEXT    NOT NULL,
    PRIMARY KEY (attempt_id, kind, name)
);
