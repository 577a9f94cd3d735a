-- Delivery of member bindings to the Runtimes (docs/execution-ports.md#delivery-of-member-bindings):
-- one row per delivered binding revision, holding the command's exact
-- canonical bytes before it is appended, so a retry appends the same bytes.
-- Times are RFC 3339 text in UTC.
-- +goose Up
CREATE TABLE binding_deliveries (
    environment TEXT NOT NULL,
    binding_id TEXT NOT NULL,
    revision INTEGER NOT NULL CHECK (revision > 0),
    generation INTEGER NOT NULL CHECK (generation > 0),
    operation TEXT NOT NULL CHECK (operation IN ('bind-member', 'retire-member')),
    command_id TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    canonical BLOB NOT NULL,
    planned_at TEXT NOT NULL,
    sequence INTEGER CHECK (sequence > 0),
    appended_at TEXT,
    applied_revision INTEGER CHECK (applied_revision > 0),
    outcome TEXT,
    reason TEXT,
    acknowledged_at TEXT,
    PRIMARY KEY (environment, binding_id, revision),
    CHECK ((sequence IS NULL) = (appended_at IS NULL))
) STRICT;

-- +goose Down
DROP TABLE binding_deliveries;
