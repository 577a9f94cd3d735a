-- +goose Up
-- An operator's explicit unbind is recorded as 'unbound' (it was recorded
-- as 'rebound' with no installation). SQLite cannot change a CHECK
-- constraint: the table is rebuilt.
CREATE TABLE stream_bindings_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    environment TEXT NOT NULL REFERENCES streams (environment),
    action TEXT NOT NULL CHECK (action IN ('bound', 'rebound', 'unbound')),
    installation_id TEXT,
    previous_installation_id TEXT,
    principal TEXT NOT NULL,
    reason TEXT NOT NULL,
    recorded_at TEXT NOT NULL
) STRICT;
INSERT INTO stream_bindings_new (id, environment, action, installation_id, previous_installation_id, principal, reason, recorded_at)
SELECT id, environment,
       CASE WHEN action = 'rebound' AND installation_id IS NULL THEN 'unbound' ELSE action END,
       installation_id, previous_installation_id, principal, reason, recorded_at
FROM stream_bindings;
DROP TABLE stream_bindings;
ALTER TABLE stream_bindings_new RENAME TO stream_bindings;
CREATE INDEX stream_bindings_environment ON stream_bindings (environment, id);

-- +goose Down
CREATE TABLE stream_bindings_old (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    environment TEXT NOT NULL REFERENCES streams (environment),
    action TEXT NOT NULL CHECK (action IN ('bound', 'rebound')),
    installation_id TEXT,
    previous_installation_id TEXT,
    principal TEXT NOT NULL,
    reason TEXT NOT NULL,
    recorded_at TEXT NOT NULL
) STRICT;
INSERT INTO stream_bindings_old (id, environment, action, installation_id, previous_installation_id, principal, reason, recorded_at)
SELECT id, environment, CASE WHEN action = 'unbound' THEN 'rebound' ELSE action END,
       installation_id, previous_installation_id, principal, reason, recorded_at
FROM stream_bindings;
DROP TABLE stream_bindings;
ALTER TABLE stream_bindings_old RENAME TO stream_bindings;
CREATE INDEX stream_bindings_environment ON stream_bindings (environment, id);
