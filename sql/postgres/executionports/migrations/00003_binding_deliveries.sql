-- Delivery of member bindings to the Runtimes (docs/execution-ports.md#delivery-of-member-bindings):
-- one row per delivered binding revision, holding the command's exact
-- canonical bytes before it is appended, so a retry appends the same bytes.
-- +goose Up
CREATE TABLE binding_deliveries (
    environment TEXT NOT NULL,
    binding_id TEXT NOT NULL,
    revision BIGINT NOT NULL CHECK (revision > 0),
    generation BIGINT NOT NULL CHECK (generation > 0),
    operation TEXT NOT NULL CHECK (operation IN ('bind-member', 'retire-member')),
    command_id TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    canonical BYTEA NOT NULL,
    planned_at TIMESTAMPTZ NOT NULL,
    sequence BIGINT CHECK (sequence > 0),
    appended_at TIMESTAMPTZ,
    applied_revision BIGINT CHECK (applied_revision > 0),
    outcome TEXT,
    reason TEXT,
    acknowledged_at TIMESTAMPTZ,
    PRIMARY KEY (environment, binding_id, revision),
    CHECK ((sequence IS NULL) = (appended_at IS NULL))
);

-- +goose Down
DROP TABLE binding_deliveries;
