-- The last Runtime version each stream's Runtime reported on a pull
-- (docs/execution-ports.md#runtime-versions): one row per environment, with
-- the installation that pulled and the time of that pull. version is the
-- Metallo-Runtime-Version header, '' when the pull carried none.
-- +goose Up
CREATE TABLE runtime_versions (
    environment TEXT PRIMARY KEY REFERENCES streams (environment),
    installation_id TEXT NOT NULL,
    version TEXT NOT NULL CHECK (octet_length(version) <= 128),
    pulled_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE runtime_versions;
