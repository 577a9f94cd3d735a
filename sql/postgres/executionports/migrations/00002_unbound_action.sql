-- +goose Up
-- An operator's explicit unbind is recorded as 'unbound' (it was recorded
-- as 'rebound' with no installation).
ALTER TABLE stream_bindings DROP CONSTRAINT stream_bindings_action_check;
UPDATE stream_bindings SET action = 'unbound' WHERE action = 'rebound' AND installation_id IS NULL;
ALTER TABLE stream_bindings ADD CONSTRAINT stream_bindings_action_check CHECK (action IN ('bound', 'rebound', 'unbound'));

-- +goose Down
ALTER TABLE stream_bindings DROP CONSTRAINT stream_bindings_action_check;
UPDATE stream_bindings SET action = 'rebound' WHERE action = 'unbound';
ALTER TABLE stream_bindings ADD CONSTRAINT stream_bindings_action_check CHECK (action IN ('bound', 'rebound'));
