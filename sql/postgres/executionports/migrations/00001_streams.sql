-- Command streams of the execution_ports context (docs/site-protocol.md).
-- +goose Up
CREATE TABLE streams (
    environment text PRIMARY KEY,
    head_sequence bigint NOT NULL DEFAULT 0 CHECK (head_sequence >= 0),
    acknowledged_sequence bigint NOT NULL DEFAULT 0
        CHECK (acknowledged_sequence >= 0 AND acknowledged_sequence <= head_sequence),
    installation_id text,
    bound_at timestamptz,
    created_at timestamptz NOT NULL
);

-- canonical is the command's JCS object without sequence and digest, exactly
-- as received and canonicalised at append; result is the recorded result's
-- exact bytes.
CREATE TABLE commands (
    environment text NOT NULL REFERENCES streams (environment),
    sequence bigint NOT NULL CHECK (sequence > 0),
    command_id text NOT NULL,
    digest text NOT NULL,
    canonical bytea NOT NULL,
    appended_at timestamptz NOT NULL,
    result bytea,
    result_digest text,
    acknowledged_at timestamptz,
    PRIMARY KEY (environment, sequence),
    CONSTRAINT commands_command_id_key UNIQUE (command_id),
    CHECK ((result IS NULL) = (result_digest IS NULL) AND (result IS NULL) = (acknowledged_at IS NULL))
);

-- Every binding of a stream to a Runtime installation: the first pull's and
-- each operator rebind, with who and when.
CREATE TABLE stream_bindings (
    id bigserial PRIMARY KEY,
    environment text NOT NULL REFERENCES streams (environment),
    action text NOT NULL CHECK (action IN ('bound', 'rebound')),
    installation_id text,
    previous_installation_id text,
    principal text NOT NULL,
    reason text NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX stream_bindings_environment ON stream_bindings (environment, id);

-- +goose Down
DROP TABLE stream_bindings;
DROP TABLE commands;
DROP TABLE streams;
