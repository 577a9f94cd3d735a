-- The stop a stream's Runtime last reported (docs/execution-ports.md#runtime-stops):
-- at most one row per environment, with the installation that reported it,
-- the stop reason (the protocol's closed vocabulary, siteprotocol.StopReasons),
-- the sequence the Runtime stopped at, its version and its cause. A binding
-- pull (the Runtime working again) deletes the row in the pull's own
-- transaction.
-- +goose Up
CREATE TABLE runtime_stops (
    environment TEXT PRIMARY KEY REFERENCES streams (environment),
    installation_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    sequence BIGINT NOT NULL CHECK (sequence >= 0),
    version TEXT NOT NULL CHECK (octet_length(version) <= 128),
    message TEXT NOT NULL,
    stopped_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE runtime_stops;
