-- Where read results live (docs/execution-ports.md#read-results-retention):
-- each command keeps its operation (read from its canonical form, so the
-- results of read-logs, read-file and proxy can be found), and a read's
-- result content is dropped after the retention while its digest stays
-- (result_expired_at says when). SQLite cannot change a CHECK constraint:
-- the table is rebuilt. Down is refused while any result has expired (the
-- old CHECK fails): its content cannot come back. Times are RFC 3339 text
-- in UTC.
-- +goose Up
CREATE TABLE commands_new (
    environment TEXT NOT NULL REFERENCES streams (environment),
    sequence INTEGER NOT NULL CHECK (sequence > 0),
    command_id TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    canonical BLOB NOT NULL,
    appended_at TEXT NOT NULL,
    result BLOB,
    result_digest TEXT,
    acknowledged_at TEXT,
    operation TEXT NOT NULL,
    result_expired_at TEXT,
    PRIMARY KEY (environment, sequence),
    CHECK (
        (result_digest IS NULL) = (acknowledged_at IS NULL)
        AND (result IS NULL) = (result_digest IS NULL OR result_expired_at IS NOT NULL)
        AND (result_expired_at IS NULL OR result_digest IS NOT NULL)
    )
) STRICT;
INSERT INTO commands_new (environment, sequence, command_id, digest, canonical, appended_at, result, result_digest, acknowledged_at, operation)
SELECT environment, sequence, command_id, digest, canonical, appended_at, result, result_digest, acknowledged_at,
       COALESCE(json_extract(CAST(canonical AS TEXT), '$.operation'), '')
FROM commands;
DROP TABLE commands;
ALTER TABLE commands_new RENAME TO commands;
-- The sweep's scan: results still held, by operation and age.
CREATE INDEX commands_held_results ON commands (operation, acknowledged_at) WHERE result IS NOT NULL;

-- +goose Down
CREATE TABLE commands_old (
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
INSERT INTO commands_old (environment, sequence, command_id, digest, canonical, appended_at, result, result_digest, acknowledged_at)
SELECT environment, sequence, command_id, digest, canonical, appended_at, result, result_digest, acknowledged_at
FROM commands;
DROP TABLE commands;
ALTER TABLE commands_old RENAME TO commands;
