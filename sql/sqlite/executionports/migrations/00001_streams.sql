-- Command streams of the execution_ports context (docs/site-protocol.md).
-- Times are RFC 3339 text in UTC.
-- +goose Up
CREATE TABLE streams (
    environment TEXT PRIMARY KEY,
    head_sequence INTEGER NOT NULL DEFAULT 0 CHECK (head_sequence >= 0),
    acknowledged_sequence INTEGER NOT NULL DEFAULT 0
        CHECK (acknowledged_sequence >= 0 AND acknowledged_sequence <= head_sequence),
    installation_id TEXT,
    bound_at TEXT,
    created_at TEXT NOT NULL
) STRICT;

-- canonical is the command's JCS object without sequence and digest, exactly
-- as received and canonicalised at append; result is the recorded result's
-- exact bytes.
CREATE TABLE commands (
    environment TEXT NOT NULL REFERENCES streams (environment),
    sequence INTEGER NOT NULL CHECK (sequence > 0),
    command_id TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    canonical BLOB NOT NULL,
    appended_at TEXT NOT NULL,
    result BLOB,
    result_digest TEXT,
    acknowledged_at TEXT,
    PRIMARY KEY (environment, sequence),
    CHECK ((result IS NULL) = (result_digest IS NULL) AND (result IS NULL) = (acknowledged_at IS NULL))
) STRICT;

-- Every binding of a stream to a Runtime installation: the first pull's and
-- each operator rebind, with who and when.
CREATE TABLE stream_bindings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    environment TEXT NOT NULL REFERENCES streams (environment),
    action TEXT NOT NULL CHECK (action IN ('bound', 'rebound')),
    installation_id TEXT,
    previous_installation_id TEXT,
    principal TEXT NOT NULL,
    reason TEXT NOT NULL,
    recorded_at TEXT NOT NULL
) STRICT;
CREATE INDEX stream_bindings_environment ON stream_bindings (environment, id);

-- +goose Down
DROP TABLE stream_bindings;
DROP TABLE commands;
DROP TABLE streams;
