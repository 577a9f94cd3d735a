-- The last Runtime version each stream's Runtime reported on a pull
-- (docs/execution-ports.md#runtime-versions): one row per environment, with
-- the installation that pulled and the time of that pull. version is the
-- Metallo-Runtime-Version header, '' when the pull carried none. Times are
-- RFC 3339 text in UTC.
-- +goose Up
CREATE TABLE runtime_versions (
    environment TEXT PRIMARY KEY REFERENCES streams (environment),
    installation_id TEXT NOT NULL,
    version TEXT NOT NULL CHECK (length(CAST(version AS BLOB)) <= 128),
    pulled_at TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE runtime_versions;
