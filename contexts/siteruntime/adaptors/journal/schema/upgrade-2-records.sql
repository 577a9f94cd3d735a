-- jobs.sqlite and services.sqlite, schema version 2 (the upgrade from
-- version 1, run by `metallo runtime install`; a fresh installation applies
-- it too): the terminal state a native object the Runtime created reported
-- while it existed, recorded by the Runtime's watch the moment it appeared.
-- A fact of the object, never a decision: it advances no Run. observe
-- reports it once the object is gone. The first state recorded for an
-- object (attempt, kind, name, uid) is kept.
CREATE TABLE terminal_states (
    attempt_id  TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    namespace   TEXT    NOT NULL,
    uid         TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('succeeded', 'failed')),
    reason      TEXT    NOT NULL,
    message     TEXT    NOT NULL,
    started_at  TEXT    NOT NULL,
    finished_at TEXT    NOT NULL,
    exit_code   INTEGER,
    observed_at TEXT    NOT NULL,
    digest      TEXT    NOT NULL,
    PRIMARY KEY (attempt_id, kind, name, uid)
);
